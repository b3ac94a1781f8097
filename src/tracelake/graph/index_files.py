"""The graph index on disk, beside the store: its arrays as `.npy` files read where asked
(`file_array.FileArray`), so a command that asks one question of a large store opens the index in
milliseconds and reads only the pages its walk touches, instead of reading every edge from the
database and building the index again (issue 21).

Layout: `<root>/<graph version>-<random>/` holds `meta.json` (format, graph version, sizes, node
kinds, the ends of ended assets), one `.npy` file per array, and the URNs as one UTF-8 blob with
offsets and a hash table for lookups (`KeptUrns`); `<root>/CURRENT` names the directory in
force. A new index is written to a fresh directory and published by replacing CURRENT in one
rename; the directories it replaced are removed (a reader that opened one keeps reading its files
until it lets go). The store stays the system of record: an index that is missing, partial, of
another format or of another store is not used, and the next build replaces it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import xxhash

from tracelake.graph.file_array import FileArray
from tracelake.graph.index import Adjacency, GraphIndex, UrnSequence

FORMAT = 2  # 2: the ends of ended assets applied (`ended`), which a catch-up starts from
CURRENT = "CURRENT"
META = "meta.json"
_NODE_ARRAYS = ("node_ids", "node_types", "kind_codes", "asset_of")
_EDGE_ARRAYS = (
    "edge_ids",
    "edge_source",
    "edge_target",
    "edge_process",
    "edge_signal",
    "edge_confidence",
    "edge_transformation",
    "edge_valid_from",
    "edge_valid_to",
    "edge_is_field",
)
# the arrays of an `Adjacency`, by field name
ADJACENCY_ARRAYS = ("indptr", "degrees", "edges", "neighbours", "is_open")
_COPIES = ("downstream", "upstream")  # the two adjacencies of an index


class KeptUrns:
    """The index's URNs in kept files: one UTF-8 blob with each URN's offset, and a table of
    their 64-bit hashes, sorted, with the position of each."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, hashes: np.ndarray, order: np.ndarray) -> None:
        self.blob, self.offsets, self.hashes, self.order = blob, offsets, hashes, order

    @staticmethod
    def arrays(urns: Sequence[str]) -> dict[str, np.ndarray]:
        """The files' arrays for `urns` in position order."""
        encoded = [urn.encode("utf-8") for urn in urns]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
        hashes = np.fromiter(map(_hash, encoded), dtype=np.uint64, count=len(encoded))
        order = np.argsort(hashes, kind="stable").astype(np.int64)
        blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        return {"urn_blob": blob, "urn_offsets": offsets, "urn_hashes": hashes[order], "urn_order": order}

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def urn(self, position: int) -> str:
        start, stop = self.offsets[position : position + 2].tolist()
        return bytes(self.blob[start:stop]).decode("utf-8")

    def position(self, urn: str) -> int | None:
        key = np.uint64(_hash(urn.encode("utf-8")))
        at = int(self.hashes.searchsorted(key))
        while at < len(self.hashes) and self.hashes[at] == key:
            position = int(self.order[at])
            if self.urn(position) == urn:
                return position
            at += 1
        return None


class UrnList(UrnSequence):
    """The URNs by position, decoded when asked for."""

    def __init__(self, urns: KeptUrns) -> None:
        self._urns = urns

    def __len__(self) -> int:
        return len(self._urns)

    def urn(self, position: int) -> str:
        return self._urns.urn(position)


class UrnPositions(Mapping[str, int]):
    """The positions by URN, found through the hash table."""

    def __init__(self, urns: KeptUrns) -> None:
        self._urns = urns

    def __getitem__(self, urn: str) -> int:
        position = self._urns.position(urn) if isinstance(urn, str) else None
        if position is None:
            raise KeyError(urn)
        return position

    def __contains__(self, urn: object) -> bool:
        return isinstance(urn, str) and self._urns.position(urn) is not None

    def __iter__(self) -> Iterator[str]:
        return (self._urns.urn(p) for p in range(len(self._urns)))

    def __len__(self) -> int:
        return len(self._urns)


def _hash(encoded: bytes) -> int:
    return xxhash.xxh3_64_intdigest(encoded)


def save(index: GraphIndex, root: Path, *, store: str) -> Path:
    """Write `index` under `root` and make it the one in force; return its directory. `store`
    names the store it was built from (a reader checks it)."""
    if index.base is not None:
        raise ValueError("an index with an appended tail is not kept: its base is caught up first")
    root.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{index.version}-", dir=root))
    arrays: dict[str, np.ndarray] = {name: getattr(index, name) for name in (*_NODE_ARRAYS, *_EDGE_ARRAYS)}
    for direction in _COPIES:
        adjacency = getattr(index, direction)
        arrays.update({f"{direction}.{name}": getattr(adjacency, name) for name in ADJACENCY_ARRAYS})
    arrays.update(KeptUrns.arrays(index.urns))
    for name, array in arrays.items():
        np.save(staged / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
    meta = {
        "format": FORMAT,
        "store": store,
        "version": index.version,
        "nodes": index.n_nodes,
        "edges": index.n_edges,
        "kinds": list(index.kinds),
        "ended": sorted(index.ended.items()),
    }
    (staged / META).write_text(json.dumps(meta), encoding="utf-8")
    final = root / f"{index.version}-{uuid.uuid4().hex[:8]}"
    staged.rename(final)
    pointer = root / f".{CURRENT}.{uuid.uuid4().hex[:8]}"
    pointer.write_text(final.name, encoding="utf-8")
    os.replace(pointer, root / CURRENT)
    _remove_older(root, than=index.version, keep=final.name)
    return final


def load(root: Path, *, store: str) -> GraphIndex | None:
    """The index in force under `root`, its arrays read from their files; None when there is none, or
    it is partial, of another format or of another store."""
    try:
        directory = root / (root / CURRENT).read_text(encoding="utf-8").strip()
        meta = json.loads((directory / META).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or meta.get("store") != store:
            return None

        def kept(name: str) -> np.ndarray:
            return cast(np.ndarray, FileArray(directory / f"{name}.npy"))  # read as an ndarray

        arrays: dict[str, Any] = {name: kept(name) for name in (*_NODE_ARRAYS, *_EDGE_ARRAYS)}
        adjacencies = {direction: Adjacency(**_adjacency_arrays(direction, kept)) for direction in _COPIES}
        urns = KeptUrns(kept("urn_blob"), kept("urn_offsets"), kept("urn_hashes"), kept("urn_order"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if len(urns) != meta["nodes"] or len(arrays["edge_ids"]) != meta["edges"]:
        return None
    return GraphIndex(
        version=int(meta["version"]),
        urns=UrnList(urns),
        positions=UrnPositions(urns),
        kinds=tuple(meta["kinds"]),
        downstream=adjacencies["downstream"],
        upstream=adjacencies["upstream"],
        ended={int(node_id): int(at) for node_id, at in meta["ended"]},
        **arrays,
    )


def _adjacency_arrays(direction: str, kept: Callable[[str], np.ndarray]) -> dict[str, Any]:
    """A kept adjacency's arrays by field name (a kept index is laid out: no tail)."""
    return {name: kept(f"{direction}.{name}") for name in ADJACENCY_ARRAYS}


def _remove_older(root: Path, *, than: int, keep: str) -> None:
    """Remove the index directories of graph versions before `than` (never `keep`, nor a newer one
    another process published meanwhile), and staging a writer left an hour ago or more."""
    stale_staging = time.time() - 3600
    for entry in root.iterdir():
        if not entry.is_dir() or entry.name == keep:
            continue
        if entry.name.startswith("."):
            if entry.stat().st_mtime < stale_staging:
                shutil.rmtree(entry, ignore_errors=True)
            continue
        version, _, _ = entry.name.partition("-")
        if version.isdigit() and int(version) < than:
            shutil.rmtree(entry, ignore_errors=True)
