"""Reading entity definitions from YAML: every mistake is reported, with its file and line.

The YAML is written to `tmp_path`; line numbers are found in the text itself (`line_of`), so each
test says which line of its own definition a problem must point at.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tracelake.model import Problem
from tracelake.temporal.definitions import Definitions, load_definitions
from tracelake.temporal.entities import DateRange, Kind, RangeKind, TzRule
from tracelake.temporal.periods import Period

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "entities" / "wordcount.yml"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def line_of(path: Path, needle: str) -> str:
    """`line N` of the one line of `path` that contains `needle`."""
    lines = [number for number, line in enumerate(path.read_text().splitlines(), 1) if needle in line]
    assert len(lines) == 1, f"{needle!r} is on lines {lines}"
    return f"line {lines[0]}"


def load(path: Path) -> Definitions:
    return load_definitions([path])


def only_problem(definitions: Definitions) -> Problem:
    assert len(definitions.problems) == 1, definitions.problems
    return definitions.problems[0]


# ---------------------------------------------------------------------- valid definitions


def test_the_word_count_example_loads_without_problems() -> None:
    found = load(EXAMPLE)
    assert found.ok, found.problems
    assert sorted(found.entities) == [
        "articles_by_author",
        "nb_read_exact",
        "user_weekly_reads",
        "word_prominence",
        "words_count",
    ]
    reads = found.entities["user_weekly_reads"]
    assert reads.period is Period.WEEKLY
    assert reads.week_start == 0
    assert reads.state_names == ("estimated", "completed")
    estimated, completed = reads.states
    assert [(dep.entity, str(dep.dates)) for dep in estimated.depends_on] == [
        ("words_count", "all_week"),
        ("word_prominence", "latest"),
    ]
    assert [(dep.entity, str(dep.dates)) for dep in completed.depends_on] == [
        ("words_count", "all_week"),
        ("nb_read_exact", "all_week"),
    ]
    assert found.entities["words_count"].source == str(EXAMPLE)
    assert found.entities["words_count"].line == 10  # `- name: words_count`


def test_an_unnamed_range_takes_the_default_of_the_two_kinds(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        entities:
          - {name: src, period: daily}
          - {name: referential, kind: static}
          - {name: catalog, period: daily, kind: snapshot}
          - {name: plain, period: daily, depends_on: [src, catalog, referential]}
          - {name: window, period: daily, kind: sliding_window, window: 30, depends_on: [src]}
          - {name: total, period: daily, kind: cumulative, cumulative_over: monthly, depends_on: [src]}
          - {name: frozen, kind: static, depends_on: [src]}
        """,
    )
    found = load(path)
    assert found.ok, found.problems

    def ranges(name: str) -> list[DateRange]:
        return [dep.dates for dep in found.entities[name].states[0].depends_on]

    assert ranges("plain") == [
        DateRange(RangeKind.SAME),
        DateRange(RangeKind.LATEST),
        DateRange(RangeKind.ALL),
    ]
    assert ranges("window") == [DateRange(RangeKind.WINDOW)]
    assert ranges("total") == [DateRange(RangeKind.TO_DATE)]
    assert ranges("frozen") == [DateRange(RangeKind.ALL)]
    assert found.entities["referential"].period is None
    assert found.entities["total"].kind is Kind.CUMULATIVE


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("same", DateRange(RangeKind.SAME)),
        ("all", DateRange(RangeKind.ALL)),
        ("all_week", DateRange(RangeKind.WITHIN, period=Period.WEEKLY)),
        ("ALL_MONTH", DateRange(RangeKind.WITHIN, period=Period.MONTHLY)),
        ("last_30_days", DateRange(RangeKind.LAST, count=30, unit="days")),
        ("last_36_hours", DateRange(RangeKind.LAST, count=36, unit="hours")),
        ("window", DateRange(RangeKind.WINDOW)),
        ("previous", DateRange(RangeKind.PREVIOUS, count=1)),
        ("previous_7", DateRange(RangeKind.PREVIOUS, count=7)),
        ("to_date", DateRange(RangeKind.TO_DATE)),
        ("latest", DateRange(RangeKind.LATEST)),
        ("last_available", DateRange(RangeKind.LATEST)),
    ],
)
def test_range_words(text: str, expected: DateRange) -> None:
    assert DateRange.parse(text) == expected
    assert DateRange.parse(str(expected)) == expected


def test_states_without_dependencies_may_be_given_as_a_list(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - name: reads
          period: daily
          states: [estimated, completed]
        """,
    )
    found = load(path)
    assert found.ok, found.problems
    assert found.entities["reads"].state_names == ("estimated", "completed")


def test_a_state_without_dependencies_may_be_left_empty(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - {name: src, period: daily}
        - name: reads
          period: daily
          states:
            estimated:
            completed:
              depends_on: [src]
        """,
    )
    found = load(path)
    assert found.ok, found.problems
    estimated, completed = found.entities["reads"].states
    assert (estimated.name, estimated.depends_on) == ("estimated", ())
    assert [dep.entity for dep in completed.depends_on] == ["src"]


def test_a_folder_reads_every_yaml_file_under_it_and_they_may_name_each_other(tmp_path: Path) -> None:
    write(tmp_path, "sources.yml", "- {name: src, period: daily}\n")
    write(
        tmp_path,
        "nested/derived.yaml",
        """
        entities:
          - name: derived
            period: daily
            depends_on: [src]
        """,
    )
    write(tmp_path, "notes.txt", "- {name: not_an_entity, period: daily}\n")
    found = load(tmp_path)
    assert found.ok, found.problems
    assert sorted(found.entities) == ["derived", "src"]
    assert found.entities["derived"].source == str(tmp_path / "nested" / "derived.yaml")


def test_several_paths_are_read_together(tmp_path: Path) -> None:
    first = write(tmp_path, "a.yml", "- {name: src, period: hourly}\n")
    second = write(tmp_path, "b.yml", "- {name: daily, period: daily, depends_on: [src]}\n")
    found = load_definitions([first, second])
    assert found.ok, found.problems
    assert sorted(found.entities) == ["daily", "src"]


def test_mixed_time_zones_are_accepted_with_a_timezones_rule(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - {name: utc_hourly, period: hourly, timezone: UTC}
        - {name: paris_catalog, period: daily, kind: snapshot, timezone: UTC}
        - {name: referential, kind: static}
        - name: paris_daily
          period: daily
          timezone: Europe/Paris
          depends_on:
            - {entity: utc_hourly, dates: same, timezones: instant}
            - {entity: utc_hourly, dates: last_2_days, timezones: calendar}
            - {entity: paris_catalog}
            - {entity: referential}
        """,
    )
    found = load(path)
    assert found.ok, found.problems
    rules = [dep.timezones for dep in found.entities["paris_daily"].states[0].depends_on]
    assert rules == [TzRule.INSTANT, TzRule.CALENDAR, None, None]


def test_a_self_dependency_on_previous_instances_is_allowed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - {name: src, period: daily}
        - name: total
          period: daily
          depends_on:
            - {entity: src}
            - {entity: total, dates: previous}
            - {entity: total, dates: previous_7}
        """,
    )
    assert load(path).ok


# ---------------------------------------------------------------------- one problem at a time


def test_an_unknown_upstream_is_reported_on_its_dependency_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - name: a
          period: daily
          depends_on:
            - entity: nowhere
              dates: same
        """,
    )
    problem = only_problem(load(path))
    assert problem.source == str(path)
    assert problem.location == line_of(path, "entity: nowhere")
    assert "a: depends on unknown entity 'nowhere'" in problem.reason


def test_an_unknown_upstream_given_by_name_only_is_reported_on_the_depends_on_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - name: a
          period: daily
          depends_on: [nowhere]
        """,
    )
    problem = only_problem(load(path))
    assert problem.location == line_of(path, "depends_on")
    assert "unknown entity 'nowhere'" in problem.reason


def test_a_cycle_is_named_and_reported_on_a_dependency_that_closes_it(tmp_path: Path) -> None:
    # data flows c → a → b → c (a reads c, b reads a, c reads b); `outside` only reads the cycle
    path = write(
        tmp_path,
        "e.yml",
        """
        - name: a
          period: daily
          depends_on:
            - entity: c
        - name: b
          period: daily
          depends_on:
            - entity: a
        - name: c
          period: daily
          depends_on:
            - entity: b
        - name: outside
          period: daily
          depends_on:
            - entity: c
        """,
    )
    problem = only_problem(load(path))
    assert problem.reason.startswith("dependency cycle: ")
    chain = problem.reason.removeprefix("dependency cycle: ").split(" → ")
    assert chain[0] == chain[-1]
    assert len(chain) == 4
    # any rotation of a → b → c → a, in the direction data flows
    assert " → ".join(chain * 2).count("a → b → c") >= 1
    dependency_lines = {"a": "line 4", "b": "line 8", "c": "line 12"}  # each `- entity:` that reads the next
    assert problem.location in dependency_lines.values()
    assert problem.source == str(path)


def test_a_two_entity_cycle_across_files_names_both(tmp_path: Path) -> None:
    write(tmp_path, "a.yml", "- {name: a, period: daily, depends_on: [b]}\n")
    write(tmp_path, "b.yml", "- {name: b, period: daily, depends_on: [a]}\n")
    problem = only_problem(load(tmp_path))
    assert problem.reason in ("dependency cycle: a → b → a", "dependency cycle: b → a → b")
    assert problem.source in (str(tmp_path / "a.yml"), str(tmp_path / "b.yml"))
    assert problem.location == "line 1"


def test_an_accepted_state_the_upstream_never_holds_can_never_be_satisfied(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - name: up
          period: daily
          states:
            estimated:
        - name: down
          period: daily
          depends_on:
            - entity: up
              states: [estimated, final]
        """,
    )
    problem = only_problem(load(path))
    assert problem.location == line_of(path, "entity: up")
    assert "down: needs up in state 'final', which it never holds" in problem.reason
    assert "never be satisfied" in problem.reason


def test_the_default_accepted_state_is_completed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - name: up
          period: daily
          states:
            estimated:
        - name: down
          period: daily
          depends_on: [up]
        """,
    )
    problem = only_problem(load(path))
    assert "needs up in state 'completed'" in problem.reason


def test_a_weekly_entity_must_declare_its_week_start(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - name: daily
          period: daily
        - name: weekly
          period: weekly
        """,
    )
    found = load(path)
    problem = only_problem(found)
    assert problem.location == line_of(path, "name: weekly")
    assert "weekly: a weekly entity must declare its `week_start`" in problem.reason
    assert "weekly" not in found.entities


def test_a_week_start_must_be_a_day_name(tmp_path: Path) -> None:
    path = write(tmp_path, "e.yml", "- name: weekly\n  period: weekly\n  week_start: 1\n")
    problem = only_problem(load(path))
    assert problem.location == "line 3"
    assert "week_start must be a day name" in problem.reason


def test_all_week_on_a_daily_entity_needs_a_week_start_from_one_side(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - {name: src, period: daily}
        - {name: weekly_src, period: weekly, week_start: sunday}
        - name: no_week
          period: daily
          depends_on:
            - {entity: src, dates: all_week}
        - name: own_week
          period: daily
          week_start: monday
          depends_on:
            - {entity: src, dates: all_week}
        - name: upstream_week
          period: daily
          depends_on:
            - {entity: weekly_src, dates: all_week}
        """,
    )
    problem = only_problem(load(path))
    assert problem.reason.startswith("no_week: range all_week needs a week start")
    assert problem.location == "line 6"


def test_mixed_time_zones_without_a_rule_are_refused_on_the_dependency_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - name: utc_hourly
          period: hourly
        - name: paris_daily
          period: daily
          timezone: Europe/Paris
          depends_on:
            - entity: utc_hourly
              dates: same
        """,
    )
    problem = only_problem(load(path))
    assert problem.location == line_of(path, "entity: utc_hourly")
    assert "paris_daily (Europe/Paris) and utc_hourly (UTC) are in different time zones" in problem.reason
    assert "timezones: instant" in problem.reason


def test_an_unknown_time_zone_or_rule_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - {name: a, period: daily, timezone: Europe/Atlantis}
        - {name: b, period: daily, timezone: UTC}
        - name: c
          period: daily
          timezone: Europe/Paris
          depends_on:
            - entity: b
              timezones: local
        """,
    )
    problems = load(path).problems
    assert [(p.location, p.reason.split(":")[0]) for p in problems] == [("line 1", "a"), ("line 8", "c")]
    assert "unknown time zone 'Europe/Atlantis'" in problems[0].reason
    assert "timezones 'local' is not one of instant, calendar" in problems[1].reason


@pytest.mark.parametrize("dates", ["same", "all", "all_month", "last_2_days", None])
def test_a_self_dependency_other_than_previous_is_refused(tmp_path: Path, dates: str | None) -> None:
    range_line = f"\n      dates: {dates}" if dates else ""
    path = write(
        tmp_path,
        "e.yml",
        f"""
- name: total
  period: daily
  depends_on:
    - entity: total{range_line}
""",
    )
    problem = only_problem(load(path))
    assert problem.location == "line 4"
    assert f"total: an instance cannot depend on itself over `{dates or 'same'}`" in problem.reason


def test_an_entity_defined_twice_is_reported_at_the_second_definition(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - name: twice
          period: daily
        - name: other
          period: daily
        - name: twice
          period: hourly
        """,
    )
    found = load(path)
    problem = only_problem(found)
    assert problem.location == "line 5"
    assert problem.reason == f"entity 'twice' is defined twice (first at {path}:1)"
    assert found.entities["twice"].period is Period.DAILY  # the first one is kept


def test_an_entity_defined_in_two_files_is_reported_in_the_second(tmp_path: Path) -> None:
    write(tmp_path, "a.yml", "- {name: other, period: daily}\n- {name: twice, period: daily}\n")
    write(tmp_path, "b.yml", "- {name: twice, period: daily}\n")
    problem = only_problem(load(tmp_path))
    assert problem.source == str(tmp_path / "b.yml")
    assert problem.location == "line 1"
    assert f"first at {tmp_path / 'a.yml'}:2" in problem.reason


def test_invalid_yaml_is_reported_with_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - name: a
          period: daily
        - name: b
          period: daily: weekly
        """,
    )
    found = load(path)
    problem = only_problem(found)
    assert problem.source == str(path)
    assert problem.location == "line 4"
    assert problem.reason.startswith("not valid YAML: ")
    assert found.entities == {}


def test_invalid_yaml_in_one_file_does_not_hide_the_others(tmp_path: Path) -> None:
    write(tmp_path, "a.yml", "- name: a\n  period: [daily\n")
    write(tmp_path, "b.yml", "- {name: b, period: daily}\n")
    found = load(tmp_path)
    problem = only_problem(found)
    assert problem.source == str(tmp_path / "a.yml")
    assert list(found.entities) == ["b"]


def test_an_unknown_range_word_is_reported_on_the_dates_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - {name: src, period: daily}
        - name: down
          period: daily
          depends_on:
            - entity: src
              dates: fortnight
        """,
    )
    problem = only_problem(load(path))
    assert problem.location == line_of(path, "fortnight")
    assert "down: unknown date range 'fortnight'" in problem.reason


@pytest.mark.parametrize("dates", ["last_0_days", "previous_0"])
def test_a_range_of_no_time_is_refused(tmp_path: Path, dates: str) -> None:
    dependency = f"{{entity: src, dates: {dates}}}"
    path = write(
        tmp_path,
        "e.yml",
        f"- {{name: src, period: daily}}\n- {{name: d, period: daily, depends_on: [{dependency}]}}\n",
    )
    problem = only_problem(load(path))
    assert problem.location == "line 2"
    assert "covers no time" in problem.reason


def test_an_unknown_entity_key_is_reported_on_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - name: a
          perod: daily
          period: daily
        """,
    )
    problem = only_problem(load(path))
    assert problem.location == "line 2"
    assert problem.reason == "a: unknown key 'perod'"


def test_an_unknown_dependency_key_is_reported_on_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - {name: src, period: daily}
        - name: a
          period: daily
          depends_on:
            - entity: src
              date: same
        """,
    )
    problem = only_problem(load(path))
    assert problem.location == line_of(path, "date: same")
    assert problem.reason == "a: unknown dependency key 'date'"


def test_ranges_that_need_another_kind_of_entity_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - {name: src, period: daily}
        - name: plain
          period: daily
          depends_on:
            - {entity: src, dates: window}
            - {entity: src, dates: to_date}
        - name: frozen
          kind: static
          depends_on:
            - {entity: src, dates: same}
        """,
    )
    problems = load(path).problems
    assert [problem.location for problem in problems] == ["line 10", "line 5", "line 6"]
    assert "static (no periods), so its dependency on src can only be `all`" in problems[0].reason
    assert "range `window` needs a sliding_window entity" in problems[1].reason
    assert "range `to_date` needs a cumulative entity" in problems[2].reason


def test_kinds_that_need_settings_say_so(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - {name: window, period: daily, kind: sliding_window}
        - {name: total, period: daily, kind: cumulative}
        - {name: noperiod}
        - {name: badperiod, period: yearly}
        - {name: badkind, period: daily, kind: rolling}
        """,
    )
    problems = load(path).problems
    assert [problem.location for problem in problems] == [f"line {n}" for n in range(1, 6)]
    assert "a sliding window needs `window`" in problems[0].reason
    assert "a cumulative entity needs `cumulative_over`" in problems[1].reason
    assert "a time_series entity needs a `period`" in problems[2].reason
    assert "period 'yearly' is not one of hourly, daily, weekly, monthly" in problems[3].reason
    assert "kind 'rolling' is not one of" in problems[4].reason


# ---------------------------------------------------------------------- all at once


def test_every_problem_is_reported_not_only_the_first(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yml",
        """
        - name: src
          period: daily
          states:
            estimated:
        - name: weekly
          period: weekly
        - name: reads
          period: daily
          timezone: Europe/Paris
          depends_on:
            - entity: ghost
            - entity: src
              states: [completed]
        - name: loop
          period: daily
          depends_on:
            - entity: loop
              dates: same
        - name: reads
          period: daily
        - name: typo
          period: daily
          depends_on:
            - entity: src
              dates: sometimes
        """,
    )
    found = load(path)
    by_line = sorted((int(problem.location.split()[1]), problem.reason) for problem in found.problems)
    assert [line for line, _ in by_line] == [5, 11, 12, 17, 19, 25]
    reasons = [reason for _, reason in by_line]
    assert "weekly entity must declare its `week_start`" in reasons[0]
    assert "unknown entity 'ghost'" in reasons[1]
    assert "needs src in state 'completed'" in reasons[2]
    assert "cannot depend on itself over `same`" in reasons[3]
    assert "defined twice" in reasons[4]
    assert "unknown date range 'sometimes'" in reasons[5]
    assert all(problem.source == str(path) for problem in found.problems)
    assert not found.ok


def test_problems_in_several_files_each_name_their_own_file(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yml", "- {name: a, period: daily, depends_on: [ghost_a]}\n")
    b = write(tmp_path, "sub/b.yml", "- {name: b, period: daily}\n- {name: c, period: weekly}\n")
    c = write(tmp_path, "sub/c.yaml", "- name: d\n  period: daily\n  depends_on: [ghost_d]\n")
    found = load(tmp_path)
    assert sorted((problem.source, problem.location) for problem in found.problems) == sorted(
        [(str(a), "line 1"), (str(b), "line 2"), (str(c), "line 3")]
    )
