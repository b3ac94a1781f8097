"""Which values of a row are ids, on generated nested schemas with nulls anywhere.

The Spark walks (`identity.id_holder`, behind `row_ids`, `row_hashes` and `holds_any`: what the
filters are built from and what requests match) and the Arrow walk (`plain_ids`, what deletes
and `privacy verify` check with) are each compared, row by row, with a plain Python walk of the
same generated values, written here from the rules: map values (never keys), list elements, a
struct's `id` field, atomic values as their text; a null anywhere hides only itself.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    ArrayType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from tracelake.privacy.identity import holds_any, row_hashes, row_ids
from tracelake.privacy.plain_ids import ids_with_rows
from tracelake.privacy.writer import flat_keys

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ATOMS: list[DataType] = [StringType(), IntegerType(), LongType(), ShortType()]
# Few letters, spaces and cases: ids that differ only by case or whitespace turn up often.
ID_TEXT = st.text(alphabet="aAb 1", max_size=3)
BOUNDS = {IntegerType: 2**31, LongType: 2**63, ShortType: 2**15}


def identity_types() -> st.SearchStrategy[DataType]:
    """Identity column types: atoms nested in arrays, maps and structs holding an `id`."""

    def nested(inner: st.SearchStrategy[DataType]) -> st.SearchStrategy[DataType]:
        return st.one_of(
            inner.map(ArrayType),
            inner.map(lambda value: MapType(StringType(), value)),
            st.tuples(inner, st.sampled_from(["id", "ID", "Id"]), st.booleans()).map(
                lambda args: StructType(
                    [StructField(args[1], args[0])] + ([StructField("kind", StringType())] if args[2] else [])
                )
            ),
        )

    return st.recursive(st.sampled_from(ATOMS), nested, max_leaves=4)


def values_of(data_type: DataType) -> st.SearchStrategy[Any]:
    """Python values of `data_type`, null possible at every level (as Spark takes them in)."""
    if isinstance(data_type, ArrayType):
        inner = st.lists(values_of(data_type.elementType), max_size=3)
    elif isinstance(data_type, MapType):
        inner = st.dictionaries(
            st.text(alphabet="kx", max_size=2), values_of(data_type.valueType), max_size=3
        )
    elif isinstance(data_type, StructType):
        inner = st.tuples(*[values_of(field.dataType) for field in data_type.fields])
    elif isinstance(data_type, StringType):
        inner = ID_TEXT
    else:
        bound = BOUNDS[type(data_type)]
        inner = st.integers(-bound, bound - 1) | st.integers(-3, 3)
    return st.none() | inner


def python_ids(value: Any, data_type: DataType) -> list[str]:
    """The ids under a value, by the rules, in plain Python."""
    if value is None:
        return []
    if isinstance(data_type, ArrayType):
        return [found for item in value for found in python_ids(item, data_type.elementType)]
    if isinstance(data_type, MapType):
        return [found for item in value.values() for found in python_ids(item, data_type.valueType)]
    if isinstance(data_type, StructType):
        position = next(i for i, field in enumerate(data_type.fields) if field.name.lower() == "id")
        return python_ids(value[position], data_type.fields[position].dataType)
    return [str(value)]


@st.composite
def identity_frames(draw: st.DrawFn) -> tuple[DataType, list[Any], list[str]]:
    """A column type, rows of it, and ids to look for (some present, some not)."""
    data_type = draw(identity_types())
    rows = draw(st.lists(values_of(data_type), min_size=1, max_size=10))
    present = sorted({found for row in rows for found in python_ids(row, data_type)})
    wanted = draw(st.lists(st.sampled_from(present), max_size=3, unique=True)) if present else []
    return data_type, rows, [*wanted, *draw(st.lists(ID_TEXT, max_size=2))]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(identity_frames())
def test_the_spark_walk_finds_exactly_the_ids_a_plain_walk_finds(
    spark: SparkSession, case: tuple[DataType, list[Any], list[str]]
) -> None:
    data_type, values, wanted = case
    schema = StructType([StructField("n", IntegerType()), StructField("c", data_type)])
    df = spark.createDataFrame([(n, value) for n, value in enumerate(values)], schema)
    got = df.select(
        "n",
        row_ids(df.schema, "c").alias("ids"),
        holds_any(df.schema, ["c"], wanted or ["-"]).alias("holds"),
        row_hashes(df.schema, "c").alias("hashes"),
    ).toArrow()
    hashes = got.column("hashes").combine_chunks()
    for position, n in enumerate(got.column("n").to_pylist()):
        expected = python_ids(values[n], data_type)
        ids = got.column("ids")[position].as_py()
        assert Counter(ids) == Counter(expected), (data_type.simpleString(), values[n])
        # The filter keys as the writer's sink takes them from the batch Spark hands it.
        keys = flat_keys(hashes.slice(position, 1)).tolist()
        assert Counter(keys) == Counter(xxhash.xxh64_intdigest(i.encode(), 42) for i in expected)
        assert got.column("holds")[position].as_py() is bool(set(expected) & set(wanted))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(identity_frames())
def test_the_arrow_walk_finds_exactly_the_ids_a_plain_walk_finds(
    spark: SparkSession, case: tuple[DataType, list[Any], list[str]]
) -> None:
    data_type, values, _ = case
    schema = StructType([StructField("n", IntegerType()), StructField("c", data_type)])
    table = spark.createDataFrame([(n, value) for n, value in enumerate(values)], schema).toArrow()
    numbers = table.column("n").to_pylist()
    texts, rows = ids_with_rows(table.column("c").combine_chunks())
    found: dict[int, Counter[str]] = {}
    for text, row in zip(texts.to_pylist(), rows.to_pylist(), strict=True):
        found.setdefault(numbers[row], Counter())[text] += 1
    for n, value in enumerate(values):
        assert found.get(n, Counter()) == Counter(python_ids(value, data_type)), (
            data_type.simpleString(),
            value,
        )


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ({"phone": None, "email": [{"id": "m1", "primary": True}]}, ["m1"]),
        ({"phone": [None, {"id": None, "primary": None}], "ecid": [{"id": "e1", "primary": False}]}, ["e1"]),
        (None, []),
        ({}, []),
    ],
)
def test_an_id_beside_a_null_list_in_an_identity_map_is_still_an_id(
    spark: SparkSession, value: Any, ids: list[str]
) -> None:
    """The shape that once hid a row's ids: Spark's `flatten` of a list holding a null list is null."""
    df = spark.createDataFrame([(value,)], "m map<string, array<struct<id:string, primary:boolean>>>")
    got = df.select(row_ids(df.schema, "m").alias("ids"), row_hashes(df.schema, "m").alias("h")).toArrow()
    assert got.column("ids")[0].as_py() == ids
    keys = flat_keys(got.column("h").combine_chunks()).tolist()
    assert keys == [xxhash.xxh64_intdigest(i.encode(), 42) for i in ids]
