"""How much of the lake lineage covers, at one moment: pure numpy over a `GraphIndex`.

An asset is *written* when a table-level flow enters it and *read* when one leaves it, over the
flows in force at the moment (the open ones for "now"). Its columns are covered when a column
flow enters them. The application adds what the index does not hold (owners, layers, reads by
runs that wrote nothing, when nodes were first seen) and the history (`app.coverage`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelake.graph.index import ASSET, FIELD, SIGNALS, GraphIndex
from tracelake.store.records import OPEN_END


@dataclass(frozen=True, slots=True)
class CoverageArrays:
    """Bool arrays over node positions (what holds at the moment), and per signal."""

    assets: np.ndarray  # the assets that existed then
    written: np.ndarray  # assets a table flow entered
    read: np.ndarray  # assets a table flow left
    columns_written: np.ndarray  # assets one of whose columns a column flow entered
    fields: np.ndarray  # the fields that existed then
    fields_covered: np.ndarray  # fields a column flow entered
    written_by: dict[str, np.ndarray]  # signal → assets a table flow of that signal entered


def coverage_arrays(index: GraphIndex, existed: np.ndarray, at_us: int | None = None) -> CoverageArrays:
    """What lineage covers over the flows in force at `at_us` (None: now); `existed` says which
    nodes existed then (bool over positions)."""
    if at_us is None:
        valid = index.edge_valid_to == OPEN_END
    else:
        valid = (index.edge_valid_from <= at_us) & (at_us < index.edge_valid_to)
    table = valid & ~index.edge_is_field
    column = valid & index.edge_is_field
    n = index.n_nodes

    def marked(positions: np.ndarray) -> np.ndarray:
        out = np.zeros(n, dtype=bool)
        out[positions] = True
        return out

    assets = existed & (index.node_types == ASSET)
    fields = existed & (index.node_types == FIELD)
    written_by = {
        str(signal): marked(index.edge_target[table & (index.edge_signal == code)]) & assets
        for code, signal in enumerate(SIGNALS)
    }
    return CoverageArrays(
        assets=assets,
        written=marked(index.edge_target[table]) & assets,
        read=marked(index.edge_source[table]) & assets,
        columns_written=marked(index.asset_of[index.edge_target[column]]) & assets,
        fields=fields,
        fields_covered=marked(index.edge_target[column]) & fields,
        written_by={signal: found for signal, found in written_by.items() if found.any()},
    )
