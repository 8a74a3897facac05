"""The Conversations page and the conversation view in a real browser, on the worker holding simulated
history (car-manual / gamma is multi-turn; from the onset most of its conversations end on a refusal)."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.conftest import SCREENSHOTS, DashboardSite
from tests.browser.pages import console_errors, open_view, wait_loaded


def test_conversations_worst_first_then_one_in_order_and_back_from_a_turn(
    site: DashboardSite, browser: Any
) -> None:
    open_view(browser, site.url + "?range=data&view=conversations", view="conversations")
    rows = browser.find_elements(By.CSS_SELECTOR, "#conversations-table tbody tr[data-conversation]")
    assert rows, browser.find_element(By.ID, "conversations-summary").text
    summary = browser.find_element(By.ID, "conversations-summary").text
    assert summary.startswith(f"{site.history.conversations()} closed conversations"), summary
    unresolved = [r.find_elements(By.TAG_NAME, "td")[4].text for r in rows]
    assert unresolved[0] == "yes" and unresolved == sorted(unresolved, reverse=True)  # worst first
    first = rows[0].get_attribute("data-conversation")
    rows[0].find_element(By.CSS_SELECTOR, "a.conversation-link").click()
    wait_loaded(browser, "conversation")
    assert first in browser.find_element(By.ID, "conversation-title").text
    turns = browser.find_elements(By.CSS_SELECTOR, "#conversation-body .turn-pair")
    assert 2 <= len(turns) <= 3
    assert [t.get_attribute("data-turn") for t in turns] == [str(n + 1) for n in range(len(turns))]
    highlighted = browser.find_elements(By.CSS_SELECTOR, "#conversation-body .turn-pair.unresolving")
    assert len(highlighted) == 1 and "left it unresolved" in highlighted[0].text
    assert "ended unresolved" in browser.find_element(By.ID, "conversation-body").text
    # each turn's statements and tool steps come from its interaction (api/interactions/{id}): every one read
    body = browser.find_element(By.ID, "conversation-body")
    assert "statements and tool steps not available" not in body.text
    # the reviewer labels the conversation's outcome; the view shows it
    browser.execute_script("localStorage.setItem('groundwatch_reviewer', 'browser-reviewer')")
    body.find_element(By.CSS_SELECTOR, "#conversation-label button.label-yes[data-kind='resolved']").click()
    WebDriverWait(browser, 30).until(
        lambda d: "browser-reviewer: resolved" in d.find_element(By.ID, "conversation-label").text
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "conversation.png"))
    # a turn's drill-down links back to its conversation (the view was drawn again with the label)
    highlighted = browser.find_elements(By.CSS_SELECTOR, "#conversation-body .turn-pair.unresolving")
    highlighted[0].find_element(By.CSS_SELECTOR, "a.interaction-link").click()
    wait_loaded(browser, "interaction")
    browser.find_element(By.CSS_SELECTOR, "#interaction-body a.conversation-link").click()
    wait_loaded(browser, "conversation")
    assert first in browser.find_element(By.ID, "conversation-title").text
    # a page from the second turn on (the view reads its turns a page at a time: URL parameter turn)
    open_view(browser, browser.current_url + "&turn=1", view="conversation")
    later = browser.find_elements(By.CSS_SELECTOR, "#conversation-body .turn-pair")
    assert [t.get_attribute("data-turn") for t in later] == [str(n + 2) for n in range(len(turns) - 1)]
    assert console_errors(browser) == []


def test_the_conversations_page_honours_the_slice_filter(site: DashboardSite, browser: Any) -> None:
    open_view(browser, site.url + "?range=data&view=conversations&slice=app:wiki-qa", view="conversations")
    assert "0 closed conversations" in browser.find_element(By.ID, "conversations-summary").text
    open_view(browser, site.url + "?range=data&view=conversations&slice=app:car-manual", view="conversations")
    rows = browser.find_elements(By.CSS_SELECTOR, "#conversations-table tbody tr[data-conversation]")
    assert rows and all("car-manual" in r.text for r in rows)
