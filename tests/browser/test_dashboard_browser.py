"""The dashboard in a real browser, on a worker holding simulated history with a drift."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from schemas.metrics import METRICS
from tests.browser.conftest import CONVERSATION_ID, MIN_PER_CLASS, WINDOW_SECONDS, DashboardSite
from tests.browser.pages import console_errors, count_of, open_view, wait_loaded


def hours(site: DashboardSite, app: str | None = None, model: str | None = None) -> set[int]:
    """The windows holding interactions (of one app/model when given), as Unix seconds."""
    out = set()
    for line in site.history.lines:
        r = json.loads(line)
        if (app is None or r["app"] == app) and (model is None or r["model"] == model):
            stamp = datetime.fromisoformat(r["timestamp"]).timestamp()
            out.add(int(stamp // WINDOW_SECONDS) * WINDOW_SECONDS)
    return out


def points(driver: Any, chart: str) -> int:
    return int(driver.find_element(By.ID, f"chart-{chart}").get_attribute("data-points"))


def test_the_overview_charts_every_metric_the_api_serves(site: DashboardSite, browser: Any) -> None:
    """The charts come from /api/options (the metric catalogue), not from a list of the page's own."""
    open_view(browser, site.url + "?range=data")
    served = browser.execute_script("return window.groundwatch.options.metrics.map((m) => m.name)")
    assert served == [m.name for m in METRICS]
    ids = browser.execute_script(
        "return [...document.querySelectorAll('#charts .chart')].map((c) => c.id.slice('chart-'.length))"
    )
    assert sorted(ids) == sorted([*served, "latency", "dead_letters"])
    titles = {
        m.name: browser.find_element(By.CSS_SELECTOR, f"#chart-{m.name} h3").get_attribute("textContent")
        for m in METRICS
    }
    assert all(m.label in titles[m.name] for m in METRICS), titles
    # what this selection has no data for is folded under the charts drawn, each saying why
    folded = browser.execute_script(
        "return [...document.querySelectorAll('#charts-empty .chart')].map((c) => c.id.slice(6))"
    )
    drawn = browser.execute_script("return Object.keys(window.groundwatch.charts)")
    assert folded and not set(folded) & set(drawn) and set(folded) | set(drawn) == set(ids)
    assert ids[: len(drawn)] == [i for i in ids if i in drawn]  # the drawn ones first
    assert browser.find_element(By.ID, "charts-empty").get_attribute("open") is None


def test_overview_draws_every_window_of_every_series(site: DashboardSite, browser: Any) -> None:
    open_view(browser, site.url + "?range=data")
    assert points(browser, "hallucination_rate") == len(hours(site))
    assert points(browser, "interactions") == len(hours(site))
    drawn = browser.execute_script("return Object.keys(window.groundwatch.charts)")
    assert {"hallucination_rate", "answer_refusal_rate", "mean_context_entailment", "judge_tokens"} <= set(
        drawn
    )
    legend = browser.find_element(By.ID, "legend").text
    assert "wiki-qa / beta" in legend and "car-manual / gamma" in legend
    assert console_errors(browser) == []


def test_alert_marker_sits_at_the_drift_onset(site: DashboardSite, browser: Any) -> None:
    open_view(browser, site.url + "?range=data&app=wiki-qa&model=beta")
    assert points(browser, "hallucination_rate") == len(hours(site, "wiki-qa", "beta"))
    markers = browser.find_elements(By.CSS_SELECTOR, "#chart-hallucination_rate .alert-marker")
    assert markers, "no alert marker on the hallucination chart"
    assert {m.get_attribute("data-model") for m in markers} == {"beta"}
    first = min(int(m.get_attribute("data-t")) for m in markers)
    onset = site.history.onset.timestamp()
    assert onset < first <= onset + timedelta(hours=12).total_seconds(), (first, onset)
    assert console_errors(browser) == []


def test_range_selector_changes_the_data(site: DashboardSite, browser: Any) -> None:
    open_view(browser, site.url + "?range=data")
    before = points(browser, "interactions")
    browser.find_element(By.CSS_SELECTOR, "#ranges button[data-range='24h']").click()
    wait_loaded(browser, "overview")
    WebDriverWait(browser, 30).until(lambda d: "range=24h" in d.current_url)
    after = points(browser, "interactions")
    assert 0 < after <= 25 < before
    overview = browser.execute_script("return window.groundwatch.overview")
    span = datetime.fromisoformat(overview["end"]) - datetime.fromisoformat(overview["start"])
    assert span == timedelta(hours=24)
    assert console_errors(browser) == []


def test_drill_down_shows_statements_with_verdict_and_reason(site: DashboardSite, browser: Any) -> None:
    open_view(browser, site.url + "?range=data&app=wiki-qa&model=beta")
    # the highest hallucination rate on the chart: click that point
    x, y = browser.execute_script(
        """
        const c = window.groundwatch.charts["hallucination_rate"];
        const values = c.plot.data[3];  // [time, lower, upper, value]
        let best = -1;
        values.forEach((v, i) => { if (v !== null && (best < 0 || v > values[best])) best = i; });
        return [c.plot.valToPos(c.plot.data[0][best], "x"), c.plot.valToPos(values[best], "y")];
        """
    )
    over = browser.find_element(By.CSS_SELECTOR, "#chart-hallucination_rate .u-over")
    size = over.size
    y = min(max(y, 3), size["height"] - 3)  # a point on the plot's edge: click just inside it
    ActionChains(browser).move_to_element_with_offset(
        over, int(x - size["width"] / 2), int(y - size["height"] / 2)
    ).pause(0.3).click().perform()
    wait_loaded(browser, "bucket")
    rows = browser.find_elements(By.CSS_SELECTOR, "#bucket-table tbody tr")
    assert rows and "bad" in (rows[0].get_attribute("class") or "")  # worst (hallucinated) first
    rows[0].find_element(By.CSS_SELECTOR, "a.interaction-link").click()
    wait_loaded(browser, "interaction")
    body = browser.find_element(By.ID, "interaction-body")
    assert "Question" in body.text and "Answer" in body.text
    # a hallucinated answer's statements can each be partly supported (entailed at >= 0.5, the answer
    # under the threshold): among the worst interactions since the drift began, open those with an
    # unsupported statement
    since = site.history.onset.isoformat().replace("+00:00", "Z")
    until = site.history.end.isoformat().replace("+00:00", "Z")
    browser.get(site.url + f"?view=bucket&bapp=wiki-qa&bmodel=beta&bstart={since}&bend={until}")
    wait_loaded(browser, "bucket")
    ids = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#bucket-table a.interaction-link")]
    flagged = []
    for interaction_id in ids[:30]:
        browser.get(site.url + f"?view=interaction&id={interaction_id}")
        wait_loaded(browser, "interaction")
        selector = ".pair[data-pair='context_answer'] .statement:not([data-verdict='entailed'])"
        flagged = browser.find_elements(By.CSS_SELECTOR, f"#interaction-body {selector}")
        if flagged:
            break
    assert flagged, "no unsupported statement highlighted among the bucket's worst interactions"
    meta = flagged[0].find_element(By.CSS_SELECTOR, ".meta").text
    verdict = flagged[0].get_attribute("data-verdict")
    assert verdict in ("not_stated", "contradicted") and meta.startswith(verdict.replace("_", " "))
    assert "support" in meta and len(meta.split(" · ")) >= 3, meta  # verdict · support · tag/reason
    assert console_errors(browser) == []


def test_alerts_page_lists_the_drift_alert(site: DashboardSite, browser: Any) -> None:
    open_view(browser, site.url + "?range=data&view=alerts", view="alerts")
    rows = browser.find_elements(By.CSS_SELECTOR, "#alerts-table tbody tr")
    text = "\n".join(r.text for r in rows)
    assert "hallucination-rate-high" in text and "wiki-qa / beta" in text and "> 0.25" in text
    # each alert's window in UTC as Intl.DateTimeFormat.formatRange writes it (en-US, the day once)
    query = urllib.parse.urlencode(
        {
            "start": (site.history.start - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "end": (site.history.end + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )
    with urllib.request.urlopen(f"{site.url}api/alerts?{query}", timeout=30) as response:
        alerts = json.load(response)
    windows = {r.find_elements(By.TAG_NAME, "td")[9].text for r in rows}
    assert alerts and windows == {utc_range(a["window_start"], a["window_end"]) for a in alerts}
    assert console_errors(browser) == []


def utc_range(start: str, end: str) -> str:
    a, b = (datetime.fromisoformat(t.replace("Z", "+00:00")).astimezone(UTC) for t in (start, end))
    day = "{:%b} {}, {:%Y}"
    if a.date() == b.date():
        return f"{day.format(a, a.day, a)}, {a:%H:%M} – {b:%H:%M} UTC"
    return f"{day.format(a, a.day, a)}, {a:%H:%M} – {day.format(b, b.day, b)}, {b:%H:%M} UTC"


def test_a_conversation_shows_its_earlier_turns_above_the_question(site: DashboardSite, browser: Any) -> None:
    browser.get(site.url + f"?view=interaction&id={CONVERSATION_ID}")
    wait_loaded(browser, "interaction")
    panel = browser.find_element(By.CSS_SELECTOR, "#interaction-body .panel.conversation")
    assert panel.get_attribute("data-turns") == "3"
    roles = [t.get_attribute("data-role") for t in panel.find_elements(By.CSS_SELECTOR, ".turn")]
    assert roles == ["system", "user", "assistant"]
    assert "The RT-400 has four ports." in panel.text
    panels = browser.find_elements(By.CSS_SELECTOR, "#interaction-body > .panel")
    titled = [(p, [h.text for h in p.find_elements(By.TAG_NAME, "h3")]) for p in panels]
    question = next(p for p, titles in titled if titles[:1] == ["Question"])
    assert "And how much does it cost?" in question.text  # the last user turn is the question
    assert panels.index(panel) < panels.index(question)
    assert console_errors(browser) == []


def test_a_tool_agents_drill_down_shows_its_steps_and_the_tool_result_behind_each_statement(
    site: DashboardSite, browser: Any
) -> None:
    agent = [json.loads(line) for line in site.history.lines if '"support-agent"' in line]
    with_docs = next(r for r in agent if json.loads(r["messages"][3]["content"]))
    empty = next(r for r in agent if r["messages"][3]["content"] == "[]")
    browser.get(site.url + f"?view=interaction&id={with_docs['id']}")
    wait_loaded(browser, "interaction")
    steps = browser.find_element(By.CSS_SELECTOR, "#interaction-body .panel.steps")
    [step] = steps.find_elements(By.CSS_SELECTOR, ".step")
    assert step.get_attribute("data-status") == "ok" and "search_kb" in step.text and "query" in step.text
    panels = browser.find_elements(By.CSS_SELECTOR, "#interaction-body > .panel")
    pair = browser.find_element(By.CSS_SELECTOR, "#interaction-body .pair[data-pair='context_answer']")
    assert panels.index(steps) < panels.index(pair)  # the steps above the statements
    named = [s.text for s in pair.find_elements(By.CSS_SELECTOR, ".statement[data-passage] .meta")]
    named = [m for m in named if "search_kb result, call call_delta_" in m]
    assert named, "no statement names the search_kb result it was judged against"
    tool_passages = browser.find_elements(By.CSS_SELECTOR, "#interaction-body .passage.tool-passage")
    assert tool_passages and "search_kb" in tool_passages[0].text
    # the broken index: no evidence, and the drill-down says so
    browser.get(site.url + f"?view=interaction&id={empty['id']}")
    wait_loaded(browser, "interaction")
    body = browser.find_element(By.ID, "interaction-body")
    assert "no result" not in body.find_element(By.CSS_SELECTOR, ".step").text  # the result is "[]"
    badges = [b.text for b in body.find_elements(By.CSS_SELECTOR, ".badge[data-outcome]")]
    assert badges == ["answered without evidence"] or "refusal: yes" in body.text
    assert console_errors(browser) == []


def test_labeling_three_interactions_updates_the_judge_quality_page(
    site: DashboardSite, browser: Any
) -> None:
    records = [json.loads(line) for line in site.history.lines]
    chosen = [r["id"] for r in records if r["app"] == "wiki-qa" and r["model"] == "alpha"][:3]
    open_view(browser, site.url + "?range=data&view=quality", "quality")
    browser.execute_script("localStorage.setItem('groundwatch_reviewer', 'browser-reviewer')")
    for iid in chosen:
        open_view(browser, site.url + f"?range=data&view=interaction&id={iid}", "interaction")
        browser.find_element(By.TAG_NAME, "body").send_keys("h")  # the key for "hallucinated"
        WebDriverWait(browser, 30).until(
            lambda d: "browser-reviewer: hallucinated" in d.find_element(By.ID, "label-panel").text
        )
    # a click on a button labels too
    browser.find_element(By.CSS_SELECTOR, "button.label-yes[data-kind='answer_refusal']").click()
    WebDriverWait(browser, 30).until(
        lambda d: "browser-reviewer: refusal" in d.find_element(By.ID, "label-panel").text
    )
    open_view(browser, site.url + "?range=data&view=quality&app=wiki-qa", "quality")
    row = browser.find_element(
        By.CSS_SELECTOR, "#quality-table tr[data-series='wiki-qa / alpha'][data-kind='grounded']"
    )
    cells = row.find_elements(By.TAG_NAME, "td")
    assert cells[2].text == "3"  # labels
    assert "needed" in cells[-1].text  # three labels of one class: too few to correct the rate
    # the checks' health table: this site runs none of its own, so the judge's stages only
    health = browser.find_element(By.ID, "quality-evaluators")
    kinds = {r.get_attribute("data-kind") for r in health.find_elements(By.CSS_SELECTOR, "tbody tr")}
    assert kinds == {"built-in"} and "nli (the judge's stage)" in health.text
    assert console_errors(browser) == []


def _api(site: DashboardSite, path: str, body: dict[str, Any] | None = None, **query: str) -> Any:
    url = site.url + "api/" + path + ("?" + urllib.parse.urlencode(query) if query else "")
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_the_corrected_rate_is_drawn_beside_the_flagged_rate_once_labels_allow(
    site: DashboardSite, browser: Any
) -> None:
    options = _api(site, "options")
    [beta] = [s for s in options["series"] if (s["app"], s["model"]) == ("wiki-qa", "beta")]
    bucket = _api(
        site, "bucket", app="wiki-qa", model="beta", start=beta["first"], end=beta["last"], limit="1000"
    )
    judged = [r for r in bucket["interactions"] if r["hallucination"] is not None]
    flagged = [r["interaction_id"] for r in judged if r["hallucination"]][: MIN_PER_CLASS + 2]
    passed = [r["interaction_id"] for r in judged if not r["hallucination"]][: MIN_PER_CLASS + 2]
    assert len(flagged) > MIN_PER_CLASS and len(passed) > MIN_PER_CLASS
    # a reviewer agrees with the judge but for one missed hallucination and one false alarm
    said = {iid: 0 for iid in flagged[1:]} | {flagged[0]: 1} | {iid: 1 for iid in passed[1:]} | {passed[0]: 0}
    for iid, value in said.items():
        _api(site, "labels", {"interaction_id": iid, "kind": "grounded", "value": value, "reviewer": "corr"})
    open_view(browser, site.url + "?range=data")
    labels = browser.execute_script(
        "return window.groundwatch.charts.hallucination_rate.labels.map((l) => l.label)"
    )
    assert {"wiki-qa / beta corrected", "wiki-qa / beta corrected lower"} <= set(labels)
    assert not any(label.startswith("open-qa") and "corrected" in label for label in labels)
    notes = {
        n.get_attribute("data-series"): n
        for n in browser.find_elements(By.CSS_SELECTOR, "#chart-hallucination_rate .corrected-note")
    }
    assert notes["wiki-qa / beta"].get_attribute("data-status") == "ok"
    assert "corrected" in notes["wiki-qa / beta"].text
    unlabeled = notes["open-qa / alpha"]
    assert unlabeled.get_attribute("data-status") == "too_few_labels"
    assert f"{MIN_PER_CLASS} of each are needed" in unlabeled.text
    drawn = browser.execute_script(
        "const c = window.groundwatch.charts.hallucination_rate;"
        "const i = c.labels.findIndex((l) => l.label === 'wiki-qa / beta corrected');"
        "return c.plot.data[i + 1].filter((v) => v !== null).length"
    )
    assert drawn > 0
    assert console_errors(browser) == []


def test_the_drill_down_exports_its_interactions_as_eval_jsonl(site: DashboardSite, browser: Any) -> None:
    since = site.history.onset.isoformat().replace("+00:00", "Z")
    until = site.history.end.isoformat().replace("+00:00", "Z")
    browser.get(site.url + f"?view=bucket&bapp=wiki-qa&bmodel=beta&bstart={since}&bend={until}")
    wait_loaded(browser, "bucket")
    link = browser.find_element(By.ID, "bucket-export")
    assert link.text == "export these interactions (eval JSONL)"
    href = link.get_attribute("href")
    assert href.startswith(site.url + "api/export?") and "app=wiki-qa" in href and "model=beta" in href
    total = count_of(browser.find_element(By.ID, "bucket-summary").text.split()[0])
    with urllib.request.urlopen(href, timeout=30) as response:
        assert "attachment" in response.headers["Content-Disposition"]
        lines = [json.loads(line) for line in response.read().decode().splitlines()]
    assert len(lines) == total > 0
    assert {(line["app"], line["model"]) for line in lines} == {("wiki-qa", "beta")}
    assert all(line["question"] and line["answer"] for line in lines)
    assert console_errors(browser) == []
