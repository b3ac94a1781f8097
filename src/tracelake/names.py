"""The one place datasets are named: an OpenLineage (namespace, name) and its Tracelake asset URN.

Work in progress (issue 16): the signatures below are final; the rules move here from the
collectors and the emitter.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class DatasetName:
    """A dataset as OpenLineage names it: the datasource (`postgres://db:5432`) and the name in it."""

    namespace: str
    name: str


def asset_urn(namespace: str, name: str) -> str:
    """The asset URN of the dataset (namespace, name)."""
    from tracelake.collect.openlineage import _asset_urn

    return _asset_urn(namespace, name, None)


def dataset_of(urn: str) -> DatasetName:
    """The (namespace, name) of an asset URN (or of a field URN's asset)."""
    from tracelake.emit.openlineage import dataset_name

    return DatasetName(*dataset_name(urn))
