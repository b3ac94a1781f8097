"""Analyses over the lineage graph: pure functions over an in-memory graph index."""

from tracelake.graph.cache import IndexCache
from tracelake.graph.index import GraphIndex
from tracelake.graph.traverse import ImpactedAsset, LineageResult, impact, lineage, paths

__all__ = [
    "GraphIndex",
    "ImpactedAsset",
    "IndexCache",
    "LineageResult",
    "impact",
    "lineage",
    "paths",
]
