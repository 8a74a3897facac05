"""The dashboard's pages in the browser: ``open_view`` loads a page and waits until it says which view
it loaded, ``wait_loaded`` until a view is loaded and nothing is loading; ``count_of`` a count as a page
shows it; ``console_errors`` the browser console's errors."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def open_view(driver: Any, url: str, view: str = "overview") -> None:
    driver.get(url)
    WebDriverWait(driver, 30).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded")
    )
    loaded = driver.find_element(By.TAG_NAME, "body").get_attribute("data-loaded")
    assert loaded == view, driver.find_element(By.ID, "status").text


def count_of(text: str) -> int:
    """A count as the page shows it (Intl.NumberFormat, en-US: 1,234)."""
    assert text.replace(",", "").isdigit(), text
    return int(text.replace(",", ""))


def wait_loaded(driver: Any, view: str) -> None:
    WebDriverWait(driver, 30).until(
        lambda d: (
            d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == view
            and not d.execute_script("return window.groundwatch.loading")
        )
    )


def console_errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
