"""The graph index kept on disk beside the store (issue 21): the next process opens it instead of
building it, a changed store is never answered from it, and a kept index that is not this store's
or not whole is never used."""

from __future__ import annotations

import os
from pathlib import Path
from unittest.mock import patch

import pytest

from tests.graph.test_traverse import JAN, LAKE_EDGES, A, H, flow, make_store, reached
from tracelake.graph import GraphIndex, IndexCache, index_files, lineage
from tracelake.graph import catch_up as catch_up_module
from tracelake.graph.cache import INDEX_ENV, index_root
from tracelake.graph.file_array import FileArray
from tracelake.model import LineageBatch
from tracelake.store import LineageStore


def keeping_cache(store: LineageStore) -> IndexCache:
    """A cache that keeps every index it builds, however fast (the lake builds in milliseconds)."""
    return IndexCache(store, keep_after=0.0)


@pytest.fixture
def lake_store(tmp_path: Path):  # type: ignore[no-untyped-def]
    with make_store(tmp_path, "lake") as store:
        store.ingest(LineageBatch(edges=list(LAKE_EDGES), observed_at=JAN))
        yield store


def test_the_next_process_opens_the_kept_index_and_answers_the_same(lake_store: LineageStore) -> None:
    built = keeping_cache(lake_store).get()
    assert (Path(f"{lake_store.url.removeprefix('sqlite:///')}.index") / "CURRENT").is_file()

    later = keeping_cache(lake_store)  # as a new command would
    kept = later.get()

    assert (later.builds, later.loads) == (0, 1)
    assert isinstance(kept.edge_ids, FileArray)
    assert kept.version == built.version
    assert list(kept.urns) == list(built.urns)
    assert all(kept.positions[urn] == built.positions[urn] for urn in built.urns)
    assert "hive.table/db.nothing" not in kept.positions
    assert reached(lineage(kept, [A], "downstream")) == reached(lineage(built, [A], "downstream"))


def test_a_store_changed_since_is_answered_from_the_kept_index_caught_up(lake_store: LineageStore) -> None:
    first = keeping_cache(lake_store).get()
    lake_store.ingest(LineageBatch(edges=[flow(H, "hive.table/db.report", "job7")]))

    later = keeping_cache(lake_store)
    index = later.get()

    assert (later.builds, later.loads, later.catch_ups) == (0, 1, 1)
    assert index.version == first.version + 1
    assert "hive.table/db.report" in reached(lineage(index, [A], "downstream"))
    # an append is read beside the kept index, which stays as it was for the next process
    assert index.base is not None
    root = later.root
    assert root is not None
    assert (root / "CURRENT").read_text().startswith(f"{first.version}-")


def test_appends_past_their_share_are_merged_and_the_merged_index_kept(lake_store: LineageStore) -> None:
    first = keeping_cache(lake_store).get()
    lake_store.ingest(LineageBatch(edges=[flow(H, "hive.table/db.report", "job7")]))
    with patch.object(catch_up_module, "TAIL_MIN", 0):  # a small lake: any append passes 5% of it
        later = keeping_cache(lake_store)
        index = later.get()
    assert (later.builds, later.loads, later.catch_ups) == (0, 1, 1)
    assert index.base is None and index.version == first.version + 1
    assert "hive.table/db.report" in reached(lineage(index, [A], "downstream"))
    # kept in its place; the old one is gone
    root = later.root
    assert root is not None
    assert [p.name for p in root.iterdir() if p.is_dir()] == [(root / "CURRENT").read_text()]
    assert (root / "CURRENT").read_text().startswith(f"{index.version}-")


def test_a_store_made_again_at_the_same_place_does_not_use_the_old_ones_index(tmp_path: Path) -> None:
    with make_store(tmp_path, "lake") as store:
        store.ingest(LineageBatch(edges=list(LAKE_EDGES), observed_at=JAN))
        keeping_cache(store).get()
    os.remove(tmp_path / "lake.db")  # the index folder stays
    with make_store(tmp_path, "lake") as store:
        store.ingest(LineageBatch(edges=[flow(A, H, "other")], observed_at=JAN))  # version 1 again
        cache = keeping_cache(store)
        index = cache.get()
        assert (cache.builds, cache.loads) == (1, 0)
        assert reached(lineage(index, [A], "downstream")) == {A: 0, H: 1}


def test_a_kept_index_with_a_file_missing_or_cut_short_is_rebuilt(lake_store: LineageStore) -> None:
    cache = keeping_cache(lake_store)
    cache.get()
    assert cache.root is not None
    directory = cache.root / (cache.root / "CURRENT").read_text()
    damaged = directory / "edge_target.npy"
    damaged.write_bytes(damaged.read_bytes()[:-8])

    later = keeping_cache(lake_store)
    index = later.get()

    assert (later.builds, later.loads) == (1, 0)
    fresh = GraphIndex.from_store(lake_store)
    assert reached(lineage(index, [A], "downstream")) == reached(lineage(fresh, [A], "downstream"))


def test_where_the_index_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert index_root(f"sqlite:///{tmp_path}/x.db") == tmp_path / "x.db.index"
    assert index_root("sqlite://") is None  # in memory: no later process could open it
    server = index_root("postgresql://ann:secret@db/lineage")
    assert server is not None and server.parent == Path.home() / ".tracelake" / "index"
    assert "secret" not in str(server)
    monkeypatch.setenv(INDEX_ENV, "off")
    assert index_root(f"sqlite:///{tmp_path}/x.db") is None
    monkeypatch.setenv(INDEX_ENV, str(tmp_path / "elsewhere"))
    assert index_root(f"sqlite:///{tmp_path}/x.db") == tmp_path / "elsewhere"


def test_an_index_kept_for_another_store_is_not_opened(lake_store: LineageStore, tmp_path: Path) -> None:
    built = keeping_cache(lake_store).get()
    index_files.save(built, tmp_path / "shared", store="one")
    assert index_files.load(tmp_path / "shared", store="two") is None
    assert index_files.load(tmp_path / "shared", store="one") is not None


def test_a_read_only_store_opens_its_kept_index_and_one_without_still_answers(
    lake_store: LineageStore, tmp_path: Path
) -> None:
    database = lake_store.url.removeprefix("sqlite:///")
    keeping_cache(lake_store).get()  # kept: the store has its identity
    with LineageStore(f"sqlite:///file:{database}?mode=ro&uri=true") as read_only:
        cache = keeping_cache(read_only)
        assert cache.root == Path(f"{database}.index")
        cache.get()
        assert (cache.builds, cache.loads) == (0, 1)

    # a store that never had an identity, opened read-only: built, answered, not kept
    with make_store(tmp_path, "fresh") as store:
        store.ingest(LineageBatch(edges=list(LAKE_EDGES), observed_at=JAN))
    with LineageStore(f"sqlite:///file:{tmp_path / 'fresh.db'}?mode=ro&uri=true") as read_only:
        cache = keeping_cache(read_only)
        index = cache.get()
        assert (cache.builds, cache.loads) == (1, 0)
        assert H in reached(lineage(index, [A], "downstream"))
        assert not (tmp_path / "fresh.db.index" / "CURRENT").exists()
