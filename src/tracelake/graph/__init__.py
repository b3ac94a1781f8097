"""Analyses over the lineage graph: pure functions over an in-memory graph index."""
