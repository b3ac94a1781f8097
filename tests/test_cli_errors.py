"""User mistakes end as one line on stderr and a documented exit code, never a traceback.

Each case is one a tester met as a traceback or a wrapped message (issue 19): a `--db` that is
not a store, a policy or token file that is not text or not YAML, a 100,000-character name, a
message holding rich markup, a long path on a narrow terminal. And the exit codes: 0 when all
input was used, 3 when some was recorded as a problem, 2 for a mistake.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracelake.cli import app
from tracelake.cli.common import MAX_MESSAGE_CHARS
from tracelake.store import LineageStore


def run(*args: str, columns: int = 40) -> tuple[int, str, str]:
    # A narrow terminal: any message rich wrapped would show up as two lines.
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})
    return result.exit_code, result.stdout, result.stderr


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    return lines[0]


@pytest.fixture
def deep(tmp_path: Path) -> Path:
    """A folder whose path is far longer than the terminal is wide."""
    folder = tmp_path.joinpath(*(["a-rather-long-folder-name"] * 6))
    folder.mkdir(parents=True)
    return folder


def test_a_db_that_is_a_text_file_is_refused_and_left_alone(deep: Path) -> None:
    notes = deep / "notes.txt"
    notes.write_text("meeting notes, not a database\n")

    code, _, err = run("lineage", "x", "--db", str(notes))

    assert code == 2
    assert one_error_line(err) == f"error: {notes}: not a SQLite database"
    assert notes.read_text() == "meeting notes, not a database\n"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("foo://x", "error: foo://x: foo is not supported; give a SQLite file or a postgresql:// URL"),
        (
            "mysql://admin:s3cret@db.example/lineage",
            "error: mysql://admin:***@db.example/lineage: mysql is not supported; give a SQLite file "
            "or a postgresql:// URL",
        ),
    ],
)
def test_a_db_url_of_another_database_is_refused_without_its_password(url: str, expected: str) -> None:
    code, _, err = run("lineage", "x", "--db", url)

    assert code == 2
    assert one_error_line(err) == expected
    assert "s3cret" not in err


def test_a_db_whose_driver_is_missing_says_so(tmp_path: Path) -> None:
    code, _, err = run("lineage", "x", "--db", "postgresql+nosuchdriver://u:pw@localhost/db")

    assert code == 2
    assert one_error_line(err).startswith("error: postgresql+nosuchdriver://u:***@localhost/db: ")


def test_a_store_that_cannot_be_written_says_so_and_keeps_what_it_held(tmp_path: Path) -> None:
    """SQLite opened read-only (a real one) stands for a store that refuses writes."""
    database = tmp_path / "lineage.db"
    with LineageStore(f"sqlite:///{database}") as store:
        before = store.counts()
    script = tmp_path / "q.sql"
    script.write_text("INSERT INTO b SELECT x FROM a;\n")

    code, _, err = run("ingest", "sql", str(script), "--db", f"sqlite:///file:{database}?mode=ro&uri=true")

    assert code == 2
    assert one_error_line(err) == "error: cannot use the lineage store: attempt to write a readonly database"
    with LineageStore(f"sqlite:///{database}") as store:
        assert store.counts() == before


def test_a_store_server_that_is_down_is_one_line_without_the_password() -> None:
    # port 1 of this machine: nothing listens there
    code, _, err = run("lineage", "x", "--db", "postgresql://u:secretpw@127.0.0.1:1/db", columns=250)

    assert code == 2
    line = one_error_line(err)
    assert line.startswith("error: cannot use the lineage store: connection failed: ")
    assert "Connection refused" in line and "secretpw" not in line


def test_a_db_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    code, _, err = run("lineage", "x", "--db", str(tmp_path))

    assert code == 2
    assert one_error_line(err) == f"error: {tmp_path}: is a folder, not a SQLite file"


def test_a_policy_file_that_is_not_utf8_names_the_byte(deep: Path) -> None:
    policies = deep / "policies.yaml"
    policies.write_bytes(b"policies:\n  - name: caf\xe9\n")  # 10 + 13 bytes before the \xe9

    code, _, err = run("check", str(policies), "--db", str(deep / "lineage.db"))

    assert code == 2
    assert one_error_line(err) == f"error: {policies}: not UTF-8 text (at byte 23)"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("tokens: [unclosed\n", "not valid YAML at line 2"),
        ("- just\n- a list\n", "expected a YAML mapping with `tokens:`"),
        ("tokens: 12\n", "`tokens:` should be a list"),
    ],
)
def test_token_add_refuses_a_token_file_it_cannot_read_and_leaves_it(
    tmp_path: Path, content: str, reason: str
) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(content)

    code, out, err = run("token", "add", "airflow", "--tokens", str(tokens))

    assert code == 2 and out == ""
    assert one_error_line(err) == f"error: {tokens}: {reason}"
    assert tokens.read_text() == content


def test_token_add_on_a_folder_is_refused(tmp_path: Path) -> None:
    code, _, err = run("token", "add", "airflow", "--tokens", str(tmp_path))

    assert code == 2
    assert one_error_line(err) == f"error: {tmp_path}: is a folder, not a file"


def test_a_huge_name_is_one_capped_line(tmp_path: Path) -> None:
    name = "db." + "n" * 100_000

    code, _, err = run("show", name, "--db", str(tmp_path / "lineage.db"))

    assert code == 2
    line = one_error_line(err)
    assert len(line) <= len("error: ") + MAX_MESSAGE_CHARS
    assert line.endswith("characters)")


def test_markup_in_a_name_is_printed_as_typed(tmp_path: Path) -> None:
    code, _, err = run("show", "db.[bold]x[/bold]", "--db", str(tmp_path / "lineage.db"))

    assert code == 2
    assert "[bold]x[/bold]" in one_error_line(err)


def test_a_statement_naming_a_table_too_long_to_store_is_its_own_problem(tmp_path: Path) -> None:
    db = str(tmp_path / "lineage.db")
    script = tmp_path / "etl.sql"
    script.write_text(
        "INSERT INTO db.kept SELECT a FROM db.src;\n"
        f"CREATE TABLE db.{'t' * 100_000} AS SELECT a FROM db.src;\n"
        "INSERT INTO db.kept_too SELECT a FROM db.src;\n"
    )

    code, out, err = run("ingest", "sql", str(script), "--db", db, columns=250)

    assert code == 3
    assert "3 statements: 2 parsed" in out and "1 failed" in out
    problem = next(line for line in err.splitlines() if line.startswith("problem:"))
    assert problem.startswith(f"problem: {script}:line 2, statement 2: a name of 100,014 bytes is over")
    with LineageStore(db) as store:
        targets = {edge.target for edge in store.edges()}
    assert {"hive.table/db.kept#a", "hive.table/db.kept_too#a"} <= targets


def test_exit_codes_say_whether_all_input_was_used(tmp_path: Path) -> None:
    db = str(tmp_path / "lineage.db")
    clean, broken = tmp_path / "clean.sql", tmp_path / "broken.sql"
    clean.write_text("INSERT INTO db.t SELECT a FROM db.s;\n")
    broken.write_text("INSERT INTO db.t SELECT a FROM db.s;\nINSERT INTO db.u SELEC a FROM db.s;\n")

    assert run("ingest", "sql", str(clean), "--db", db)[0] == 0
    assert run("ingest", "sql", str(broken), "--db", db)[0] == 3
    assert run("ingest", "sql", str(tmp_path / "missing.sql"), "--db", db)[0] == 2


def test_a_device_is_refused_before_it_is_read(tmp_path: Path) -> None:
    code, _, err = run("ingest", "sql", "/dev/zero", "--db", str(tmp_path / "lineage.db"))

    assert code == 2
    assert one_error_line(err) == "error: /dev/zero: not a regular file"


@pytest.mark.parametrize(
    ("command", "suffix", "code", "says"),
    [
        (("ingest", "openlineage"), ".jsonl", 3, "problem: {path}:$: not JSON: nested too deep"),
        (("ingest", "configs"), ".yaml", 3, "skipped: {path}: cannot read the config: it nests too deep"),
        (("entities", "load"), ".yml", 1, "error: {path}: not valid YAML: it nests too deep"),
        (("token", "add", "ci", "--tokens"), ".yml", 2, "error: {path}: not valid YAML: it nests too deep"),
    ],
)
def test_input_nested_deeper_than_python_recurses_is_refused_in_one_line(
    tmp_path: Path, command: tuple[str, ...], suffix: str, code: int, says: str
) -> None:
    path = tmp_path / f"deep{suffix}"
    path.write_text("[" * 100_000 + "]" * 100_000)

    store = [] if command[0] == "token" else ["--db", str(tmp_path / "lineage.db")]
    exit_code, _, err = run(*command, str(path), *store, columns=250)

    assert exit_code == code and "Traceback" not in err
    assert says.format(path=path) in err.splitlines()


def test_entities_load_of_a_file_that_is_not_text_names_it(tmp_path: Path) -> None:
    path = tmp_path / "entities.yml"
    path.write_bytes("- name: caf\xe9\n".encode("latin-1"))

    code, _, err = run("entities", "load", str(path), "--db", str(tmp_path / "lineage.db"), columns=250)

    assert code == 1
    assert err.splitlines() == [
        f"error: {path}: not UTF-8 text (at byte 11)",
        "error: nothing stored: 1 problem(s)",
    ]


def test_token_add_through_a_symlink_loop_is_refused(tmp_path: Path) -> None:
    loop = tmp_path / "tokens.yml"
    loop.symlink_to(loop)

    code, _, err = run("token", "add", "ci", "--tokens", str(loop))

    assert code == 2
    assert one_error_line(err).startswith(f"error: {loop}: cannot read it (")


def test_a_privacy_request_without_java_says_so_in_one_line(tmp_path: Path) -> None:
    """The real command in a process of its own (no Spark session to reuse), where no Java is."""
    # spark-submit takes JAVA_HOME's java over any on PATH
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    env["JAVA_HOME"] = str(tmp_path / "no-java-here")

    done = subprocess.run(
        [str(Path(sys.executable).parent / "tracelake"), "privacy", "access", "--user", "u1"],
        capture_output=True,
        text=True,
        env={**env, "TRACELAKE_DB": str(tmp_path / "lineage.db")},
        cwd=tmp_path,
        timeout=120,
    )

    assert done.returncode == 2 and "Traceback" not in done.stderr
    [error] = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert error.startswith("error: cannot start Spark: ") and error.endswith("must be installed)")


@pytest.mark.parametrize(
    ("command", "content", "code", "says"),
    [
        (
            ("token", "add", "ci", "--tokens"),
            "tokens:\n  - name: x\n    sha256: 2024-13-01\n",
            2,
            "error: {path}:",
        ),
        (("entities", "load"), "- name: x\n  start: 2024-13-01\n  period: daily\n", 1, "error: {path}:"),
    ],
)
def test_a_yaml_date_that_is_no_date_is_a_one_line_error(
    tmp_path: Path, command: tuple[str, ...], content: str, code: int, says: str
) -> None:
    """PyYAML reads 2024-13-01 as a date and fails with a ValueError, not a YAMLError."""
    path = tmp_path / "file.yml"
    path.write_text(content)
    store = [] if command[0] == "token" else ["--db", str(tmp_path / "lineage.db")]

    exit_code, _, err = run(*command, str(path), *store, columns=250)

    assert exit_code == code and "Traceback" not in err
    assert err.splitlines()[0] == says.format(path=path) + " not valid YAML: month must be in 1..12"
