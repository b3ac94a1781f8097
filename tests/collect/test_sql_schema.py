"""SchemaCatalog: built from dicts (flat, list, nested sqlglot form) and from YAML/JSON files;
malformed files are refused with a message that says what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracelake.collect.catalog import SchemaCatalog, SchemaFileError


def test_flat_forms_from_a_plain_dict() -> None:
    catalog = SchemaCatalog(
        {
            "dating.users": {"user_id": "bigint", "Religion": "string"},
            "hive.table/dating.events": ["id", "payload"],
            "solo": ["x"],
        }
    )
    assert catalog.columns("hive.table/dating.users") == ["user_id", "religion"]
    assert catalog.columns("dating.users") == ["user_id", "religion"]
    assert catalog.column_type("dating.users", "user_id") == "bigint"
    assert catalog.columns("dating.events") == ["id", "payload"]
    assert catalog.column_type("dating.events", "id") is None
    assert catalog.columns("default.solo") == ["x"]
    assert catalog.columns("dating.unknown") is None
    assert "hive.table/dating.users" in catalog
    assert len(catalog) == 3


def test_the_store_builds_one_from_field_lists_and_can_add() -> None:
    catalog = SchemaCatalog({"hive.table/d.t": ["a", "b"]})
    catalog.add("hive.table/d.t", ["c"])
    catalog.add("d.u", {"k": "int"})
    assert catalog.columns("hive.table/d.t") == ["a", "b", "c"]
    assert catalog.tables() == ["hive.table/d.t", "hive.table/d.u"]


def test_nested_struct_paths() -> None:
    catalog = SchemaCatalog({"d.t": {"id": "int", "address": {"city": "string", "geo": {"lat": "double"}}}})
    assert catalog.columns("d.t") == ["id", "address", "address.city", "address.geo", "address.geo.lat"]
    assert catalog.top_level_columns("d.t") == ["id", "address"]
    assert catalog.column_type("d.t", "address.geo.lat") == "double"
    dotted = SchemaCatalog({"d.t": ["id", "address.city", "address.zip"]})
    assert dotted.top_level_columns("d.t") == ["id", "address"]


def test_nested_mapping_schema_form_two_and_three_levels() -> None:
    two = SchemaCatalog.from_mapping({"dating": {"users": {"id": "int"}, "events": {"kind": "string"}}})
    assert two.columns("dating.users") == ["id"]
    assert two.columns("dating.events") == ["kind"]
    three = SchemaCatalog.from_mapping({"iceberg": {"mart": {"t": {"x": "int"}}}})
    assert three.columns("hive.table/iceberg.mart.t") == ["x"]
    default_catalog = SchemaCatalog.from_mapping({"spark_catalog": {"mart": {"t": {"x": "int"}}}})
    assert default_catalog.columns("mart.t") == ["x"]


def test_to_sqlglot_mapping() -> None:
    catalog = SchemaCatalog({"d.t": {"a": "int", "s": {"x": "string"}}, "e.u": ["k"]})
    assert catalog.to_sqlglot_mapping() == {
        "d": {"t": {"a": "int", "s": "STRUCT"}},
        "e": {"u": {"k": "UNKNOWN"}},
    }
    catalog.add("iceberg.mart.v", ["z"])
    mapping = catalog.to_sqlglot_mapping()
    assert mapping["iceberg"] == {"mart": {"v": {"z": "UNKNOWN"}}}
    assert mapping["spark_catalog"]["d"]["t"]["a"] == "int"


def test_yaml_and_json_files(tmp_path: Path) -> None:
    yaml_file = tmp_path / "schema.yaml"
    yaml_file.write_text(
        "dating.users:\n  user_id: bigint\n  religion: string\nods.t: [a, b]\n", encoding="utf-8"
    )
    assert SchemaCatalog.from_file(yaml_file).columns("dating.users") == ["user_id", "religion"]
    json_file = tmp_path / "schema.json"
    json_file.write_text(json.dumps({"dating": {"users": {"user_id": "bigint"}}}), encoding="utf-8")
    assert SchemaCatalog.from_file(json_file).columns("dating.users") == ["user_id"]
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    assert len(SchemaCatalog.from_file(empty)) == 0


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.json", "{not json", r"not a valid schema file \(JSON\)"),
        ("bad.yaml", "a: [b\n", r"not a valid schema file \(YAML\)"),
        ("list.yaml", "- a\n- b\n", "expected a mapping"),
        ("scalar.yaml", "d.t: 5\n", "'d.t' should map to a list"),
        ("column.yaml", "d.t:\n  - [x]\n", "a column should be a name"),
        ("type.yaml", "d.t:\n  a: [int]\n", "the type should be a string"),
        ("table.yaml", "a.b.c.d.e: [x]\n", "more parts"),
    ],
)
def test_malformed_files_raise_schema_file_error(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SchemaFileError, match=message) as raised:
        SchemaCatalog.from_file(path)
    assert str(path) in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_a_missing_schema_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        SchemaCatalog.from_file(tmp_path / "nope.yaml")


def test_a_binary_schema_file_is_a_schema_error(tmp_path: Path) -> None:
    path = tmp_path / "schema.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SchemaFileError, match="cannot read"):
        SchemaCatalog.from_file(path)
