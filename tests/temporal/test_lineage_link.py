"""Entity dependencies against lineage collected from real SQL on real SQLite.

The SQL below makes hive.table/default.words_count read default.articles_by_author and
default.user_weekly_reads read words_count and nb_read_exact — the declared dependencies — plus
one flow no entity declares: user_weekly_reads also reads default.ad_clicks. No statement
names default.word_prominence, so its dependency is unobserved and its asset unknown.
"""

from __future__ import annotations

from pathlib import Path

from tracelake.app.entity_lineage import link_lineage
from tracelake.app.service import Tracelake
from tracelake.store import LineageStore
from tracelake.temporal.instances import EntityStore

DEFINITIONS = """
- name: articles_by_author
  period: daily
  asset: hive.table/default.articles_by_author
- name: ad_clicks
  period: daily
  asset: hive.table/default.ad_clicks
- name: words_count
  period: daily
  asset: hive.table/default.words_count
  depends_on: [articles_by_author]
- name: nb_read_exact
  period: weekly
  week_start: monday
  asset: hive.table/default.nb_read_exact
- name: word_prominence
  period: monthly
  asset: hive.table/default.word_prominence
- name: user_weekly_reads
  period: weekly
  week_start: monday
  asset: hive.table/default.user_weekly_reads
  depends_on:
    - {entity: words_count, dates: all_week}
    - {entity: nb_read_exact}
    - {entity: word_prominence, dates: latest}
"""

SQL = """
INSERT INTO words_count SELECT article_id, count(*) AS words FROM articles_by_author GROUP BY article_id;
INSERT INTO user_weekly_reads
SELECT w.article_id, r.reads, c.clicks
FROM words_count w JOIN nb_read_exact r ON w.article_id = r.article_id
JOIN ad_clicks c ON c.article_id = w.article_id;
"""


def test_an_observed_flow_no_dependency_covers_is_flagged_and_an_unobserved_one_reported(
    tmp_path: Path,
) -> None:
    store = LineageStore(str(tmp_path / "lineage.db"))
    (tmp_path / "jobs.sql").write_text(SQL)
    Tracelake(store).ingest_sql(tmp_path / "jobs.sql")
    (tmp_path / "entities.yml").write_text(DEFINITIONS)
    entities = EntityStore(store)
    assert entities.load([tmp_path / "entities.yml"]).ok

    findings = link_lineage(entities.graph(), Tracelake(store))

    assert {(f.kind, f.upstream, f.downstream) for f in findings} == {
        ("missing dependency", "ad_clicks", "user_weekly_reads"),
        ("unobserved dependency", "word_prominence", "user_weekly_reads"),
        ("unknown asset", "", "word_prominence"),  # no SQL names it
    }
    [missing] = [f for f in findings if f.kind == "missing dependency"]
    assert missing.suggestion == "add to user_weekly_reads: depends_on: [{entity: ad_clicks}]"
