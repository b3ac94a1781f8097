"""Ids read straight from Parquet files by a plain Arrow walk: the check on what Spark computes.

Identity filters are built and requests matched by Spark walks over one rule (`identity.id_holder`). This
module finds the same ids a second, independent way — pyarrow reads the identity columns of a
file and unnests them level by level, keeping each id's row number — so that a delete can
re-read what it wrote and `privacy verify` can test an index without trusting the code that
built it. The rules are the same, written again: map values (never keys), list elements, a
struct's `id` field (any case), atomic values as their text; a null anywhere hides only itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tracelake.privacy.identity import ID_FIELD, IdentityError

if TYPE_CHECKING:
    import pyarrow as pa

_BATCH_ROWS = 65_536


def ids_with_rows(array: pa.Array, rows: pa.Array | None = None) -> tuple[pa.Array, pa.Array]:
    """Every id under `array` as text, and the row (of `rows`, default 0…n-1) each sits in."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if rows is None:
        rows = pa.array(range(len(array)), pa.int64())
    kind = array.type
    if pa.types.is_map(kind):
        entries = pa.list_(pa.field("entries", pa.struct([kind.key_field, kind.item_field]), nullable=False))
        as_list = array.cast(entries)
        values = pc.struct_field(pc.list_flatten(as_list), [1])
        return ids_with_rows(values, rows.take(pc.list_parent_indices(as_list)))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return ids_with_rows(pc.list_flatten(array), rows.take(pc.list_parent_indices(array)))
    if pa.types.is_struct(kind):
        names = [kind.field(i).name for i in range(kind.num_fields)]
        index = next((i for i, name in enumerate(names) if name.lower() == ID_FIELD), None)
        if index is None:
            raise IdentityError(f"a struct holding ids has no {ID_FIELD!r} field ({kind})")
        # A null struct's child slot may hold anything: only valid parents' ids count.
        valid = array.is_valid()
        return ids_with_rows(pc.struct_field(array, [index]).filter(valid), rows.filter(valid))
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind):
        texts = pc.cast(array, pa.string())
        present = texts.is_valid()
        return texts.filter(present), rows.filter(present)
    raise IdentityError(f"ids must be strings or integers, not {kind}")


def file_columns(path: Path, columns: Sequence[str]) -> list[str]:
    """The identity columns as the file names them (case-insensitive); missing ones left out."""
    import pyarrow.parquet as pq

    by_lower = {name.lower(): name for name in pq.read_schema(path).names}
    return [by_lower[column.lower()] for column in columns if column.lower() in by_lower]


def batches(path: Path, columns: Sequence[str]) -> Iterator[tuple[int, dict[str, tuple[pa.Array, pa.Array]]]]:
    """Per record batch of the file: its row count, and per identity column its ids with rows."""
    import pyarrow.parquet as pq

    names = file_columns(path, columns)
    if not names:
        yield pq.read_metadata(path).num_rows, {}
        return
    with pq.ParquetFile(path) as parquet:
        for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=names):
            yield batch.num_rows, {name: ids_with_rows(batch.column(name)) for name in names}


def distinct_ids(path: Path, columns: Sequence[str]) -> tuple[int, dict[str, set[str]]]:
    """The file's rows, and the distinct ids of each identity column it has."""
    rows = 0
    found: dict[str, set[str]] = {}
    for count, by_column in batches(path, columns):
        rows += count
        for name, (texts, _) in by_column.items():
            found.setdefault(name, set()).update(texts.unique().to_pylist())
    return rows, found


def rows_holding(path: Path, columns: Sequence[str], ids: Sequence[str]) -> int:
    """How many rows of the file hold any of `ids` in any identity column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = pa.array(list(ids), pa.string())
    holding = 0
    for _, by_column in batches(path, columns):
        hit: set[int] = set()
        for texts, rows in by_column.values():
            hit.update(rows.filter(pc.is_in(texts, value_set=wanted)).unique().to_pylist())
        holding += len(hit)
    return holding


__all__ = ["batches", "distinct_ids", "file_columns", "ids_with_rows", "rows_holding"]
