"""What the benchmarks print about the machine they ran on, their table headers, and the plain BFS
they share as a floor."""

from __future__ import annotations

import os
import platform
import subprocess
from collections import deque
from typing import Any


def versions(spark: Any) -> str:
    """Python, Spark and Java versions, and the cores, on one line."""
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return (
        f"Python {platform.python_version()}, Spark {spark.version}, "
        f"{java[0].strip() if java else 'java ?'}, {os.cpu_count()} cores ({platform.machine()})"
    )


def load_change(before: tuple[float, float, float]) -> str:
    """The 1/5/15-minute load average before a run and now: how quiet the machine was."""
    after = os.getloadavg()
    return (
        f"load average (1/5/15 min) before {before[0]:.2f}/{before[1]:.2f}/{before[2]:.2f}, "
        f"after {after[0]:.2f}/{after[1]:.2f}/{after[2]:.2f}"
    )


def python_machine(extra: str = "") -> str:
    """Python, the OS, the cores (and `extra`, e.g. library versions), for the pure-Python benches."""
    return (
        f"Python {platform.python_version()} ({platform.python_implementation()}), {platform.system()} "
        f"{platform.machine()}, {os.cpu_count()} cores{', ' + extra if extra else ''}"
    )


def print_header(header: str) -> None:
    """A table's column names and a rule under them."""
    print(header)
    print("-" * len(header))


def python_bfs(adjacency: dict[int, list[int]], starts: list[int]) -> set[int]:
    """Every node reachable from `starts` (starts included): the textbook BFS, dict of lists."""
    seen = set(starts)
    queue = deque(starts)
    while queue:
        for neighbour in adjacency.get(queue.popleft(), ()):
            if neighbour not in seen:
                seen.add(neighbour)
                queue.append(neighbour)
    return seen
