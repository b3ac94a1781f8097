"""Tracelake: privacy-aware data lineage for Spark data lakes."""

__version__ = "0.1.0"
