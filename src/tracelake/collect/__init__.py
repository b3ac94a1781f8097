"""Collectors: each turns one kind of lineage signal into LineageBatch records."""
