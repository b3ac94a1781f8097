"""Identity columns: which values of a row are ids, as Spark column expressions.

An identity column is a top-level column whose values, wherever they sit in it, are user ids:
a string or integer is one id; an array holds one per element; a map holds ids in its values
(its keys only name the namespace, e.g. `email` or `ECID`, and any key counts; a key is never
an id); a struct holds its id in the field named `id` (the Experience Data Model's identity map
shape, `map<string, array<struct<id:string, primary:boolean>>>`). Every id is compared and
hashed as its text (`CAST(id AS STRING)`), so the long 42 and the string "42" are the same id;
text is compared exactly, so "U1" and " u1" are not "u1". A null at any depth hides nothing but
itself.

`id_texts` is the one walk over a column's type; `row_ids` gives a row's ids of one column as
`array<string>`, `row_hashes` their XXH64 hashes as Spark computes them (the identity filters'
keys), `holds_any` tests rows against a set of ids — all three from that walk.
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

    ids, many = id_texts(_column(schema, column), schema[column].dataType)
    return F.coalesce(
        F.filter(ids if many else F.array(ids), lambda value: value.isNotNull()),
        F.array().cast("array<string>"),
    )


def row_hashes(schema: StructType, column: str) -> Column:
    """Spark's `xxhash64` of each id of `row_ids` (the identity filters' keys).

    A plain column gives a nullable `bigint` (no array to build per row: this runs on every row
    an indexed write writes), any other an `array<bigint>` (nulls left in: the sink drops them).
    """
    from pyspark.sql import functions as F

    ids, many = id_texts(_column(schema, column), schema[column].dataType)
    if not many:
        return _hash(ids)
    return F.transform(ids, _hash)


def _hash(text: Column) -> Column:
    from pyspark.sql import functions as F

    # Spark's xxhash64 of a null is its seed, not null: a null id must not become a key.
    return F.when(text.isNotNull(), F.xxhash64(text))


def holds_any(schema: StructType, columns: Sequence[str], ids: Sequence[str]) -> Column:
    """True for rows holding any of `ids` in any of `columns` (never null).

    A string column is a plain `IN` (which Spark pushes down to Parquet); nested ids are
    tested with `exists` over the same walk `row_ids` takes.
    """
    from functools import reduce

    from pyspark.sql import functions as F

    wanted = list(ids)
    tests = []
    for column in columns:
        texts, many = id_texts(_column(schema, column), schema[column].dataType)
        test = F.exists(texts, lambda value: value.isin(wanted)) if many else texts.isin(wanted)
        # Never null: a delete keeps the rows where this is false, and NOT NULL would drop them too.
        tests.append(F.coalesce(test, F.lit(False)))
    return reduce(lambda left, right: left | right, tests)


def all_row_ids(schema: StructType, columns: Sequence[str]) -> Column:
    """The distinct ids of a row over several identity columns."""
    from pyspark.sql import functions as F

    parts = [row_ids(schema, column) for column in columns]
    return F.array_distinct(parts[0] if len(parts) == 1 else F.concat(*parts))


def id_texts(value: Column, data_type: DataType) -> tuple[Column, bool]:
    """The one walk that says which values under `value` are ids, as their text.

    Returns `(text, False)` where the type holds a single id (a nullable string), else
    `(texts, True)`: an `array<string>` that is null only where `value` is, and may hold nulls.
    Every identity filter is built and every request is matched from this walk, so the two
    cannot disagree. A null anywhere — map, list, struct, element, id — hides only itself:
    Spark's `flatten` (like `concat`) is null when any inner array is, so null inner arrays are
    dropped before it.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StringType, StructType

    if isinstance(data_type, MapType):
        return id_texts(F.map_values(value), ArrayType(data_type.valueType))
    if isinstance(data_type, StructType):
        name = _id_field(data_type) or ID_FIELD  # checked by check_identity_columns
        return id_texts(value.getField(name), data_type[name].dataType)
    if isinstance(data_type, ArrayType):
        element = data_type.elementType
        each = F.transform(value, lambda item: id_texts(item, element)[0])
        if _holds_one(element):
            return each, True
        return F.flatten(F.filter(each, lambda inner: inner.isNotNull())), True
    return (value if isinstance(data_type, StringType) else value.cast("string")), False


def _holds_one(data_type: DataType) -> bool:
    """Whether a value of this type is a single id (an atomic, or a struct with an atomic id)."""
    from pyspark.sql.types import StructType

    if isinstance(data_type, StructType):
        name = _id_field(data_type) or ID_FIELD
        return _holds_one(data_type[name].dataType)
    return _is_atomic(data_type)


def _column(schema: StructType, name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"`{schema[name].name}`")


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
