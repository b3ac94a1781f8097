"""Identity columns: which values of a row are ids, as Spark column expressions.

An identity column is a top-level column whose values, wherever they sit in it, are user ids:
a string or integer is one id; an array holds one per element; a map holds ids in its values
(its keys only name the namespace, e.g. `email` or `ECID`, and any key counts; a key is never
an id); a struct holds its id in the field named `id` (the Experience Data Model's identity map
shape, `map<string, array<struct<id:string, primary:boolean>>>`). Every id is compared and
hashed as its text (`CAST(id AS STRING)`), so the long 42 and the string "42" are the same id;
text is compared exactly, so "U1" and " u1" are not "u1". A null at any depth hides nothing but
itself.

`id_holder` is the one rule of where ids sit. Two walks apply it, differing only in how they
combine an array's elements: `gather_ids` collects (behind `row_ids`, a row's ids of one column
as `array<string>`, and `row_hashes`, their XXH64 hashes as Spark computes them: the identity
filters' keys) and `any_id` tests without building arrays (behind `holds_any`, which requests
match rows with). A property test holds all three to a plain Python walk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    return _flat(gather_ids(_column(schema, column), schema[column].dataType, lambda text: text), "string")


def row_hashes(schema: StructType, column: str) -> Column:
    """`array<bigint>`: Spark's `xxhash64` of each id of `row_ids` (the identity filters' keys),
    one flat array a row whatever the column's nesting, as the writer's sink takes them."""
    return _flat(gather_ids(_column(schema, column), schema[column].dataType, _hash), "bigint")


def _flat(found: tuple[Column, int], element: str) -> Column:
    """What `gather_ids` found, as one `array<element>` a row: nulls left out, never null."""
    from pyspark.sql import functions as F

    values, depth = found
    if depth == 0:
        values = F.array(values)
    for _ in range(depth - 1):
        # Spark's `flatten` (like `concat`) is null when any inner array is: drop those first.
        values = F.flatten(F.array_compact(values))
    return F.coalesce(F.array_compact(values), F.array().cast(f"array<{element}>"))


def _hash(text: Column) -> Column:
    from pyspark.sql import functions as F

    # Spark's xxhash64 of a null is its seed, not null: a null id must not become a key.
    return F.when(text.isNotNull(), F.xxhash64(text))


def holds_any(schema: StructType, columns: Sequence[str], ids: Sequence[str]) -> Column:
    """True for rows holding any of `ids` in any of `columns` (never null).

    A string column is a plain `IN` (which Spark pushes down to Parquet); nested ids are
    tested where they sit, with `exists`, so rows that match nothing build no array.
    """
    from functools import reduce

    from pyspark.sql import functions as F

    wanted = list(ids)
    tests = [
        # Never null: a delete keeps the rows where this is false, and NOT NULL would drop them too.
        F.coalesce(
            any_id(_column(schema, c), schema[c].dataType, lambda text: text.isin(wanted)), F.lit(False)
        )
        for c in columns
    ]
    return reduce(lambda left, right: left | right, tests)


def all_row_ids(schema: StructType, columns: Sequence[str]) -> Column:
    """The distinct ids of a row over several identity columns."""
    from pyspark.sql import functions as F

    parts = [row_ids(schema, column) for column in columns]
    return F.array_distinct(parts[0] if len(parts) == 1 else F.concat(*parts))


def id_holder(value: Column | None, data_type: DataType) -> tuple[Column | None, DataType]:
    """The rule of where ids sit, in one place: from `value` down to an array whose elements
    hold ids, or to an id itself — a map's values (never its keys), a struct's `id` field.
    With no `value`, only the type is followed."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    while isinstance(data_type, MapType | StructType):
        if isinstance(data_type, MapType):
            value = None if value is None else F.map_values(value)
            data_type = ArrayType(data_type.valueType)
        else:
            name = _id_field(data_type) or ID_FIELD  # checked by check_identity_columns
            value = None if value is None else value.getField(name)
            data_type = data_type[name].dataType
    return value, data_type


def gather_ids(value: Column, data_type: DataType, at_id: Callable[[Column], Column]) -> tuple[Column, int]:
    """`at_id` of every id under `value` (given as its text), and how many arrays deep they sit:
    0 where the type holds a single id, else an array per level of arrays (a map's values are
    one), each null only where its value is, nulls possible in it."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    held, data_type = id_holder(value, data_type)
    assert held is not None
    if not isinstance(data_type, ArrayType):
        return at_id(_text(held, data_type)), 0
    element = data_type.elementType
    return F.transform(held, lambda item: gather_ids(item, element, at_id)[0]), _depth(element) + 1


def any_id(value: Column, data_type: DataType, test: Callable[[Column], Column]) -> Column:
    """Whether `test` holds for any id under `value` (null, not false, where none does and
    some value was null: `exists` skips nulls and says true on any match)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    held, data_type = id_holder(value, data_type)
    assert held is not None
    if not isinstance(data_type, ArrayType):
        return test(_text(held, data_type))
    element = data_type.elementType
    return F.exists(held, lambda item: any_id(item, element, test))


def _text(value: Column, data_type: DataType) -> Column:
    from pyspark.sql.types import StringType

    return value if isinstance(data_type, StringType) else value.cast("string")


def _depth(data_type: DataType) -> int:
    """How many arrays deep `gather_ids` nests the ids of a value of this type."""
    from pyspark.sql.types import ArrayType

    _, holder = id_holder(None, data_type)
    return 1 + _depth(holder.elementType) if isinstance(holder, ArrayType) else 0


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
