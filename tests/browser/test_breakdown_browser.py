"""The Breakdown panel in a real browser, on a worker holding the demo's simulated history: prompt v2
carries the drift, so "what changed" puts it first; clicking it filters the whole page, in the URL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlparse

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.conftest import SCREENSHOTS, DashboardSite
from tests.browser.pages import console_errors, open_view


def after_onset(site: DashboardSite) -> tuple[str, str]:
    assert site.history.onset is not None
    start = site.history.onset.replace(minute=0, second=0, microsecond=0)
    end = site.history.end + timedelta(hours=1)
    return start.strftime("%Y-%m-%dT%H:%M:%SZ"), end.strftime("%Y-%m-%dT%H:%M:%SZ")  # no '+' in the URL


def v2_lines(site: DashboardSite, start: str, end: str) -> list[dict[str, Any]]:
    lo, hi = datetime.fromisoformat(start), datetime.fromisoformat(end)
    rows = [json.loads(line) for line in site.history.lines]
    return [
        r for r in rows
        if (r.get("metadata") or {}).get("prompt_version") == "v2"
        and lo <= datetime.fromisoformat(r["timestamp"]) < hi
    ]  # fmt: skip


def test_what_changed_puts_v2_first_and_a_click_filters_the_page(site: DashboardSite, browser: Any) -> None:
    start, end = after_onset(site)
    open_view(browser, site.url + f"?range=custom&start={start}&end={end}&bd_dim=prompt_version")
    WebDriverWait(browser, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#changes-table tr.change-row")
    )
    first = browser.find_elements(By.CSS_SELECTOR, "#changes-table tr.change-row")[0]
    assert first.get_attribute("data-slice") == "v2"
    changes = browser.execute_script("return window.groundwatch.changes")
    assert changes["contributions"][0]["value"] == "v2" and changes["change"] > 0
    breakdown = {
        r.get_attribute("data-slice"): r.text for r in browser.find_elements(By.CSS_SELECTOR, "tr.slice-row")
    }
    assert {"v1", "v2"} <= set(breakdown) and "[" in breakdown["v2"]  # with its Wilson interval
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    panel = browser.find_element(By.ID, "breakdown")
    browser.execute_script("arguments[0].scrollIntoView()", panel)  # an element shot is cut at the viewport
    panel.screenshot(str(SCREENSHOTS / "breakdown_panel.png"))
    first.click()
    WebDriverWait(browser, 30).until(
        lambda d: (
            d.find_elements(By.ID, "slice-chip")
            and d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == "overview"
            and not d.execute_script("return window.groundwatch.loading")
        )
    )
    query = parse_qs(urlparse(browser.current_url).query)
    assert query["slice"] == ["prompt_version:v2"]
    overview = browser.execute_script("return window.groundwatch.overview")
    assert [(s["app"], s["model"]) for s in overview["series"]] == [("wiki-qa", "beta")]
    shown = sum(sum(v or 0 for v in s["values"]["interactions"]) for s in overview["series"])
    assert shown == len(v2_lines(site, start, end)) > 0
    # the slice's own alerts mark its charts
    assert overview["alerts"] and {a["slice"] for a in overview["alerts"]} == {"prompt_version=v2"}
    # within the slice, the Breakdown goes on by another dimension (by its own it would show v2 alone)
    assert "bd_dim" not in query
    assert browser.find_element(By.ID, "bd-dim").get_attribute("value") == "retriever"
    assert {
        r.get_attribute("data-slice") for r in browser.find_elements(By.CSS_SELECTOR, "tr.slice-row")
    } <= {"bm25", "dense", "(none)"}
    # a point of a chart opens the bucket's interactions of the slice only
    series = overview["series"][0]
    busiest = max(range(len(series["t"])), key=lambda i: series["values"]["interactions"][i] or 0)
    t = series["t"][busiest]
    bucket = browser.execute_script(
        "const s = arguments[0]; const q = new URLSearchParams({app: 'wiki-qa', model: 'beta', "
        "start: new Date(s * 1000).toISOString(), end: new Date((s + arguments[1]) * 1000).toISOString(), "
        "slice: 'prompt_version:v2', limit: '1000'}); return fetch('api/bucket?' + q).then((r) => r.json())",
        t, overview["step_seconds"],
    )  # fmt: skip
    assert bucket["total"] == series["values"]["interactions"][busiest] > 0
    filtered_url = browser.current_url
    # the bucket page as a click on that point opens it (overview.js openPoint keeps ?slice=)
    stamp = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    stop = datetime.fromtimestamp(t + overview["step_seconds"], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    open_view(
        browser,
        f"{filtered_url}&view=bucket&bapp=wiki-qa&bmodel=beta&bstart={stamp}&bend={stop}",
        view="bucket",
    )
    assert "[prompt_version:v2]" in browser.find_element(By.ID, "bucket-title").text
    assert browser.find_element(By.ID, "bucket-summary").text.startswith(
        f"{bucket['total']} interactions of the slice prompt_version:v2"
    )
    assert len(browser.find_elements(By.CSS_SELECTOR, "#bucket-table tbody tr")) == bucket["total"]
    # a reload of the address shows the same filtered page
    open_view(browser, filtered_url)
    assert browser.find_element(By.ID, "slice-chip").text.startswith(
        "Whole page filtered to prompt_version:v2"
    )
    # an address written as slice=DIMENSION=VALUE (before the filter took key:value terms) still opens it
    open_view(browser, site.url + f"?range=custom&start={start}&end={end}&slice=prompt_version=v2")
    assert parse_qs(urlparse(browser.current_url).query)["slice"] == ["prompt_version:v2"]
    assert browser.find_element(By.ID, "slice-chip").text.startswith(
        "Whole page filtered to prompt_version:v2"
    )
    browser.find_element(By.ID, "slice-clear").click()
    WebDriverWait(browser, 30).until(
        lambda d: "slice=" not in d.current_url and not d.find_elements(By.ID, "slice-chip")
    )
    assert console_errors(browser) == []


def test_the_demo_slice_rule_fires_on_prompt_v2(site: DashboardSite, browser: Any) -> None:
    open_view(browser, site.url + "?view=alerts&range=data", view="alerts")
    start = (site.history.start - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    end = (site.history.end + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    alerts = browser.execute_script(
        f"return fetch('api/alerts?start={start}&end={end}').then((r) => r.json())"
    )
    assert isinstance(alerts, list), alerts
    sliced = [
        a for a in alerts if a["rule"] == "hallucination-rate-high-by-prompt" and a["state"] == "firing"
    ]
    assert sliced and {a["slice"] for a in sliced} == {"prompt_version=v2"}
    assert all("[prompt_version=v2]" in a["message"] for a in sliced)
