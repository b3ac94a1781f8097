"""The hand-drawn lake of test_traverse.py, shared as fixtures with the other graph tests."""

from tests.graph.test_traverse import lake, lake_store  # noqa: F401
