"""ML config lineage: training configs and serving configs into flows, with shapes declared in
YAML, and malformed configs reported while the rest are collected. Expected flows are read off
the configs written in each test."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracelake.cli import app
from tracelake.collect.configs import collect_configs, load_shapes
from tracelake.model import Signal
from tracelake.store import LineageStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dating" / "configs"


def flows(paths: list[Path], shapes_file: Path | None = None) -> set[tuple[str, str, str]]:
    shapes = load_shapes(shapes_file) if shapes_file else []
    return {(e.source, e.target, e.process) for e in collect_configs(paths, shapes).batch.edges}


def test_the_dating_configs(tmp_path: Path) -> None:
    collection = collect_configs([EXAMPLE])

    assert collection.problems == []
    assert {(e.source, e.target) for e in collection.batch.edges} == {
        # the ranking model's training job: the training table and the religion feature
        ("hive.table/dating.dating_training_tbl", "ai.model/dating_ranking_model"),
        ("ai.feature/DATING_USER_RELIGION_SCORE", "ai.model/dating_ranking_model"),
        # the feature job and the inference service
        ("hive.table/dating.user_profile", "ai.feature/DATING_USER_RELIGION_SCORE"),
        ("ai.model/dating_ranking_model", "web.endpoint/ranking.recommend"),
    }
    assert {e.signal for e in collection.batch.edges} == {Signal.CONFIG}
    assert {p.urn for p in collection.batch.processes} == {
        "ml.training/dating_ranking_training",
        "ml.training/religion_score_feature",
        "ml.training/ranking_service",
    }


def test_a_declared_shape_finds_inputs_and_outputs_where_the_default_would_not(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "trainer: xgb\nname: churn\ndata:\n  tables: [crm.customers, {uri: 'asset://hive.table/crm.events'}]\n"
        "export:\n  registry: churn_model\n"
    )
    (tmp_path / "shapes.yml").write_text(
        "shapes:\n  - name: xgb\n    match: {trainer: xgb}\n    inputs: ['data.tables[*]']\n"
        "    outputs: [{path: export.registry, kind: ai.model}]\n"
    )

    assert flows([tmp_path / "job.yaml"], tmp_path / "shapes.yml") == {
        ("hive.table/crm.customers", "ai.model/churn_model", "ml.training/churn"),
        ("hive.table/crm.events", "ai.model/churn_model", "ml.training/churn"),
    }


def test_a_configs_datasets_are_named_as_every_collector_names_them(tmp_path: Path) -> None:
    (tmp_path / "train.yaml").write_text(
        "name: churn\n"
        "inputs: [Crm.`Customers`, 's3a://Lake/features/ds=2024-01-01/', 'postgres://db:5432/crm.public.orders']\n"
        "model: churn_model\n"
    )
    # the SQL collector's node for the table, the Spark tracker's for the files, the spec's for
    # the Postgres table
    assert {source for source, _, _ in flows([tmp_path / "train.yaml"])} == {
        "hive.table/crm.customers",
        "file.dataset/s3://Lake/features",
        "postgres.table//db:5432/crm.public.orders",
    }


def test_bad_configs_are_reported_and_the_rest_collected(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text("name: ok\ninputs: [db.a]\nmodel: m\n")
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    (tmp_path / "no_output.json").write_text('{"name": "half", "inputs": ["db.a"]}')
    (tmp_path / "list.yaml").write_text("- just\n- a list\n")

    collection = collect_configs([tmp_path])

    assert {(e.source, e.target) for e in collection.batch.edges} == {("hive.table/db.a", "ai.model/m")}
    reasons = {Path(p.source).name: p.reason for p in collection.problems}
    assert set(reasons) == {"broken.yaml", "no_output.json", "list.yaml"}
    assert reasons["broken.yaml"].startswith("cannot read the config")
    assert reasons["no_output.json"] == "no output found with the 'default' shape"
    assert reasons["list.yaml"] == "not a mapping: a config is a YAML or JSON object"


def test_a_shape_without_outputs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "shapes.yml").write_text("shapes:\n  - {name: bad, inputs: [a]}\n")

    with pytest.raises(ValueError, match="needs `inputs` and `outputs`"):
        load_shapes(tmp_path / "shapes.yml")


def test_tracelake_ingest_configs(tmp_path: Path) -> None:
    db = str(tmp_path / "lineage.db")
    runner = CliRunner()

    result = runner.invoke(app, ["ingest", "configs", str(EXAMPLE), "--db", db], env={"COLUMNS": "250"})

    assert result.exit_code == 0 and "3 configs: 3 read, 4 edges" in result.stdout
    assert LineageStore(db).nodes(["ai.model/dating_ranking_model"])
    missing = runner.invoke(
        app, ["ingest", "configs", str(tmp_path / "nope"), "--db", db], env={"COLUMNS": "250"}
    )
    assert missing.exit_code == 2 and "no such file or folder" in missing.stderr
