"""Citations in a real browser, on the worker holding simulated history: the demo's policy-qa / epsilon
answers citing its own passage until its citation renderer goes off by one (groundwatch/demo_history.py);
the drill-down marks each statement's citation by whether the cited passage supports it, and the
Documents page orders its documents by their miscitations."""

from __future__ import annotations

import json
import re
from datetime import datetime
from itertools import pairwise
from typing import Any

from selenium.webdriver.common.by import By

from tests.browser.conftest import SCREENSHOTS, DashboardSite
from tests.browser.pages import console_errors, count_of, open_view, wait_loaded


def citing(site: DashboardSite, *, after_bug: bool) -> list[dict[str, Any]]:
    """The citing app's grounded interactions before (or from) its citation bug."""
    assert site.history.citing is not None and site.history.citation_bug is not None
    app, model = site.history.citing
    out = []
    for line in site.history.lines:
        r = json.loads(line)
        if (r["app"], r["model"]) != (app, model) or (r.get("labels") or {}).get("grounded") != 1:
            continue
        if (datetime.fromisoformat(r["timestamp"]) >= site.history.citation_bug) == after_bug:
            out.append(r)
    return out


def chips(browser: Any, record: dict[str, Any], site: DashboardSite) -> list[Any]:
    open_view(browser, site.url + f"?view=interaction&id={record['id']}", view="interaction")
    wait_loaded(browser, "interaction")
    return browser.find_elements(By.CSS_SELECTOR, ".pair[data-pair='context_answer'] .statement .cite")


def cited_number(record: dict[str, Any]) -> int:
    match = re.search(r"\[(\d+)\]$", record["answer"])
    assert match, record["answer"]
    return int(match.group(1))


def test_the_drill_down_marks_a_citation_to_the_wrong_passage(site: DashboardSite, browser: Any) -> None:
    # from the bug on, the answer cites the passage after its own: that passage does not support it
    for record in citing(site, after_bug=True)[-10:]:
        found = chips(browser, record, site)
        if any(c.get_attribute("data-cite") == "imprecise" for c in found):
            break
    else:
        raise AssertionError("no miscited statement among the last 10 interactions after the citation bug")
    number = cited_number(record)
    wrong = next(c for c in found if c.get_attribute("data-cite") == "imprecise")
    # the passage number as written, its document and the words: not colour alone
    assert f"[{number}]" in wrong.text and "does not support it" in wrong.text and "✗" in wrong.text
    assert record["contexts"][number - 1]["document"] in wrong.text
    passage = browser.find_element(By.CSS_SELECTOR, f".passage[data-passage='{number - 1}']")
    assert "miscited" in (passage.get_attribute("class") or "")
    assert "cited for a statement it does not support" in passage.text
    badges = browser.find_element(By.ID, "interaction-body").text
    assert "miscited: yes" in badges and "hallucination: no" in badges
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "drill-down-miscited.png"))
    assert console_errors(browser) == []


def test_the_drill_down_marks_a_citation_to_the_right_passage(site: DashboardSite, browser: Any) -> None:
    for record in citing(site, after_bug=False)[:10]:
        found = chips(browser, record, site)
        if found and all(c.get_attribute("data-cite") == "precise" for c in found):
            break
    else:
        raise AssertionError("no precisely cited statement among the first 10 interactions before the bug")
    assert f"[{cited_number(record)}]" in found[0].text and "supports it" in found[0].text
    assert not browser.find_elements(By.CSS_SELECTOR, ".passage.miscited")
    assert "miscited: no" in browser.find_element(By.ID, "interaction-body").text
    assert console_errors(browser) == []


def test_documents_order_by_their_miscitations(site: DashboardSite, browser: Any) -> None:
    open_view(browser, site.url + "?range=data&view=documents", view="documents")
    table = browser.find_element(By.ID, "documents-table")
    labels = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    column = next(i for i, label in enumerate(labels) if label.startswith("miscited"))

    def miscited() -> list[int]:
        rows = table.find_elements(By.CSS_SELECTOR, "tbody tr[data-document]")
        return [count_of(r.find_elements(By.TAG_NAME, "td")[column].text) for r in rows]

    header = table.find_elements(By.CSS_SELECTOR, "thead th")[column]
    assert header.get_attribute("aria-sort") == "none"
    header.find_element(By.TAG_NAME, "button").click()
    most_first = miscited()
    assert most_first == sorted(most_first, reverse=True) and most_first[0] > 0
    header = table.find_elements(By.CSS_SELECTOR, "thead th")[column]
    assert header.get_attribute("aria-sort") == "descending"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "documents-by-miscited.png"))
    header.find_element(By.TAG_NAME, "button").click()
    assert miscited() == sorted(most_first)
    assert table.find_elements(By.CSS_SELECTOR, "thead th")[column].get_attribute("aria-sort") == "ascending"
    assert console_errors(browser) == []


def test_alert_labels_on_a_chart_never_cover_each_other(site: DashboardSite, browser: Any) -> None:
    """Every app's alerts on one chart: a label reading leftwards from a later marker does not hide an
    earlier alert's label (a label that would is left out; its marker keeps the rule as its tooltip)."""
    open_view(browser, site.url + "?range=data")
    for chart in ("hallucination_rate", "answer_refusal_rate", "miscited_rate"):
        markers = browser.find_elements(By.CSS_SELECTOR, f"#chart-{chart} .alert-marker")
        assert markers and all(m.get_attribute("title") for m in markers)
        boxes = sorted(
            (s.rect["x"], s.rect["x"] + s.rect["width"])
            for s in browser.find_elements(By.CSS_SELECTOR, f"#chart-{chart} .alert-marker span")
        )
        assert boxes, chart
        assert all(left >= right for (_, right), (left, _) in pairwise(boxes)), boxes
    assert console_errors(browser) == []
