"""Quiet local Spark sessions for Tracelake's own commands, examples and benchmarks.

Spark's default log4j2 set-up prints warnings (loopback address, native Hadoop, …) into every
command's output. `quiet_log_option` writes a log4j2 config that lets only errors through and
returns the driver Java option that loads it.
"""

from __future__ import annotations

from pathlib import Path

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


def quiet_log_option(folder: Path) -> str:
    """`-Dlog4j2.configurationFile=…` for `spark.driver.extraJavaOptions`, its file in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "log4j2-quiet.properties"
    path.write_text(QUIET_LOG4J2)
    return f"-Dlog4j2.configurationFile={path}"
