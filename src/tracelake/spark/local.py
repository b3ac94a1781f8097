"""Quiet local Spark sessions for Tracelake's own commands, examples and benchmarks.

Spark's default log4j2 set-up prints warnings (loopback address, native Hadoop, …) into every
command's output. `quiet_log_option` writes a log4j2 config that lets only errors through and
returns the driver Java option that loads it; `local_session` starts a session with it for a
command that needs Spark (privacy indexes and requests) when none is running.
"""

from __future__ import annotations

import getpass
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tracelake.model import InputError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


class SparkUnavailable(InputError):
    """Spark cannot start here (no Java, or a JVM that failed): what to install, in one line."""


def quiet_log_option(folder: Path) -> str:
    """`-Dlog4j2.configurationFile=…` for `spark.driver.extraJavaOptions`, its file in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "log4j2-quiet.properties"
    path.write_text(QUIET_LOG4J2)
    return f"-Dlog4j2.configurationFile={path}"


@contextmanager
def local_session(app_name: str) -> Iterator[SparkSession]:
    """The running Spark session, or a local one for this command (`local[*]`, or
    `TRACELAKE_SPARK_MASTER`; quiet; stopped at the end). No Java is a `SparkUnavailable` that
    says what to install."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    logs = Path(tempfile.gettempdir()) / f"tracelake-{getpass.getuser()}"
    try:
        session = (
            SparkSession.builder.master(os.environ.get("TRACELAKE_SPARK_MASTER", "local[*]"))
            .appName(app_name)
            .config("spark.driver.extraJavaOptions", quiet_log_option(logs))
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
    except (RuntimeError, OSError) as error:  # no Java, or a JVM that could not start
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        needs = "a Java runtime, 17 or newer, must be installed"
        raise SparkUnavailable(f"cannot start Spark: {reason} ({needs})") from None
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
