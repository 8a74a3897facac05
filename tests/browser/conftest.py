"""Headless Chromium (Debian's chromium + chromium-driver) against the dashboard of a real worker.

The worker holds simulated history (groundwatch/demo_history.py: a drift onset half-way) on the real
broker and chDB, and serves the dashboard on its own web server. Without the browser the tests skip,
except under CI=true, where a missing browser fails the run.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from groundwatch.commands.demo_cmd import fit_topics
from groundwatch.demo_history import History, simulate
from groundwatch.local.stack import LocalStack
from pipeline.net import free_port
from tests.system_parts import mark_directory, require

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WINDOW_SECONDS = 3600
MIN_PER_CLASS = 4  # labels of each class before the overview draws a corrected rate
# the history ends here, and the browser's clock reads it (plus the time since the session started): the
# history, its last record and what "the last 24 h" shows are the same at any time of day
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
_SESSION_START = time.time()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_directory(items, "browser", pytest.mark.browser)


def _require_browser() -> None:
    require(CHROMIUM, CHROMEDRIVER, package="chromium chromium-driver")


CONVERSATION_ID = "browser-conversation-1"


def conversation(last: dict[str, object]) -> str:
    """A multi-turn interaction in the last interaction's app, model and hour: its messages' earlier
    turns are the history the drill-down shows above the question."""
    record = {
        **last,
        "id": CONVERSATION_ID,
        "messages": [
            {"role": "system", "content": "You answer questions about the router manual."},
            {"role": "user", "content": "Which router has four ports?"},
            {"role": "assistant", "content": "The RT-400 has four ports."},
            {"role": "user", "content": "And how much does it cost?"},
        ],
        "answer": "It costs 80 dollars.",
    }
    record.pop("question", None)
    return json.dumps(record)


def _fixed_clock_script() -> str:
    """A page script that sets the page's clock to ``NOW`` at the session's start: ``Date.now()`` and
    ``new Date()`` run on from there at the real pace."""
    shift_ms = round((NOW.timestamp() - _SESSION_START) * 1000)
    return (
        "(() => { const Real = Date; const shift = SHIFT;"
        " class Shifted extends Real {"
        " constructor(...a) { if (a.length === 0) { super(Real.now() + shift); } else { super(...a); } }"
        " static now() { return Real.now() + shift; } }"
        " globalThis.Date = Shifted; })();"
    ).replace("SHIFT", str(shift_ms))


@dataclass
class DashboardSite:
    url: str  # http://127.0.0.1:PORT/dashboard/
    history: History


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardSite]:
    _require_browser()
    records = [
        json.loads(line)
        for line in (ROOT / "groundwatch" / "data" / "sample_interactions.jsonl").read_text().splitlines()
        if line.strip()
    ]
    history = simulate(records, 1600, days=4, onset_fraction=0.5, now=NOW, seed=11)
    history.lines.append(conversation(json.loads(history.lines[-1])))
    port = free_port(0)
    env = {
        "GROUNDWATCH_JUDGE__KIND": "lexical",
        "GROUNDWATCH_ALERTS__RULES_FILE": str(ROOT / "groundwatch" / "data" / "demo_alert_rules.yaml"),
        "GROUNDWATCH_WINDOW__GRACE_SECONDS": str(WINDOW_SECONDS),
        "GROUNDWATCH_KAFKA__WEB_ENABLED": "true",
        "GROUNDWATCH_LABELS__MIN_PER_CLASS": str(MIN_PER_CLASS),
        "GROUNDWATCH_KAFKA__WEB_PORT": str(port),
        "GROUNDWATCH_CONVERSATIONS__QUIET_SECONDS": "3",  # the replay's last conversations close soon
        "GROUNDWATCH_TOPICS__MAX_TOPICS": "12",  # as the demo: the sample's ~280 distinct questions
    }
    workdir = tmp_path_factory.mktemp("dashboard-stack")
    stack = LocalStack(workdir, env=env, window_seconds=WINDOW_SECONDS)
    # topics as the demo fits them, on the questions before the subject outage (the embeddings extra is
    # part of the test environment)
    assert fit_topics(stack, history) is not None
    with stack:
        stack.replay(history.lines)
        stack.wait_for_evaluations(len(history.lines), timeout_s=600)
        stack.wait_for_conversations(history.conversations(), timeout_s=600)
        stack.wait_for_windows(history.windows(WINDOW_SECONDS), timeout_s=600)
        yield DashboardSite(url=f"http://127.0.0.1:{port}/dashboard/", history=history)


@pytest.fixture()
def browser(request: pytest.FixtureRequest) -> Iterator[object]:
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--window-size=1440,1800",
    ):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _fixed_clock_script()})
    try:
        yield driver
    finally:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SCREENSHOTS / f"{request.node.name}.png"))
        driver.quit()
