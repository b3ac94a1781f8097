"""Whole-graph analyses as PySpark jobs over the lake tables (`tracelake.store.lake`), for graphs
that outgrow one process: label propagation, closures of many roots, PageRank hotness and policy
checks, each with the in-memory analysis's rules and answers (`tracelake.graph.propagate`,
`traverse`, `hotness`, `policy`). Iterative DataFrame joins, one per hop or iteration, with each
step checkpointed so a plan never grows past one step; no JVM jar (GraphFrames is not needed).
"""
