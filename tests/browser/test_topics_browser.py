"""The Topics page in a real browser, on the worker holding simulated history with topics assigned: from
the subject outage on, wiki-qa / alpha refuses most questions about music (groundwatch/demo_history.py),
so over the range after it the refusal rate of the topic holding them rose against the period before."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlparse

from selenium.webdriver.common.by import By

from groundwatch.demo_history import SUBJECT
from tests.browser.conftest import SCREENSHOTS, DashboardSite
from tests.browser.pages import console_errors, count_of, open_view, wait_loaded

REFUSAL_COLUMN = 5  # topic, status, interactions, share, hallucination, refusal, ...


def test_topics_page_marks_the_topic_whose_refusals_rose_and_filters_to_it(
    site: DashboardSite, browser: Any
) -> None:
    outage, end = site.history.subject_outage, site.history.end
    assert outage is not None
    url = (
        f"{site.url}?view=topics&range=custom&start={outage:%Y-%m-%dT%H:%M:%SZ}&end={end:%Y-%m-%dT%H:%M:%SZ}"
        "&app=wiki-qa&model=alpha"
    )
    open_view(browser, url, view="topics")
    rows = browser.find_elements(By.CSS_SELECTOR, "#topics-table tbody tr[data-topic]")
    assert rows, browser.find_element(By.ID, "topics-summary").text
    risen = [r for r in rows if "▲" in r.find_elements(By.TAG_NAME, "td")[REFUSAL_COLUMN].text]
    assert risen, [r.text for r in rows]
    # only music questions are refused: each topic whose refusals rose shows refused music questions
    # worst first, and the one named by music words is among them (others may hold a few music questions)
    for row in risen:
        examples = [a.text for a in row.find_elements(By.CSS_SELECTOR, "ol.examples a")]
        assert examples and SUBJECT.search(examples[0]), examples
        assert "refused" in row.find_element(By.CSS_SELECTOR, "ol.examples li").text
    topics = [r.get_attribute("data-topic") or "" for r in risen]
    assert any(re.search(r"\b(album|song|band|music)\b", t) for t in topics), topics
    assert len(risen) < len(rows) / 2, topics  # the failure is one subject's, not the app's
    assert sum(count_of(r.find_elements(By.TAG_NAME, "td")[2].text) for r in rows) > 0
    assert risen[0].find_elements(By.CSS_SELECTOR, "svg.sparkline polyline")
    assert "v1" in risen[0].text  # the topic model version that assigned it
    topic = topics[0]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "topics.png"))
    risen[0].find_elements(By.TAG_NAME, "td")[0].click()  # the whole page filtered to the topic
    wait_loaded(browser, "overview")
    assert parse_qs(urlparse(browser.current_url).query)["slice"] == [f"topic:{topic}"]
    assert topic in browser.find_element(By.ID, "slice-chip").text
    assert console_errors(browser) == []


def test_topics_over_all_data_compare_its_second_half_with_its_first(
    site: DashboardSite, browser: Any
) -> None:
    """All data has nothing before it: the page compares the range's halves (the outage falls in the
    second), as the Breakdown does, so the music topics' refusals rose there too."""
    open_view(browser, f"{site.url}?view=topics&range=data&app=wiki-qa&model=alpha", view="topics")
    summary = browser.find_element(By.ID, "topics-summary").text
    rows = browser.find_elements(By.CSS_SELECTOR, "#topics-table tbody tr[data-topic]")
    risen = [
        r.get_attribute("data-topic") or ""
        for r in rows
        if "▲" in r.find_elements(By.TAG_NAME, "td")[REFUSAL_COLUMN].text
    ]
    assert any(re.search(r"\b(album|song|band|music)\b", t) for t in risen), (summary, risen)
    assert all(r.get_attribute("data-topic") for r in rows) and " against " in summary
    assert console_errors(browser) == []
