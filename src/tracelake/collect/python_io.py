"""Which Python I/O calls move data, and what each call read or wrote (for `tracelake.python`).

`HOOKS` lists the calls: pandas readers and `DataFrame.to_*` writers, pyarrow's Parquet, CSV,
Feather and dataset functions, Spark's `toPandas`/`toArrow` hand-offs, joblib and pickle dumps
and loads, ONNX and safetensors files. Each `Hook` names a module, an attribute (a function, or
a method `Class.method`) and a describer: from the call's arguments and what it returned, the
`DataRead` or `DataWrite` it was, or None for a call that moved no data (a pickle of a plain
dict); data it cannot name — a frame read from a buffer with no file behind it, a query with no
table — is `NotDescribed`, which the tracker records as a problem. A describer never looks at
record values, only at column names and a model's feature names.

Names: a file is `file.dataset/<absolute location>` (`names.location_urn`, as Spark names it);
a model file is `ai.model/<name>`, the name given for its location (`Naming.models`) or else
the location itself; a SQL table is named from its connection's URL the OpenLineage way
(`postgres://host:5432` + `db.schema.table`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from tracelake.collect.python_run import DataRead, DataWrite, NotDescribed
from tracelake.collect.sql_relation import column_urn
from tracelake.model import names

T = TypeVar("T")
Observation = DataRead | DataWrite
Describer = Callable[["Call", "Naming"], Observation | None]


@dataclass(frozen=True)
class Naming:
    """How the run names what it touches: model files by location → model name. Names are
    remembered: a training loop reads the same shards and writes the same checkpoint again and
    again, and naming a file and its columns is most of what describing a call costs."""

    models: Mapping[str, str] = field(default_factory=dict)
    _memo: dict[tuple[Any, ...], Any] = field(default_factory=dict, compare=False, repr=False)

    def dataset(self, location: str) -> str:
        return self._remember(("dataset", location), lambda: names.location_urn(location))

    def model(self, location: str) -> str:
        given = self.models.get(location)
        return self._remember(("model", location), lambda: names.asset_urn("ai.model", given or location))

    def columns(
        self, assets: tuple[str, ...], columns: tuple[str, ...] | None
    ) -> Mapping[str, frozenset[str]]:
        """Each column read by name, held by the column of that name in every asset read."""
        return self._remember(("columns", assets, columns), lambda: _read_columns(assets, columns))

    def known(self, key: tuple[Any, ...] | None) -> Any:
        """What a call of the same kind, on the same file and columns (`key`), was described as
        before (None the first time, or for no key): the same object, which the run's record
        recognizes at once. A call that is one of many allocates little more than its key."""
        return None if key is None else self._memo.get(key)

    def remember(self, key: tuple[Any, ...] | None, described: T) -> T:
        return described if key is None else self._remember(key, lambda: described)

    def _remember(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        found: T | None = self._memo.get(key)
        if found is None:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            found = self._memo[key] = make()
        return found


_MEMO_LIMIT = 10_000


@dataclass(frozen=True)
class Hook:
    module: str
    attribute: str  # `function` or `Class.method`
    describe: Describer

    @property
    def call(self) -> str:
        return f"{self.module}.{self.attribute}"


@dataclass(frozen=True)
class Spot:
    """Where a call's argument is: its position, or one of its keyword names."""

    position: int
    keywords: tuple[str, ...]

    def of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if len(args) > self.position:
            return args[self.position]
        for keyword in self.keywords:
            if keyword in kwargs:
                return kwargs[keyword]
        return None


@dataclass(frozen=True, slots=True)
class Call:
    """One call that returned: which (`module.attribute`), its arguments and its result."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    result: Any

    def arg(self, spot: Spot) -> Any:
        return spot.of(self.args, self.kwargs)


# -- what an argument or a result is -------------------------------------------------------


def location(value: Any) -> str | None:
    """The file or URI behind a path argument (a string, a PathLike, an open file with a name);
    local paths made absolute. None for a buffer."""
    found: Any = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(found, str | bytes):
        found = getattr(found, "name", None)  # an open file; BytesIO has none
        if not isinstance(found, str) or found.startswith("<"):
            return None
    text = os.fsdecode(found)
    if "://" in text or text.startswith("file:"):
        return text
    return os.path.abspath(text)


def columns_of(value: Any) -> tuple[str, ...] | None:
    """A frame's or a table's column names: pandas (a Series by its name), pyarrow (tables,
    record batches, datasets); None for anything else."""
    module = type(value).__module__
    if module.startswith("pandas"):
        if hasattr(value, "columns"):
            labels = value.columns.tolist()
            if all(type(label) is str for label in labels):
                return tuple(labels)
            return tuple(_column_name(label) for label in labels)
        name = getattr(value, "name", None)
        return (str(name),) if name is not None else ()
    if module.startswith("pyarrow"):
        schema = getattr(value, "schema", None)
        if schema is not None and hasattr(schema, "names"):
            return tuple(schema.names)
    return None


def _column_name(name: Any) -> str:
    """A pandas column label as a path: a MultiIndex's tuple joined with dots."""
    if isinstance(name, tuple):
        return ".".join(str(part) for part in name if part != "")
    return str(name)


class Model(NamedTuple):
    """A model found in a value: the features it was fitted on, and what else is said of it."""

    features: tuple[str, ...]
    facts: dict[str, Any]


def model_of(value: Any) -> Model | None:
    """The model `value` is, or holds at its top level (a dict such as `{"model": estimator,
    "features": [...]}`); None otherwise. A model is a scikit-learn-style estimator (`fit` and
    `get_params`), anything with `predict`, or a torch module."""
    for candidate in (value, *(value.values() if isinstance(value, dict) else ())):
        if _is_model(candidate):
            kind = type(candidate)
            features = _features(candidate)
            facts: dict[str, Any] = {"class": f"{kind.__module__}.{kind.__qualname__}"}
            if features:
                facts["features"] = len(features)
            return Model(features, facts)
    return None


def _is_model(value: Any) -> bool:
    if isinstance(value, type):
        return False
    if _is_torch_module(type(value)):
        return True
    return (hasattr(value, "fit") and hasattr(value, "get_params")) or callable(
        getattr(value, "predict", None)
    )


def _is_torch_module(kind: type) -> bool:
    found = _TORCH_MODULES.get(kind)
    if found is None:
        found = _TORCH_MODULES[kind] = any(
            base.__module__ == "torch.nn.modules.module" and base.__name__ == "Module"
            for base in kind.__mro__
        )
    return found


_TORCH_MODULES: dict[type, bool] = {}  # by class: its MRO is walked once


def _features(model: Any) -> tuple[str, ...]:
    """The feature names a model was fitted on (scikit-learn's `feature_names_in_`, kept when
    it was fitted on a DataFrame); a pipeline's from its first step."""
    found = getattr(model, "feature_names_in_", None)
    if found is None:
        return ()
    return tuple(str(name) for name in found)


def locations(value: Any) -> tuple[str, ...]:
    """The files behind a path argument (one, or a list of them, as pyarrow takes); raises
    NotDescribed for a buffer, whose source no name says (`pd.read_parquet(BytesIO(…))`)."""
    found = tuple(location(item) for item in (value if isinstance(value, list | tuple) else [value]))
    if not found or None in found:
        raise NotDescribed("data read or written through a buffer with no file behind it")
    return tuple(place for place in found if place is not None)


def _one(value: Any) -> str:
    places = locations(value)
    if len(places) > 1:
        raise NotDescribed(f"{len(places)} files where one was expected")
    return places[0]


def _read_columns(assets: tuple[str, ...], columns: tuple[str, ...] | None) -> dict[str, frozenset[str]]:
    """Each column of what was read, held by the column of that name in every asset read."""
    return {name: frozenset(column_urn(asset, name.lower()) for asset in assets) for name in columns or ()}


# -- describers ----------------------------------------------------------------------------


def reads_frame(path: Spot, fmt: str) -> Describer:
    """A reader of files whose result is a frame or table (its columns are what was read)."""

    def describe(call: Call, naming: Naming) -> Observation | None:
        raw, columns = call.arg(path), columns_of(call.result)
        key = ("read", call.name, raw, columns) if _absolute(raw) else None
        found: DataRead | None = naming.known(key)
        if found is None:
            places = locations(raw)
            assets = tuple(naming.dataset(place) for place in places)
            columns_read = naming.columns(assets, columns)
            found = naming.remember(key, DataRead(call.name, assets, columns_read, facts=_facts(places, fmt)))
        return found

    return describe


def writes_frame(data: Spot, path: Spot, fmt: str) -> Describer:
    """A writer of a frame or table to a file."""

    def describe(call: Call, naming: Naming) -> Observation | None:
        raw, columns = call.arg(path), columns_of(call.arg(data)) or ()
        key = ("write", call.name, raw, columns) if _absolute(raw) else None
        found: DataWrite | None = naming.known(key)
        if found is None:
            where = _one(raw)
            written = DataWrite(call.name, naming.dataset(where), columns, facts=_facts((where,), fmt))
            found = naming.remember(key, written)
        return found

    return describe


def _absolute(raw: Any) -> bool:
    """A path argument that names the same file wherever the process stands: one whose
    description may be remembered."""
    return isinstance(raw, str) and (raw.startswith("/") or "://" in raw)


def loads_object(path: Spot, fmt: str) -> Describer:
    """A load of whatever a file holds (joblib, pickle): a model, or a frame, or neither."""

    def describe(call: Call, naming: Naming) -> Observation | None:
        model = model_of(call.result)
        columns = columns_of(call.result) if model is None else None
        if model is None and columns is None:
            return None  # a cache, a config: no data Tracelake names
        where = _one(call.arg(path))
        if model is not None:
            facts = _facts((where,), fmt) | model.facts
            return DataRead(call.name, (naming.model(where),), model=True, facts=facts)
        asset = naming.dataset(where)
        return DataRead(call.name, (asset,), naming.columns((asset,), columns), facts=_facts((where,), fmt))

    return describe


def saves_object(data: Spot, path: Spot, fmt: str) -> Describer:
    """A dump of an object to a file (joblib, pickle): a model, or a frame, or neither."""

    def describe(call: Call, naming: Naming) -> Observation | None:
        value, raw = call.arg(data), call.arg(path)
        model = model_of(value)
        columns = columns_of(value) if model is None else None
        if model is None and columns is None:
            return None

        # a checkpoint written every few steps: the same file, model class and features
        what = (model.features, model.facts["class"]) if model is not None else columns
        key = ("save", call.name, raw, what) if _absolute(raw) else None
        found: DataWrite | None = naming.known(key)
        if found is None:
            where = _one(raw)
            if model is not None:
                facts = _facts((where,), fmt) | model.facts
                found = DataWrite(call.name, naming.model(where), model.features, model=True, facts=facts)
            else:
                found = DataWrite(
                    call.name, naming.dataset(where), columns or (), facts=_facts((where,), fmt)
                )
            naming.remember(key, found)
        return found

    return describe


def loads_model(path: Spot, fmt: str) -> Describer:
    """A load of a file that holds a model's weights or graph (ONNX, safetensors)."""

    def describe(call: Call, naming: Naming) -> Observation | None:
        where = _one(call.arg(path))
        return DataRead(call.name, (naming.model(where),), model=True, facts=_facts((where,), fmt))

    return describe


def saves_model(path: Spot, fmt: str) -> Describer:
    def describe(call: Call, naming: Naming) -> Observation | None:
        where = _one(call.arg(path))
        return DataWrite(call.name, naming.model(where), model=True, facts=_facts((where,), fmt))

    return describe


def reads_sql(query: Spot, connection: Spot) -> Describer:
    """`read_sql`, `read_sql_query`, `read_sql_table`: the tables a query reads (a bare name is
    a table); the result's columns are the table's when it reads one."""

    def describe(call: Call, naming: Naming) -> Observation | None:
        namespace, database = sql_namespace(call.arg(connection))
        text = str(call.arg(query) or "").strip()
        tables = [text] if text and not any(c.isspace() for c in text) else _queried_tables(text)
        schema = call.kwargs.get("schema")
        assets = tuple(
            dict.fromkeys(names.asset_urn(namespace, _qualified(database, schema, t)) for t in tables)
        )
        if not assets:
            raise NotDescribed("a query whose tables could not be found")
        columns = naming.columns(assets, columns_of(call.result)) if len(assets) == 1 else {}
        return DataRead(call.name, assets, columns)

    return describe


def writes_sql(data: Spot, table: Spot, connection: Spot) -> Describer:
    """`DataFrame.to_sql(name, con, schema=…)`."""

    def describe(call: Call, naming: Naming) -> Observation | None:
        namespace, database = sql_namespace(call.arg(connection))
        name = _qualified(database, call.kwargs.get("schema"), str(call.arg(table)))
        return DataWrite(call.name, names.asset_urn(namespace, name), columns_of(call.arg(data)) or ())

    return describe


def sql_namespace(connection: Any) -> tuple[str, str | None]:
    """(OpenLineage namespace, database) of a SQLAlchemy engine or connection, or its URL."""
    from sqlalchemy.engine import make_url

    url = getattr(getattr(connection, "engine", connection), "url", None)
    if url is None and isinstance(connection, str):
        url = make_url(connection)
    if url is None:
        raise NotDescribed(f"a connection of type {type(connection).__name__} names no database")
    backend = url.get_backend_name()
    if backend == "sqlite":
        path = os.path.abspath(url.database) if url.database and url.database != ":memory:" else ":memory:"
        return f"sqlite://{path}", None
    scheme = {"postgresql": "postgres"}.get(backend, backend)
    authority = f"{url.host}:{url.port}" if url.port else str(url.host)
    return f"{scheme}://{authority}", url.database


def _qualified(database: str | None, schema: str | None, table: str) -> str:
    parts = table.split(".")
    if schema and len(parts) == 1:
        parts = [schema, *parts]
    if database and len(parts) <= 2:
        parts = [database, *parts]
    return ".".join(parts)


def _queried_tables(sql: str) -> list[str]:
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql)
    except sqlglot.errors.ParseError:
        raise NotDescribed("a query that does not parse") from None
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    return [t.sql() for t in tree.find_all(exp.Table) if t.name and t.name not in ctes]


def hands_off(call: Call, naming: Naming) -> Observation | None:
    """A Spark DataFrame handed to pandas or Arrow: its plan says what it read, column by column."""
    from tracelake.collect.spark_handoff import handoff_read

    return handoff_read(call.name, call.args[0])


def _facts(places: tuple[str, ...], fmt: str) -> dict[str, Any]:
    return {"format": fmt} | ({"location": places[0]} if len(places) == 1 else {})


# -- the calls -----------------------------------------------------------------------------

_PATH = Spot(0, ("path", "filepath_or_buffer", "path_or_buf", "io", "source", "filename", "f", "file"))
_METHOD_PATH = Spot(1, ("path", "path_or_buf", "excel_writer", "fname"))
_SELF = Spot(0, ())


def _hooks() -> tuple[Hook, ...]:
    pandas = [
        *(
            Hook("pandas", f"read_{fmt}", reads_frame(_PATH, fmt))
            for fmt in ("parquet", "csv", "json", "feather", "orc", "excel")
        ),
        Hook("pandas", "read_pickle", loads_object(_PATH, "pickle")),
        Hook("pandas", "read_sql", reads_sql(Spot(0, ("sql",)), Spot(1, ("con",)))),
        Hook("pandas", "read_sql_query", reads_sql(Spot(0, ("sql",)), Spot(1, ("con",)))),
        Hook("pandas", "read_sql_table", reads_sql(Spot(0, ("table_name",)), Spot(1, ("con",)))),
        *(
            Hook("pandas", f"DataFrame.to_{fmt}", writes_frame(_SELF, _METHOD_PATH, fmt))
            for fmt in ("parquet", "csv", "json", "feather", "orc", "excel")
        ),
        Hook("pandas", "DataFrame.to_pickle", saves_object(_SELF, _METHOD_PATH, "pickle")),
        Hook("pandas", "DataFrame.to_sql", writes_sql(_SELF, Spot(1, ("name",)), Spot(2, ("con",)))),
    ]
    arrow = [
        Hook("pyarrow.parquet", "read_table", reads_frame(Spot(0, ("source",)), "parquet")),
        Hook(
            "pyarrow.parquet",
            "write_table",
            writes_frame(Spot(0, ("table",)), Spot(1, ("where",)), "parquet"),
        ),
        Hook("pyarrow.dataset", "dataset", reads_frame(Spot(0, ("source",)), "dataset")),
        Hook(
            "pyarrow.dataset",
            "write_dataset",
            writes_frame(Spot(0, ("data",)), Spot(1, ("base_dir",)), "dataset"),
        ),
        Hook("pyarrow.csv", "read_csv", reads_frame(Spot(0, ("input_file",)), "csv")),
        Hook("pyarrow.csv", "write_csv", writes_frame(Spot(0, ("data",)), Spot(1, ("output_file",)), "csv")),
        Hook("pyarrow.feather", "read_table", reads_frame(Spot(0, ("source",)), "feather")),
        Hook(
            "pyarrow.feather", "write_feather", writes_frame(Spot(0, ("df",)), Spot(1, ("dest",)), "feather")
        ),
    ]
    spark = [
        Hook("pyspark.sql.classic.dataframe", "DataFrame.toPandas", hands_off),
        Hook("pyspark.sql.classic.dataframe", "DataFrame.toArrow", hands_off),
    ]
    models = [
        Hook("joblib", "dump", saves_object(Spot(0, ("value",)), Spot(1, ("filename",)), "joblib")),
        Hook("joblib", "load", loads_object(Spot(0, ("filename",)), "joblib")),
        Hook("pickle", "dump", saves_object(Spot(0, ("obj",)), Spot(1, ("file",)), "pickle")),
        Hook("pickle", "load", loads_object(Spot(0, ("file",)), "pickle")),
        Hook("onnx", "save_model", saves_model(Spot(1, ("f",)), "onnx")),
        Hook("onnx", "load_model", loads_model(Spot(0, ("f",)), "onnx")),
        Hook("safetensors.numpy", "save_file", saves_model(Spot(1, ("filename",)), "safetensors")),
        Hook("safetensors.numpy", "load_file", loads_model(Spot(0, ("filename",)), "safetensors")),
        Hook("safetensors.torch", "save_file", saves_model(Spot(1, ("filename",)), "safetensors")),
        Hook("safetensors.torch", "load_file", loads_model(Spot(0, ("filename",)), "safetensors")),
    ]
    return (*pandas, *arrow, *spark, *models)


HOOKS: tuple[Hook, ...] = _hooks()
