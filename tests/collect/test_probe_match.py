"""Payload matching, the heart of privacy probes: which sink fields hold a value a request received,
and whether whole (EXACT_MATCH) or inside something longer (CONTAINS)."""

from __future__ import annotations

import time
import unicodedata
from dataclasses import dataclass

import pytest

from tracelake.collect.probe_match import Leaf, Limits, MatchKind, flatten, match

LIMITS = Limits()


def found(source: object, sink: object, **options: object) -> set[tuple[str, str, MatchKind]]:
    sources, _ = flatten(source, LIMITS)
    sinks, _ = flatten(sink, LIMITS)
    matches, cut = match(sources, sinks, **options)  # type: ignore[arg-type]
    assert not cut
    return {(m.source.path, m.sink.path, m.kind) for m in matches}


# ---------------------------------------------------------------- the seed's three rows


def test_a_copied_value_is_an_exact_match() -> None:
    assert found({"religion": "Atheist"}, {"religion": "Atheist"}) == {
        ("religion", "religion", MatchKind.EXACT_MATCH)
    }


def test_a_value_inside_a_longer_string_is_contained() -> None:
    # a log line that is a bare string is one field, `value`
    assert found({"religion": "Buddhist"}, "metadata: religion: Buddhist") == {
        ("religion", "value", MatchKind.CONTAINS)
    }


def test_a_transformed_value_does_not_match() -> None:
    assert found({"religions": ["Catholic", "Christian"]}, {"count": 2}) == set()


# ---------------------------------------------------------------- where a value can hide


def test_a_nested_value_is_contained_at_its_path() -> None:
    assert found({"religion": "Buddhist"}, {"metadata": {"religion": "Buddhist", "v": 3}}) == {
        ("religion", "metadata.religion", MatchKind.CONTAINS)
    }


def test_a_list_element_is_contained_in_the_list() -> None:
    assert found({"religion": "Catholic"}, {"tags": ["new", "Catholic"]}) == {
        ("religion", "tags", MatchKind.CONTAINS)
    }


def test_each_element_of_a_source_list_is_looked_for() -> None:
    assert found({"religions": ["Catholic", "Christian"]}, {"first": "Christian"}) == {
        ("religions", "first", MatchKind.EXACT_MATCH)
    }


def test_a_json_document_in_a_string_is_opened_and_the_string_column_holds_the_value() -> None:
    sink = {"payload": '{"profile": {"religion": "Buddhist"}, "n": [1, 2]}'}
    assert found({"religion": "Buddhist"}, sink) == {("religion", "payload", MatchKind.CONTAINS)}


def test_numbers_and_their_text_are_one_value() -> None:
    assert found({"user_id": 12345}, {"uid": "12345", "score": 12345.0}) == {
        ("user_id", "uid", MatchKind.EXACT_MATCH),
        ("user_id", "score", MatchKind.EXACT_MATCH),
    }


def test_a_number_inside_text_is_not_a_match() -> None:
    # digits inside a timestamp or an order number would match any id by chance
    assert found({"user_id": 2024}, {"ts": "2024-03-10T10:00:00"}) == set()


def test_short_values_booleans_and_nulls_never_match() -> None:
    source = {"flag": True, "empty": "", "code": "no", "none": None, "n": 7}
    sink = {"flag": True, "empty": "", "code": "no", "none": None, "text": "no way", "n": 7}
    assert found(source, sink) == set()


def test_the_minimum_length_is_configurable() -> None:
    assert found({"code": "no"}, {"code": "no"}, min_length=2) == {("code", "code", MatchKind.EXACT_MATCH)}


def test_objects_are_read_as_their_fields() -> None:
    @dataclass
    class Update:
        religion: str
        city: str

    assert found(Update("Atheist", "Lyon"), {"message": "moved to Lyon"}) == {
        ("city", "message", MatchKind.CONTAINS)
    }


# ---------------------------------------------------------------- unicode and binary


def test_unicode_values_match_whatever_their_normal_form() -> None:
    composed = "Müslüman"
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed
    assert found({"religion": composed}, {"religion": decomposed}) == {
        ("religion", "religion", MatchKind.EXACT_MATCH)
    }


def test_two_cjk_characters_are_long_enough_to_match() -> None:
    # `min_length` counts UTF-8 bytes: 佛教 is 6, as informative as a 6-letter word
    assert found({"religion": "佛教"}, {"line": "宗教: 佛教 🙏"}) == {
        ("religion", "line", MatchKind.CONTAINS)
    }


def test_text_is_found_inside_binary_payloads() -> None:
    sink = {"blob": b"\x00\x01religion=Atheist\xff"}
    assert found({"religion": "Atheist"}, sink) == {("religion", "blob", MatchKind.CONTAINS)}


def test_bytes_match_bytes_but_are_not_looked_for_in_text() -> None:
    secret = b"\x89PNG\x00\x01"
    assert found({"photo": secret}, {"copy": secret, "b64": "iVBORw0AAQ=="}) == {
        ("photo", "copy", MatchKind.EXACT_MATCH)
    }
    assert found({"photo": secret}, {"wrapped": b"head" + secret + b"tail"}) == {
        ("photo", "wrapped", MatchKind.CONTAINS)
    }


# ---------------------------------------------------------------- size caps and the deadline


def test_payloads_are_cut_at_the_leaf_limit_and_say_so() -> None:
    big = {f"k{i}": f"value-{i}" for i in range(1000)}
    leaves, truncated = flatten(big, Limits(max_leaves=100))
    assert truncated
    assert len(leaves) == 100
    assert leaves[-1] == Leaf("k99", "value-99")


def test_payloads_are_cut_at_the_byte_limit() -> None:
    leaves, truncated = flatten({"a": "x" * 600, "b": "y" * 600, "c": "z"}, Limits(max_bytes=1000))
    assert truncated
    assert [leaf.path for leaf in leaves] == ["a"]


def test_a_value_in_a_large_payload_is_found_within_the_limits_only() -> None:
    sink = {"rows": [{"id": i, "note": f"user {i} says hello"} for i in range(200)]}
    sink["rows"][150]["note"] = "user 150 is Buddhist"  # the 302nd leaf
    sources, _ = flatten({"religion": "Buddhist"}, LIMITS)

    leaves, truncated = flatten(sink, Limits(max_leaves=1000))
    assert not truncated
    assert [(m.sink.path, m.kind) for m in match(sources, leaves)[0]] == [("rows.note", MatchKind.CONTAINS)]

    leaves, truncated = flatten(sink, Limits(max_leaves=256))
    assert truncated
    assert match(sources, leaves)[0] == []


def test_deep_nesting_stops_at_the_depth_limit() -> None:
    deep: dict[str, object] = {"religion": "Atheist"}
    for _ in range(20):
        deep = {"d": deep}
    leaves, _ = flatten({"top": deep}, Limits(max_depth=8))
    assert leaves == []


def test_matching_stops_at_its_deadline_and_says_so() -> None:
    sources = [Leaf(f"f{i}", f"value-{i}") for i in range(100)]
    sinks = [Leaf("s", "value-1")]
    matches, cut = match(sources, sinks, deadline_ns=time.thread_time_ns() - 1)
    assert cut
    assert matches == []


@pytest.mark.parametrize("payload", [None, 42, "just text", ["a", "list"], b"bytes"])
def test_a_payload_that_is_not_a_record_is_one_field(payload: object) -> None:
    leaves, _ = flatten(payload, LIMITS, top="message")
    assert {leaf.path for leaf in leaves} <= {"message"}
