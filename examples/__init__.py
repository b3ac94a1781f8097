"""Runnable examples; importable as `examples.dating.pipeline` by the tests and benchmarks."""
