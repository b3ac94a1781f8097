"""The web UI in headless Chromium (Debian's `chromium`, driven by Playwright), against a real
uvicorn server over a real SQLite store.

The dating example's query log says (see tests/api/test_api.py): safety_training_tbl is written
from the temporary view recent_reports, which on 2024-03-12 (the latest version) reads
safety_log_tbl joined to user_profile, and before that read safety_log_tbl alone; safety_log_tbl
is written from abuse_reports ⋈ user_profile; the view safety_training_latest reads
safety_training_tbl. Column-wise, target_religion is `religion` of safety_log_tbl (IDENTITY, and
GROUP_BY), filtered on ds and severity (FILTER).

`TRACELAKE_UI_SCREENSHOT=docs/ui-dating.png` makes the column test also save its screenshot
there (relative to the repository); otherwise the suite writes only into tmp_path.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from fastapi import FastAPI

from tracelake.api.app import ApiSettings, create_app
from tracelake.api.auth import new_token
from tracelake.api.server import serve_in_thread
from tracelake.app.review import Review
from tracelake.app.service import Tracelake
from tracelake.model import FlowEdge, LineageBatch, Signal
from tracelake.store import LineageStore

sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need Playwright")
Browser = sync_api.Browser
Page = sync_api.Page
Locator = sync_api.Locator
expect = sync_api.expect

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "dating"
CHROMIUM = os.environ.get("TRACELAKE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
API = "/api/tracelake/v1"

TRAINING = "hive.table/dating.safety_training_tbl"
LATEST = "hive.table/dating.safety_training_latest"
SAFETY_LOG = "hive.table/dating.safety_log_tbl"
PROFILE = "hive.table/dating.user_profile"
ABUSE = "hive.table/dating.abuse_reports"
SEGMENTS = "hive.table/ads.user_segments"
HUB = "hive.table/scale.hub"
FANOUT = 5000


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        missing = f"no Chromium at {CHROMIUM} (apt-get install chromium, or set TRACELAKE_CHROMIUM)"
        if os.environ.get("TRACELAKE_REQUIRE_BROWSER") == "1":  # CI: the browser tests must run
            pytest.fail(missing)
        pytest.skip(missing)
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert not errors, f"JavaScript errors: {errors}"


@pytest.fixture(scope="module")
def dating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tracelake]:
    service = Tracelake(LineageStore(str(tmp_path_factory.mktemp("dating") / "lineage.db")))
    service.ingest_sql(EXAMPLE / "query_log.jsonl", schema_file=EXAMPLE / "schema.yaml")
    service.ingest_configs([EXAMPLE / "configs"])
    Review(service).declare(f"{PROFILE}#religion", ["religion"])  # as a privacy engineer would
    yield service
    service.close()


def ui_app(service: Tracelake, settings: ApiSettings | None = None) -> FastAPI:
    return create_app(service, settings)  # the UI is part of every server


@pytest.fixture(scope="module")
def url(dating: Tracelake) -> Iterator[str]:
    """The UI over the dating example, checking the example's policies (examples/dating/*.yml)."""
    with serve_in_thread(ui_app(dating, ApiSettings(policy_dir=EXAMPLE))) as base:
        yield base


@pytest.fixture(scope="module")
def scale_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One hub table feeding 5,000 downstream tables."""
    service = Tracelake(LineageStore(str(tmp_path_factory.mktemp("scale") / "lineage.db")))
    edges = [
        FlowEdge(HUB, f"hive.table/scale.t{i:04d}", "spark.job/fanout", Signal.SPARK_RUNTIME)
        for i in range(FANOUT)
    ]
    service.store.ingest(LineageBatch(edges=edges))
    with serve_in_thread(ui_app(service)) as base:
        yield base
    service.close()


# ---------------------------------------------------------------- helpers


def box(page: Page, urn: str) -> Locator:
    return page.locator(f'[data-testid="node"][data-urn="{urn}"]')


def toggle(page: Page, urn: str, direction: str) -> Locator:
    return box(page, urn).locator(f'[data-testid="toggle-{direction}"]')


def field_row(page: Page, urn: str) -> Locator:
    return page.locator(f'[data-testid="field-row"][data-urn="{urn}"]')


def boxes(page: Page) -> dict[str, int]:
    """The boxes on screen: URN → level (negative upstream)."""
    return {
        element.get_attribute("data-urn") or "": int(element.get_attribute("data-level") or 0)
        for element in page.locator('[data-testid="node"]').all()
    }


def open_asset(page: Page, base: str, urn: str) -> None:
    page.goto(f"{base}/ui/#node={quote(urn, safe='')}")
    expect(box(page, urn)).to_have_attribute("data-level", "0")
    expect(page.locator("body")).to_have_attribute("data-busy", "false")


def idle(page: Page) -> None:
    expect(page.locator("body")).to_have_attribute("data-busy", "false")


# ---------------------------------------------------------------- serving


def test_the_server_serves_the_ui_without_a_build_step(url: str) -> None:
    home = requests.get(url + "/", allow_redirects=False, timeout=10)
    assert home.status_code == 307 and home.headers["location"] == "ui/"
    index = requests.get(url + "/ui/", timeout=10)
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in index.headers["content-security-policy"]
    assert '<script src="app.js"' in index.text
    script = requests.get(url + "/ui/app.js", timeout=10)
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert requests.get(url + "/ui/app.css", timeout=10).status_code == 200
    assert requests.get(url + "/ui", allow_redirects=False, timeout=10).headers["location"] == "ui/"
    # nothing outside the static folder
    assert requests.get(url + "/ui/../app.py", timeout=10).status_code == 404


# ---------------------------------------------------------------- the dating example


def test_search_open_expand_and_collapse(page: Page, url: str) -> None:
    page.goto(url + "/")
    page.get_by_test_id("search-input").fill("safety_training")
    result = page.locator(f'[data-testid="search-result"][data-urn="{TRAINING}"]')
    expect(result).to_be_visible()
    found = [item.get_attribute("data-urn") for item in page.get_by_test_id("search-result").all()]
    assert found == [TRAINING, LATEST]  # assets only, shortest first

    result.click()
    expect(box(page, TRAINING)).to_have_attribute("data-level", "0")
    # the level /lineage returns at depth 1: the latest recent_reports joins user_profile too
    upstream = requests.get(
        f"{url}{API}/lineage", params={"node": TRAINING, "direction": "upstream", "depth": 1}, timeout=10
    ).json()
    assert {n["id"] for n in upstream["nodes"]} == {TRAINING, SAFETY_LOG, PROFILE}
    expect(box(page, PROFILE)).to_be_visible()
    idle(page)
    assert boxes(page) == {TRAINING: 0, SAFETY_LOG: -1, PROFILE: -1, LATEST: 1}
    expect(page.get_by_test_id("edge-count")).to_have_text("3")
    expect(page.get_by_test_id("details-urn")).to_have_text(TRAINING)

    # one more level upstream of safety_log_tbl: abuse_reports appears, and user_profile, which
    # feeds safety_log_tbl too, moves left of it so that every edge points right
    toggle(page, SAFETY_LOG, "upstream").click()
    expect(box(page, ABUSE)).to_be_visible()
    idle(page)
    assert boxes(page) == {TRAINING: 0, SAFETY_LOG: -1, PROFILE: -2, ABUSE: -2, LATEST: 1}
    expect(toggle(page, SAFETY_LOG, "upstream")).to_have_attribute("data-expanded", "true")
    expect(page.get_by_test_id("edge-count")).to_have_text("5")

    # collapse: what only safety_log_tbl reached goes; user_profile, read by the root, stays
    toggle(page, SAFETY_LOG, "upstream").click()
    expect(box(page, ABUSE)).to_have_count(0)
    assert boxes(page) == {TRAINING: 0, SAFETY_LOG: -1, PROFILE: -1, LATEST: 1}
    expect(page.get_by_test_id("edge-count")).to_have_text("3")


def test_as_of_shows_the_older_lineage_and_collapse_removes_what_only_it_reached(
    page: Page, url: str
) -> None:
    open_asset(page, url, TRAINING)
    page.get_by_test_id("filter-as-of").fill("2024-03-11")  # before recent_reports joined user_profile
    expect(box(page, PROFILE)).to_have_count(0)
    idle(page)
    assert boxes(page) == {TRAINING: 0, SAFETY_LOG: -1, LATEST: 1}
    # the details panel follows the date: the root's inputs then were safety_log_tbl alone
    inputs = page.get_by_test_id("details-inputs")
    expect(page.get_by_test_id("details")).to_contain_text("Inputs on 2024-03-11 (1)")
    expect(inputs).to_contain_text("safety_log_tbl")
    expect(inputs).not_to_contain_text("user_profile")

    toggle(page, SAFETY_LOG, "upstream").click()
    expect(box(page, ABUSE)).to_be_visible()
    expect(box(page, PROFILE)).to_be_visible()
    assert boxes(page) == {TRAINING: 0, SAFETY_LOG: -1, ABUSE: -2, PROFILE: -2, LATEST: 1}

    toggle(page, SAFETY_LOG, "upstream").click()
    expect(box(page, ABUSE)).to_have_count(0)
    expect(box(page, PROFILE)).to_have_count(0)

    page.locator("#as-of-clear").click()  # back to now
    expect(box(page, PROFILE)).to_have_attribute("data-level", "-1")
    expect(page.get_by_test_id("details")).to_contain_text("Inputs (2)")
    expect(inputs).to_contain_text("user_profile")


def test_the_asset_kind_filter_keeps_the_walk_to_the_kinds_ticked(page: Page, url: str) -> None:
    training, model = "hive.table/dating.dating_training_tbl", "ai.model/dating_ranking_model"
    open_asset(page, url, training)
    expect(box(page, model)).to_be_visible()  # the ranking model is trained on the table
    # the kinds offered are the graph's: tables, the ML configs' features and models, endpoints
    kinds = page.locator("#kinds input")
    expect(kinds).to_have_count(4)
    assert [k.get_attribute("value") for k in kinds.all()] == [
        "ai.feature",
        "ai.model",
        "hive.table",
        "web.endpoint",
    ]

    page.get_by_test_id("filter-ai.model").uncheck()
    expect(box(page, model)).to_have_count(0)
    expect(box(page, training)).to_be_visible()

    page.get_by_test_id("kinds-all").click()
    expect(box(page, model)).to_be_visible()


def test_why_lists_what_changed_upstream_in_the_window_before_the_as_of_day(page: Page, url: str) -> None:
    """On 2024-03-12 recent_reports began joining user_profile (the query log): the day before
    that date's end holds the job's new version and its new input, and nothing else."""
    open_asset(page, url, TRAINING)
    page.get_by_test_id("filter-as-of").fill("2024-03-12")
    expect(box(page, PROFILE)).to_be_visible()
    idle(page)
    page.get_by_test_id("why-window").select_option("1")
    page.get_by_test_id("why-button").click()
    causes = page.get_by_test_id("why-cause")
    expect(causes).to_have_count(2)
    assert [cause.get_attribute("data-kind") for cause in causes.all()] == ["process_changed", "input_added"]
    assert {cause.get_attribute("data-subject") for cause in causes.all()} == {
        "sql.job/safety.training_build"
    }
    expect(causes.nth(1)).to_contain_text(f"{TRAINING} now reads {PROFILE}")
    expect(page.get_by_test_id("why-summary")).to_have_text(re.compile(r"^2 changes over "))

    # the day before: the job ran as it always had (the window chosen stays chosen)
    page.get_by_test_id("filter-as-of").fill("2024-03-11")
    idle(page)
    expect(page.get_by_test_id("why-window")).to_have_value("1")
    page.get_by_test_id("why-button").click()
    expect(page.get_by_test_id("why-summary")).to_have_text(re.compile(r"^0 changes over "))
    expect(causes).to_have_count(0)

    # a stop of a route is a link to that node
    page.get_by_test_id("filter-as-of").fill("2024-03-12")
    idle(page)
    page.get_by_test_id("why-button").click()
    causes.nth(1).locator(f'[data-goto="{PROFILE}"]').click()
    expect(page.get_by_test_id("details-urn")).to_have_text(PROFILE)


def test_group_by_collapses_the_lineage_to_expandable_groups(page: Page, url: str) -> None:
    open_asset(page, url, PROFILE)
    grouped = requests.get(
        f"{url}{API}/lineage", params={"node": PROFILE, "direction": "both", "group_by": "kind"}, timeout=10
    ).json()
    assert len(grouped["groups"]) > 1  # hive tables, and the example's feature, model and endpoint
    page.get_by_test_id("group-by").select_option("kind")
    groups = page.get_by_test_id("group")
    expect(groups).to_have_count(len(grouped["groups"]))
    idle(page)
    shown = {g.get_attribute("data-group"): int(g.get_attribute("data-size") or 0) for g in groups.all()}
    assert shown == {g["id"]: len(g["members"]) for g in grouped["groups"]}
    edges = page.get_by_test_id("group-edge")
    expect(edges).to_have_count(len(grouped["edges"]))
    flows = {
        (
            e.get_attribute("data-source"),
            e.get_attribute("data-target"),
            int(e.get_attribute("data-flows") or 0),
        )
        for e in edges.all()
    }
    assert flows == {(e["source"], e["target"], e["flows"]) for e in grouped["edges"]}
    expect(page.get_by_test_id("node-count")).to_have_text(str(len(grouped["groups"])))

    # a group opens to its members; a member opens the tables view on it
    tables = page.locator('[data-testid="group"][data-group="kind:hive.table"]')
    tables.get_by_test_id("group-toggle").click()
    members = tables.get_by_test_id("group-member")
    hive = next(g for g in grouped["groups"] if g["id"] == "kind:hive.table")
    expect(members).to_have_count(min(len(hive["members"]), 30))
    page.locator(f'[data-testid="group-member"][data-urn="{TRAINING}"]').dispatch_event("click")
    expect(box(page, TRAINING)).to_have_attribute("data-level", "0")
    expect(page.get_by_test_id("group-by")).to_have_value("")
    expect(page.get_by_test_id("group")).to_have_count(0)


def test_columns_column_lineage_transformation_filter_and_screenshot(
    page: Page, url: str, tmp_path: Path
) -> None:
    open_asset(page, url, TRAINING)
    toggle(page, SAFETY_LOG, "upstream").click()
    expect(box(page, ABUSE)).to_be_visible()

    # a click on the box opens its columns and shows its details
    box(page, TRAINING).get_by_test_id("node-header").click()
    rows = box(page, TRAINING).get_by_test_id("field-row")
    expect(rows).to_have_count(5)
    assert {row.get_attribute("data-urn") for row in rows.all()} == {
        f"{TRAINING}#{column}"
        for column in ("target_user_id", "target_religion", "label", "report_count", "ds")
    }
    expect(page.get_by_test_id("details-inputs")).to_contain_text("safety_log_tbl")

    # a click on a column follows its lineage: edges row to row, the sources highlighted
    field_row(page, f"{TRAINING}#target_religion").click()
    religion = page.locator(
        f'[data-testid="field-edge"][data-source="{SAFETY_LOG}#religion"][data-target="{TRAINING}#target_religion"]'
    )
    expect(religion).to_have_count(2)  # GROUP_BY and IDENTITY
    expect(field_row(page, f"{SAFETY_LOG}#religion")).to_have_class(re.compile(r"\brelated\b"))
    expect(field_row(page, f"{TRAINING}#target_religion")).to_have_class(re.compile(r"\bselected\b"))
    filtered = page.locator(
        f'[data-testid="field-edge"][data-source="{SAFETY_LOG}#ds"][data-target="{TRAINING}#target_religion"]'
    )
    expect(filtered).to_have_attribute("data-transformation", "FILTER")
    expect(page.get_by_test_id("column-upstream")).to_contain_text("religion")
    idle(page)
    all_edges = int(page.get_by_test_id("field-edge-count").inner_text())
    assert all_edges == page.get_by_test_id("field-edge").count() > 10

    page.set_viewport_size({"width": 1920, "height": 1080})
    page.get_by_test_id("zoom-fit").click()
    shot = tmp_path / "ui-dating.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 20_000
    wanted = os.environ.get("TRACELAKE_UI_SCREENSHOT")
    if wanted:
        target = Path(wanted) if Path(wanted).is_absolute() else REPO / wanted
        target.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(target))
    page.set_viewport_size({"width": 1600, "height": 1000})

    # only IDENTITY flows: the FILTER and GROUP_BY edges go, the copy of religion stays
    page.get_by_test_id("transformations-none").click()
    expect(page.get_by_test_id("field-edge")).to_have_count(0)
    page.get_by_test_id("filter-IDENTITY").check()
    expect(religion).to_have_count(1)
    expect(religion).to_have_attribute("data-transformation", "IDENTITY")
    expect(filtered).to_have_count(0)
    idle(page)
    kept = [edge.get_attribute("data-transformation") for edge in page.get_by_test_id("field-edge").all()]
    assert 0 < len(kept) < all_edges and set(kept) == {"IDENTITY"}
    expect(page.get_by_test_id("edge-count")).to_have_text("5")  # table edges carry no transformation


def test_policy_violations_mark_the_path_and_a_server_without_policies_stays_quiet(
    page: Page, dating: Tracelake, url: str
) -> None:
    # the example's policies: religion (declared on user_profile.religion) must stay out of ads
    open_asset(page, url, SEGMENTS)
    expect(page.get_by_test_id("violations")).to_contain_text("religion-stays-out-of-ads")
    expect(box(page, SEGMENTS)).to_have_class(re.compile(r"\bviolation\b"))
    expect(box(page, PROFILE)).to_have_class(re.compile(r"\bviolation\b"))
    expect(page.get_by_test_id("details")).to_contain_text("Policy violations (1)")
    box(page, PROFILE).get_by_test_id("node-header").click()
    expect(field_row(page, f"{PROFILE}#religion")).to_have_class(re.compile(r"\bviolation\b"))
    expect(field_row(page, f"{PROFILE}#city")).not_to_have_class(re.compile(r"\bviolation\b"))
    expect(page.get_by_test_id("details-name")).to_have_text("dating.user_profile")
    field_row(page, f"{PROFILE}#religion").click()
    expect(page.get_by_test_id("details-labels")).to_have_text("religion")

    # no policy folder: the violations endpoint answers 404 and the UI carries on without marks
    with serve_in_thread(ui_app(dating)) as base:
        assert requests.get(f"{base}{API}/policies/violations", timeout=10).status_code == 404
        open_asset(page, base, SEGMENTS)
        expect(box(page, PROFILE)).to_be_visible()
        expect(page.get_by_test_id("violations")).to_be_hidden()
        expect(page.get_by_test_id("error")).to_be_hidden()
        assert page.locator("#graph .violation").count() == 0


def test_a_server_with_tokens_asks_for_one(page: Page, dating: Tracelake, tmp_path: Path) -> None:
    token_file = tmp_path / "tokens.yaml"
    token = new_token("ui", ["read"], token_file)
    with serve_in_thread(ui_app(dating, ApiSettings(token_file=token_file))) as base:
        page.goto(base + "/ui/")
        page.get_by_test_id("search-input").fill("safety_log")
        page.get_by_test_id("search-input").press("Enter")
        expect(page.get_by_test_id("token-dialog")).to_be_visible()
        page.get_by_test_id("token-input").fill(token)
        page.get_by_test_id("token-ok").click()
        expect(page.locator(f'[data-testid="search-result"][data-urn="{SAFETY_LOG}"]')).to_be_visible()
        page.locator(f'[data-testid="search-result"][data-urn="{SAFETY_LOG}"]').click()
        expect(box(page, ABUSE)).to_be_visible()  # later calls send the stored token
        expect(page.get_by_test_id("token-dialog")).to_be_hidden()


# ---------------------------------------------------------------- scale


def test_5000_downstream_tables_stay_responsive(page: Page, scale_url: str) -> None:
    page.goto(scale_url + "/ui/")
    page.get_by_test_id("search-input").fill("scale.hub")
    result = page.locator(f'[data-testid="search-result"][data-urn="{HUB}"]')
    expect(result).to_be_visible()

    started = time.monotonic()
    result.click()  # opens the hub: one level up (none) and one down (5,000 tables)
    more = page.get_by_test_id("more-group")
    expect(more).to_have_text(f"+{FANOUT - 50} more")
    opened = time.monotonic() - started
    assert opened < 2.0, f"opening the hub took {opened:.2f}s"
    expect(page.get_by_test_id("node-count")).to_have_text(str(FANOUT + 1))
    expect(page.get_by_test_id("edge-count")).to_have_text(str(FANOUT))

    level = page.locator('[data-testid="node"][data-level="1"]')
    assert level.count() == 50
    assert page.get_by_test_id("node").count() <= 60
    expect(box(page, "hive.table/scale.t0049")).to_be_visible()
    expect(box(page, "hive.table/scale.t0050")).to_have_count(0)
    assert page.locator("#graph *").count() < 2000  # the SVG holds the page, not the graph

    # collapse and expand the downstream side again: from the client's graph, at once
    hub_down = toggle(page, HUB, "downstream")
    hub_down.click()
    expect(level).to_have_count(0)
    started = time.monotonic()
    hub_down.click()
    expect(more).to_have_text(f"+{FANOUT - 50} more")
    expanded = time.monotonic() - started
    assert expanded < 2.0, f"expanding the hub took {expanded:.2f}s"
    assert level.count() == 50

    # the group pages through the rest
    started = time.monotonic()
    more.click()
    expect(box(page, "hive.table/scale.t0050")).to_be_visible()
    paged = time.monotonic() - started
    assert paged < 1.0, f"the next page took {paged:.2f}s"
    expect(box(page, "hive.table/scale.t0049")).to_have_count(0)
    expect(more).to_have_text(f"+{FANOUT - 100} more")
    expect(page.get_by_test_id("previous-group")).to_have_text("▲ 50 previous")
    assert level.count() == 50

    # the details panel lists the first 50 outputs, not 5,000
    expect(page.get_by_test_id("details-outputs").locator("li")).to_have_count(50)
