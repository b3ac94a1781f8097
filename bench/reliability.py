"""Bad input through the command line, as a careless user or an attacker would give it: every
command that reads a file or a name, fed missing, empty, binary, mis-encoded, endless, huge,
deeply nested and self-referencing input, and every `--db` that is not a store.

Each case runs the real `tracelake` in a process of its own, with a time limit and a 2 GiB
address-space limit (not for privacy requests, whose Spark JVM reserves more), against a store
that already holds lineage. A case passes when the command ends within its time with an exit
code the README documents (0–3), prints no traceback, says each message on one line, and — when
it refuses (exit 2) — leaves the store exactly as it was (its SQLite content hashed before and
after). Printed: each case as it starts, one line per case that failed, then the totals
(cases, failures, stores changed by a refused command), against the targets of issue 19 (0, 0).

    .venv/bin/python bench/reliability.py [--jobs N] [--filter TEXT]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from machine import load_change, python_machine

ROOT = Path(__file__).resolve().parents[1]
TRACELAKE = Path(sys.executable).parent / "tracelake"
TIME_LIMIT = 120.0
MEMORY_LIMIT = 2 * 1024**3
DOCUMENTED_EXITS = {0, 1, 2, 3}
# Tracelake's own prefixes, and the lines Spark's JVM prints itself as it starts (privacy requests
# run Spark): any other line on stderr is a message broken over lines, or a traceback's.
MESSAGE_PREFIXES = (
    *("error:", "problem:", "skipped:", "note:", "    "),
    *("WARNING: Using incubator modules", "Setting default log level to", "To adjust logging level use"),
)


@dataclass(frozen=True)
class Case:
    name: str
    args: list[str]
    stdin: bytes | None = None


@dataclass
class Outcome:
    case: Case
    code: int | None
    seconds: float
    failures: list[str]


def make_inputs(folder: Path) -> dict[str, Path]:
    """Files of every bad kind, by name."""
    nested = "[" * 100_000 + "]" * 100_000
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9)
    )
    contents: dict[str, bytes] = {
        "empty": b"",
        "binary": os.urandom(64 * 1024),
        "nul": b"INSERT INTO db.t SELECT a FROM db.s;\nINSERT INTO db.u SELECT \x00 FROM db.s;\n",
        "latin1": "INSERT INTO db.t SELECT 'café' AS c FROM db.s;\n".encode("latin-1"),
        "utf16": "INSERT INTO db.t SELECT a FROM db.s;\n".encode("utf-16"),
        "truncated_utf8": "INSERT INTO db.t SELECT 'é".encode()[:-1],
        "crlf": b"INSERT INTO db.t\r\nSELECT a FROM db.s;\r\n",
        "huge_line": b"x" * (20 * 1024 * 1024),
        "huge_statement": b"INSERT INTO db.t SELECT\n" + b"  a,\n" * 4_000_000 + b"  a FROM db.s;\n",
        "nested_json": nested.encode(),
        "nested_sql": ("SELECT " + "(" * 50_000 + "1" + ")" * 50_000 + ";\n").encode(),
        "yaml_laughs": laughs.encode(),
        "yaml_broken": b"policies:\n  - name: x\n\tto: [\n",
        "json_wrong_types": json.dumps({"policies": 7, "tokens": "x", "query": 5, "eventTime": []}).encode(),
        "jsonl_mixed": b"\n".join(
            [
                json.dumps({"query": "INSERT INTO db.t SELECT a FROM db.s"}).encode(),
                b"{not json",
                "caf\xe9".encode("latin-1"),
                json.dumps([1, 2]).encode(),
                json.dumps({"query": None}).encode(),
            ]
        ),
        "long_name": f"INSERT INTO db.{'n' * 100_000} SELECT a FROM db.s;\n".encode(),
        "markup": b"INSERT INTO db.[red]t[/red] SELECT a FROM db.s;\n",
    }
    inputs = {}
    for name, data in contents.items():
        path = folder / name
        path.write_bytes(data)
        inputs[name] = path
    inputs["folder"] = folder / "a_folder"
    inputs["folder"].mkdir()
    inputs["missing"] = folder / "missing"
    loop = folder / "loop"
    loop.symlink_to(loop)
    inputs["symlink_loop"] = loop
    inputs["dev_zero"] = Path("/dev/zero")
    inputs["dev_null"] = Path("/dev/null")
    return inputs


def cases(inputs: dict[str, Path], folder: Path) -> list[Case]:
    found: list[Case] = []
    # every file-reading command, with every bad file (the suffix a collector looks at added by copy)
    commands: dict[str, Callable[[Path], list[str]]] = {
        "ingest sql": lambda p: ["ingest", "sql", str(p)],
        "ingest sql (log)": lambda p: ["ingest", "sql", str(as_suffix(p, ".jsonl"))],
        "ingest openlineage": lambda p: ["ingest", "openlineage", str(p)],
        "ingest configs": lambda p: ["ingest", "configs", str(as_suffix(p, ".yaml"))],
        "ingest sql --schema": lambda p: [
            "ingest",
            "sql",
            str(inputs["crlf"]),
            "--schema",
            str(as_suffix(p, ".yaml")),
        ],
        "check": lambda p: ["check", str(p)],
        "entities load": lambda p: ["entities", "load", str(as_suffix(p, ".yml"))],
        "token add": lambda p: ["token", "add", "ci", "--tokens", str(copy_of(p))],
        "privacy declare": lambda p: ["privacy", "declare", str(p), "-i", "user_id"],
        "privacy delete --users": lambda p: ["privacy", "delete", "--users", str(p)],
    }
    for command, make in commands.items():
        for name, path in inputs.items():
            found.append(Case(f"{command} <{name}>", make(path)))
    names = {
        "empty": "",
        "100k characters": "db." + "n" * 100_000,
        "markup": "db.[bold]x[/bold]",
        "control characters": "db.t\x1b[2J\x07",
        "only a hash": "#",
        "unicode": "db.テーブル#列",
        "urn without name": "hive.table/",
    }
    for label, name in names.items():
        found.append(Case(f"show <{label}>", ["show", name]))
        found.append(Case(f"lineage <{label}>", ["lineage", name, "--up"]))
    for label, value in {"garbage": "garbage", "year 99999": "99999-01-01", "empty": ""}.items():
        found.append(Case(f"diff --from <{label}>", ["diff", "--from", value, "--to", "2024-01-01"]))
        found.append(Case(f"lineage --as-of <{label}>", ["lineage", "db.s", "--as-of", value]))
    stores = {
        "a text file": str(inputs["latin1"]),
        "a folder": str(inputs["folder"]),
        "a device": "/dev/zero",
        "foo://": "foo://x",
        "mysql://": "mysql://u:secret@localhost/db",
        "postgresql, no server": "postgresql+psycopg://u:secret@127.0.0.1:9/db",
        "a missing driver": "postgresql+asyncpg://u@localhost/db",
        "not a URL": "://",
        "inside a file": str(inputs["latin1"] / "x.db"),
    }
    for label, url in stores.items():
        found.append(Case(f"--db <{label}>", ["lineage", "db.s", "--db", url]))
    events = (ROOT / "examples/dating/query_log.jsonl").read_bytes()
    found.append(Case("ingest openlineage - <a SQL log on stdin>", ["ingest", "openlineage", "-"], events))
    found.append(
        Case("ingest openlineage - <binary stdin>", ["ingest", "openlineage", "-"], os.urandom(65536))
    )
    return found


def as_suffix(path: Path, suffix: str) -> Path:
    """The same input under a name a collector reads as `suffix` (devices and folders as they are)."""
    if not path.is_file() or path.suffix == suffix:
        return path
    copy = path.with_name(path.name + suffix)
    if not copy.exists():
        shutil.copyfile(path, copy)
    return copy


def copy_of(path: Path) -> Path:
    """A fresh copy for commands that write to their file (token add): a missing file stays
    missing for the cases after, which a token file made in its place would spoil."""
    if path.is_file():
        copy = path.with_name(path.name + f".copy{time.monotonic_ns()}")
        shutil.copyfile(path, copy)
        return copy
    if not path.exists() and not path.is_symlink():
        return path.with_name(path.name + f".fresh{time.monotonic_ns()}")
    return path


def store_digest(db: Path) -> str:
    connection = sqlite3.connect(db)
    try:
        digest = hashlib.sha256()
        for (table,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        ):
            for row in connection.execute(f'SELECT * FROM "{table}" ORDER BY 1'):
                digest.update(repr(row).encode())
        return digest.hexdigest()
    finally:
        connection.close()


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def uses_spark(case: Case) -> bool:
    """Privacy requests run Spark, whose JVM reserves more address space than the limit allows:
    those cases run without it (their input is read before Spark starts)."""
    return case.args[:2] in (["privacy", "delete"], ["privacy", "access"])


def run_case(case: Case, template: Path, workdir: Path) -> Outcome:
    folder = Path(tempfile.mkdtemp(dir=workdir))
    db = folder / "lineage.db"
    shutil.copyfile(template, db)
    before = store_digest(db)
    env = {**os.environ, "TRACELAKE_DB": str(db), "COLUMNS": "60", "TRACELAKE_EGRESS": str(folder)}
    started = time.perf_counter()
    failures: list[str] = []
    print(f"  {case.name[:100]}", flush=True)
    try:
        done = subprocess.run(
            [str(TRACELAKE), *case.args],
            input=case.stdin,
            capture_output=True,
            timeout=TIME_LIMIT,
            env=env,
            cwd=folder,
            preexec_fn=None if uses_spark(case) else limit_memory,
        )
        code: int | None = done.returncode
        err = done.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        code, err = None, ""
        failures.append(f"still running after {TIME_LIMIT:.0f} s")
    seconds = time.perf_counter() - started
    if code is not None and code not in DOCUMENTED_EXITS:
        failures.append(f"exit {code}" + (" (out of memory?)" if code < 0 else ""))
    if "Traceback" in err:
        failures.append("a traceback: " + err.strip().splitlines()[-1][:160])
    elif any(line and not line.startswith(MESSAGE_PREFIXES) for line in err.splitlines()):
        odd = next(line for line in err.splitlines() if line and not line.startswith(MESSAGE_PREFIXES))
        failures.append(f"a message not on one line: {odd[:120]!r}")
    if code == 2 and db.exists() and store_digest(db) != before:
        failures.append("refused, yet the store changed")
    shutil.rmtree(folder, ignore_errors=True)
    return Outcome(case, code, seconds, failures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once")
    parser.add_argument("--filter", default="", help="only cases whose name holds this text")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="tracelake-reliability-"))
    try:
        inputs = make_inputs(workdir)
        template = workdir / "template.db"
        subprocess.run(
            [
                str(TRACELAKE),
                "ingest",
                "sql",
                str(ROOT / "examples/dating/query_log.jsonl"),
                "--db",
                str(template),
            ],
            capture_output=True,
            check=False,
        )
        selected = [case for case in cases(inputs, workdir) if args.filter in case.name]
        print(python_machine())
        print(
            f"{len(selected)} cases, {args.jobs} at a time, each in its own process "
            f"(limits: {TIME_LIMIT:.0f} s, {MEMORY_LIMIT // 1024**3} GiB)\n"
        )
        with ThreadPoolExecutor(args.jobs) as pool:
            outcomes = list(pool.map(lambda case: run_case(case, template, workdir), selected))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    failed = [o for o in outcomes if o.failures]
    for outcome in failed:
        print(f"FAILED {outcome.case.name}: exit {outcome.code}; {'; '.join(outcome.failures)}")
    codes: dict[int | None, int] = {}
    for outcome in outcomes:
        codes[outcome.code] = codes.get(outcome.code, 0) + 1
    slowest = max(outcomes, key=lambda o: o.seconds)
    changed = sum("refused, yet the store changed" in o.failures for o in outcomes)
    print(f"\n{'cases':<36}{len(outcomes):>6}")
    print(f"{'failures (target 0)':<36}{len(failed):>6}")
    print(f"{'stores changed by a refusal (0)':<36}{changed:>6}")
    print(f"exit codes: {', '.join(f'{code}: {n}' for code, n in sorted(codes.items(), key=str))}")
    print(f"slowest: {slowest.case.name} ({slowest.seconds:.1f} s)")
    print(f"{load_change(load_before)}; {time.perf_counter() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
