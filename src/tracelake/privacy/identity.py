"""Identity columns: which values of a row are ids, as Spark column expressions.

An identity column is a top-level column whose values, wherever they sit in it, are user ids:
a string or integer is one id; an array holds one per element; a map holds ids in its values
(its keys only name the namespace, e.g. `email` or `ECID`, and any key counts); a struct holds
its id in the field named `id` (the Experience Data Model's identity map shape,
`map<string, array<struct<id:string, primary:boolean>>>`). Every id is compared and hashed as
its text (`CAST(id AS STRING)`), so the long 42 and the string "42" are the same id.

`row_ids` gives a row's ids of one column as `array<string>`; `row_hashes` their XXH64 hashes as
Spark computes them, the keys of the identity filters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType

ID_FIELD = "id"


class IdentityError(ValueError):
    """An identity column that is missing or whose type holds no ids we know how to find."""


def check_identity_columns(schema: StructType, columns: Sequence[str]) -> list[str]:
    """The columns as named in `schema` (case-insensitive match); raises IdentityError if not usable."""
    if not columns:
        raise IdentityError("name at least one identity column")
    by_lower = {field.name.lower(): field for field in schema.fields}
    found = []
    for column in columns:
        field = by_lower.get(column.lower())
        if field is None:
            known = ", ".join(schema.fieldNames())
            raise IdentityError(f"identity column {column!r} is not in the data (columns: {known})")
        _check_type(field.dataType, column)
        found.append(field.name)
    return list(dict.fromkeys(found))


def row_ids(schema: StructType, column: str) -> Column:
    """`array<string>` of the ids in `column` of each row, nulls left out (never null itself)."""
    from pyspark.sql import functions as F

    ids = _ids(F.col(f"`{column}`"), schema[column].dataType)
    return F.coalesce(F.filter(ids, lambda value: value.isNotNull()), F.array().cast("array<string>"))


def row_hashes(schema: StructType, column: str) -> Column:
    """Spark's `xxhash64` of each id of `row_ids` (the identity filters' keys).

    A plain column gives a nullable `bigint` (no array to build per row: this runs on every row
    an indexed write writes), any other an `array<bigint>`.
    """
    return _hashes(_column(schema, column), schema[column].dataType)


def _hashes(value: Column, data_type: DataType) -> Column:
    """The id hashes under `value`: one `bigint` where the type holds one id, else a flat array
    (nulls left in: the sink drops them). As few arrays as the nesting needs: this runs per row."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, MapType):
        return _hashes(F.map_values(value), ArrayType(data_type.valueType))
    if isinstance(data_type, StructType):
        name = _id_field(data_type) or ID_FIELD
        return _hashes(value.getField(name), data_type[name].dataType)
    if isinstance(data_type, ArrayType):
        element = data_type.elementType
        each = F.transform(value, lambda item: _hashes(item, element))
        return each if _holds_one(element) else F.flatten(each)
    return F.when(value.isNotNull(), F.xxhash64(value.cast("string")))


def _holds_one(data_type: DataType) -> bool:
    """Whether a value of this type is a single id (an atomic, or a struct with an atomic id)."""
    from pyspark.sql.types import StructType

    if isinstance(data_type, StructType):
        name = _id_field(data_type) or ID_FIELD
        return _holds_one(data_type[name].dataType)
    return _is_atomic(data_type)


def holds_any(schema: StructType, columns: Sequence[str], ids: Sequence[str]) -> Column:
    """True for rows holding any of `ids` in any of `columns`, without building id arrays.

    A string column is a plain `IN` (which Spark pushes down to Parquet); nested ids are
    tested where they sit, with `exists`, so rows that match nothing cost no allocation.
    """
    from functools import reduce

    from pyspark.sql import functions as F

    wanted = list(ids)
    # Never null: a delete keeps the rows where this is false, and NOT NULL would drop them too.
    tests = [
        F.coalesce(_holds(_column(schema, column), schema[column].dataType, wanted), F.lit(False))
        for column in columns
    ]
    return reduce(lambda left, right: left | right, tests)


def _column(schema: StructType, name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"`{schema[name].name}`")


def _holds(value: Column, data_type: DataType, ids: list[str]) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StringType, StructType

    if isinstance(data_type, ArrayType):
        return F.exists(value, lambda item: _holds(item, data_type.elementType, ids))
    if isinstance(data_type, MapType):
        return F.exists(F.map_values(value), lambda item: _holds(item, data_type.valueType, ids))
    if isinstance(data_type, StructType):
        name = _id_field(data_type) or ID_FIELD
        return _holds(value.getField(name), data_type[name].dataType, ids)
    text = value if isinstance(data_type, StringType) else value.cast("string")
    return text.isin(ids)


def all_row_ids(schema: StructType, columns: Sequence[str]) -> Column:
    """The distinct ids of a row over several identity columns."""
    from pyspark.sql import functions as F

    parts = [row_ids(schema, column) for column in columns]
    return F.array_distinct(parts[0] if len(parts) == 1 else F.concat(*parts))


def _ids(value: Column, data_type: DataType) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, ArrayType):
        element = data_type.elementType
        if _is_atomic(element):
            return F.transform(value, lambda item: item.cast("string"))
        return F.flatten(F.transform(value, lambda item: _ids(item, element)))
    if isinstance(data_type, MapType):
        return _ids(F.map_values(value), ArrayType(data_type.valueType))
    if isinstance(data_type, StructType):
        name = _id_field(data_type) or ID_FIELD  # checked by check_identity_columns
        return _ids(value.getField(name), data_type[name].dataType)
    return F.array(value.cast("string"))


def _check_type(data_type: DataType, column: str) -> None:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, ArrayType):
        _check_type(data_type.elementType, column)
    elif isinstance(data_type, MapType):
        _check_type(data_type.valueType, column)
    elif isinstance(data_type, StructType):
        name = _id_field(data_type)
        if name is None:
            raise IdentityError(
                f"identity column {column!r}: a struct in it has no {ID_FIELD!r} field "
                f"({data_type.simpleString()})"
            )
        _check_type(data_type[name].dataType, column)
    elif not _is_atomic(data_type):
        raise IdentityError(
            f"identity column {column!r}: ids must be strings or integers, not {data_type.simpleString()}"
        )


def _id_field(struct: StructType) -> str | None:
    return next((name for name in struct.fieldNames() if name.lower() == ID_FIELD), None)


def _is_atomic(data_type: DataType) -> bool:
    from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType, StringType

    return isinstance(data_type, StringType | ByteType | ShortType | IntegerType | LongType)
