"""What the Spark benchmarks print about the machine they ran on: versions, cores, load."""

from __future__ import annotations

import os
import platform
import subprocess
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
