"""Lists and graphs as files for other tools: `--format csv|xlsx|parquet` of every list and
graph command, and `tracelake export` (the whole graph as Parquet tables).

A command hands over its answer as named tables of rows (a graph is two: nodes and edges). One
table in CSV goes to stdout unless `--output` names a file; Excel and Parquet need `--output`: a
workbook with a sheet a table, or a Parquet file (a folder of `<table>.parquet` when there are
several, as for CSV). Nested values (a cause's route, a list of columns) are JSON text in CSV
and Excel; Parquet keeps lists of text as lists. Files are written beside their place and
renamed into it, so a failed write leaves what was there.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from tracelake.cli.common import DbOption, OutputFormat, UserError, friendly_errors, open_service, out

FILE_FORMATS = (OutputFormat.csv, OutputFormat.xlsx, OutputFormat.parquet)
Rows = Sequence[Mapping[str, Any]]

OutputPath = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", help="The file (or folder, for several tables) of --format csv|xlsx|parquet"
    ),
]


def write_tables(tables: Mapping[str, Rows], output: OutputFormat, path: Path | None) -> None:
    """Write the tables as `output` (one of `FILE_FORMATS`) to `path` (or stdout: CSV of one)."""
    if output not in FILE_FORMATS:
        raise ValueError(f"not a file format: {output}")
    if path is None and not (output is OutputFormat.csv and len(tables) == 1):
        several = " (a folder: there are several tables)" if len(tables) > 1 else ""
        raise UserError(f"--format {output} needs --output PATH{several}")
    if output is OutputFormat.csv and path is None:
        _write_csv(next(iter(tables.values())), sys.stdout)
        return
    assert path is not None
    if output is OutputFormat.xlsx:
        _replace(path, functools.partial(_write_xlsx, tables))
        written = [path]
    else:
        if len(tables) == 1:
            files = {path: next(iter(tables.values()))}
        else:
            path.mkdir(parents=True, exist_ok=True)
            files = {path / f"{name}.{output}": rows for name, rows in tables.items()}
        for target, rows in files.items():
            _replace(target, functools.partial(_write_one, rows, output))
        written = list(files)
    total = sum(len(rows) for rows in tables.values())
    out.print(f"wrote {total:,} rows to {', '.join(str(p) for p in written)}", highlight=False)


def _replace(path: Path, write: Callable[[Path], None]) -> None:
    """`write(staged)` into a file beside `path`, then renamed onto it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staged = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(handle)
    try:
        write(Path(staged))
        os.replace(staged, path)
    finally:
        Path(staged).unlink(missing_ok=True)


def _columns(rows: Rows) -> list[str]:
    return list(dict.fromkeys(key for row in rows for key in row))


def _flat(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, tuple, dict)) else value


def _write_csv(rows: Rows, stream: Any) -> None:
    writer = csv.writer(stream)
    columns = _columns(rows)
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else _flat(row.get(c)) for c in columns])


def _write_one(rows: Rows, output: OutputFormat, path: Path) -> None:
    if output is OutputFormat.csv:
        with path.open("w", newline="", encoding="utf-8") as stream:
            _write_csv(rows, stream)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = _columns(rows)
    data = {c: [_for_parquet(row.get(c)) for row in rows] for c in columns}
    pq.write_table(pa.table(data) if columns else pa.table({}), path)


def _for_parquet(value: Any) -> Any:
    """Lists of text stay lists; anything else nested is its JSON text."""
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return list(value)
    return _flat(value)


def _write_xlsx(tables: Mapping[str, Rows], path: Path) -> None:
    from openpyxl import Workbook

    book = Workbook(write_only=True)
    for name, rows in tables.items():
        sheet = book.create_sheet(title=name[:31])  # Excel's limit on a sheet's name
        columns = _columns(rows)
        sheet.append(columns)
        for row in rows:
            sheet.append([_flat(row.get(c)) for c in columns])
    book.save(path)


@friendly_errors
def export(
    folder: Annotated[Path, typer.Argument(help="The lake: a folder of Parquet tables and their manifest")],
    full: Annotated[bool, typer.Option("--full", help="Write every table whole, not what changed")] = False,
    db: DbOption = None,
) -> None:
    """The graph as lake tables a Spark job reads: nodes, every edge version with its validity,
    deletes, assets, labels, reads, process versions and runs. Again, only what changed since."""
    done = open_service(db).export(folder, full=full)
    kind = "everything" if done.full else "what changed"
    written = ", ".join(f"{name} {count:,}" for name, count in done.rows.items())
    out.print(
        f"wrote {folder} snapshot {done.seq} ({kind}, graph version {done.graph_version}): {written} rows",
        highlight=False,
    )


LIST_FORMATS = (OutputFormat.table, OutputFormat.json, *FILE_FORMATS)
ListFormat = Annotated[OutputFormat, typer.Option("--format", help="table, json, csv, xlsx or parquet")]


def check_list_format(output: OutputFormat) -> None:
    """A list command's `--format`: a table, JSON or a file format; not a drawing."""
    if output not in LIST_FORMATS:
        raise UserError(f"--format must be one of {', '.join(LIST_FORMATS)} here, not {output}")


def printed(output: OutputFormat, path: Path | None, document: Any, tables: Mapping[str, Rows]) -> bool:
    """Print `document` as JSON or write `tables` as the file format asked for, and say so; False
    when `output` is the command's own table, for it to print."""
    if output is OutputFormat.json:
        print(json.dumps(document, indent=2))
        return True
    if output in FILE_FORMATS:
        write_tables(tables, output, path)
        return True
    return False
