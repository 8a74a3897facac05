"""The Documents and Compare pages in a real browser, on the worker holding simulated history."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlparse

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.browser.conftest import SCREENSHOTS, DashboardSite
from tests.browser.pages import console_errors, count_of, open_view, wait_loaded


def test_documents_page_ranks_documents_worst_first(site: DashboardSite, browser: Any) -> None:
    open_view(browser, site.url + "?range=data&view=documents", view="documents")
    rows = browser.find_elements(By.CSS_SELECTOR, "#documents-table tbody tr[data-document]")
    assert rows, browser.find_element(By.ID, "documents-summary").text
    cells = [r.find_elements(By.TAG_NAME, "td") for r in rows]
    retrieved = [count_of(c[1].text) for c in cells]
    judged = [count_of(c[2].text) for c in cells]
    assert sum(retrieved) > 0 and sum(judged) > 0  # the lexical judge recorded each statement's passage
    assert "document" in browser.find_element(By.ID, "documents-summary").text
    # the demo names each passage (groundwatch/demo_history.py): the worst are behind hallucinated answers
    records = [json.loads(line) for line in site.history.lines]
    behind_hallucinations = {
        c["document"] for r in records if (r.get("labels") or {}).get("grounded") == 0 for c in r["contexts"]
    }
    top = [r.get_attribute("data-document") for r in rows[:10]]
    assert len(top) == 10 and set(top) <= behind_hallucinations, top
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "documents.png"))
    assert console_errors(browser) == []


def test_compare_page_keeps_its_slices_in_the_address(site: DashboardSite, browser: Any) -> None:
    url = site.url + "?range=data&view=compare&a=app:wiki-qa&a=model:alpha&b=app:wiki-qa&b=model:beta"
    open_view(browser, url, view="compare")
    rows = {
        r.get_attribute("data-metric"): r
        for r in browser.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr")
    }
    assert "hallucination_rate" in rows and "interactions" in rows
    cells = rows["hallucination_rate"].find_elements(By.TAG_NAME, "td")
    assert cells[6].text == "fisher" and "…" in cells[4].text  # an interval and the alert code's test
    # beta drifts half-way through the history: its hallucination rate is significantly higher
    assert "worse" in (cells[3].get_attribute("class") or ""), [c.text for c in cells]
    assert rows["mean_context_entailment"].find_elements(By.TAG_NAME, "td")[6].text == "welch"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "compare.png"))
    # swap the sides with the form: the address follows, and the difference changes sign
    Select(browser.find_element(By.ID, "compare-a")).select_by_visible_text("wiki-qa / beta")
    Select(browser.find_element(By.ID, "compare-b")).select_by_visible_text("wiki-qa / alpha")
    browser.find_element(By.CSS_SELECTOR, "#compare-form button").click()
    wait_loaded(browser, "compare")
    query = parse_qs(urlparse(browser.current_url).query)
    assert query["a"] == ["app:wiki-qa", "model:beta"] and query["b"] == ["app:wiki-qa", "model:alpha"]
    row = browser.find_element(By.CSS_SELECTOR, "#compare-table tr[data-metric='hallucination_rate']")
    assert "better" in (row.find_elements(By.TAG_NAME, "td")[3].get_attribute("class") or "")
    # a link keeps the comparison: reloading the address shows the same sides
    browser.get(browser.current_url)
    wait_loaded(browser, "compare")
    assert Select(browser.find_element(By.ID, "compare-a")).first_selected_option.text == "wiki-qa / beta"
    assert console_errors(browser) == []


def test_the_drill_down_marks_the_supporting_passage(site: DashboardSite, browser: Any) -> None:
    since = site.history.start.isoformat().replace("+00:00", "Z")
    until = site.history.end.isoformat().replace("+00:00", "Z")
    browser.get(site.url + f"?view=bucket&bapp=wiki-qa&bmodel=alpha&bstart={since}&bend={until}")
    wait_loaded(browser, "bucket")
    ids = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#bucket-table a.interaction-link")]
    for interaction_id in reversed(ids[-20:]):  # the best of the bucket: grounded answers
        browser.get(site.url + f"?view=interaction&id={interaction_id}")
        wait_loaded(browser, "interaction")
        statements = browser.find_elements(
            By.CSS_SELECTOR,
            ".pair[data-pair='context_answer'] .statement[data-verdict='entailed']:not([data-passage=''])",
        )
        if statements:
            break
    assert statements, "no entailed statement with a passage among the bucket's best interactions"
    passage = statements[0].get_attribute("data-passage")
    target = browser.find_element(By.CSS_SELECTOR, f".passage[data-passage='{passage}']")
    assert "supporting" in (target.get_attribute("class") or "")
    assert f"passage {int(passage) + 1}" in statements[0].find_element(By.CSS_SELECTOR, ".meta").text
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('mouseenter'))", statements[0])
    assert "highlight" in (target.get_attribute("class") or "")
    browser.save_screenshot(str(SCREENSHOTS / "drill-down-passage.png"))
    assert console_errors(browser) == []


def test_compare_two_prompt_versions_of_one_app(site: DashboardSite, browser: Any) -> None:
    """The demo moves wiki-qa / beta to prompt v2 at the drift onset: v1 against v2 within wiki-qa, typed
    as dimension terms beside each side's app, counts exactly the interactions of each version, and v2's
    hallucination rate is significantly worse."""
    open_view(browser, site.url + "?range=data&view=compare", view="compare")
    for side, version in (("a", "v1"), ("b", "v2")):
        Select(browser.find_element(By.ID, f"compare-{side}")).select_by_visible_text("wiki-qa (every model)")
        where = browser.find_element(By.ID, f"compare-{side}-where")
        where.clear()
        where.send_keys(f"prompt_version:{version}")
    browser.find_element(By.CSS_SELECTOR, "#compare-form button").click()
    wait_loaded(browser, "compare")
    query = parse_qs(urlparse(browser.current_url).query)
    assert query["a"] == ["app:wiki-qa", "prompt_version:v1"]
    assert query["b"] == ["app:wiki-qa", "prompt_version:v2"]
    records = [json.loads(line) for line in site.history.lines]

    def count(version: str) -> int:
        return sum(
            1 for r in records
            if r["app"] == "wiki-qa" and (r.get("metadata") or {}).get("prompt_version") == version
        )  # fmt: skip

    rows = {
        r.get_attribute("data-metric"): r.find_elements(By.TAG_NAME, "td")
        for r in browser.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr")
    }
    # counts as the page formats them (Intl, en-US: 1,234)
    assert rows["interactions"][1].text == f"{count('v1'):,}"
    assert rows["interactions"][2].text == f"{count('v2'):,}"
    assert count("v2") > 0
    hallucination = rows["hallucination_rate"]
    assert hallucination[6].text == "fisher", [c.text for c in hallucination]
    assert "worse" in (hallucination[3].get_attribute("class") or ""), [c.text for c in hallucination]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "compare-prompt-versions.png"))
    # the address reopens the same sides, the dimension terms back in their fields
    browser.get(browser.current_url)
    wait_loaded(browser, "compare")
    assert browser.find_element(By.ID, "compare-b-where").get_attribute("value") == "prompt_version:v2"
    assert console_errors(browser) == []


def test_documents_honour_the_page_slice_filter(site: DashboardSite, browser: Any) -> None:
    open_view(browser, site.url + "?range=data&view=documents&slice=prompt_version:v2", view="documents")
    assert "prompt_version:v2" in browser.find_element(By.ID, "documents-summary").text
    rows = browser.find_elements(By.CSS_SELECTOR, "#documents-table tbody tr[data-document]")
    retrieved = sum(count_of(r.find_elements(By.TAG_NAME, "td")[1].text) for r in rows)
    records = [json.loads(line) for line in site.history.lines]
    v2 = [r for r in records if (r.get("metadata") or {}).get("prompt_version") == "v2"]
    # each v2 interaction retrieves its distinct named documents once
    expected = sum(len({c["document"] for c in r["contexts"] if c.get("text", "").strip()}) for r in v2)
    assert retrieved == expected > 0
    assert console_errors(browser) == []
