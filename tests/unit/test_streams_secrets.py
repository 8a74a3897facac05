"""Secrets (the ClickHouse URL's password, the webhook URL) never show in repr, str, logs or output."""

from __future__ import annotations

import logging

import pytest

from groundwatch import cli
from schemas.settings import Settings
from streams.clickhouse.client import parse_url

PASSWORD = "hunter2-s3cret"
URL = f"http://alice:{PASSWORD}@127.0.0.1:1/metrics"
HOOK = f"https://hooks.example/services/T000/B000/{PASSWORD}"


@pytest.fixture()
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDWATCH_CLICKHOUSE__URL", URL)
    monkeypatch.setenv("GROUNDWATCH_ALERTS__WEBHOOK_URL", HOOK)


def test_settings_repr_and_str_hide_the_clickhouse_url_and_the_webhook(
    env: None, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings()  # read from the environment, as a worker does
    assert settings.clickhouse.url.get_secret_value() == URL  # same env var names as before
    assert settings.alerts.webhook_url is not None
    assert settings.alerts.webhook_url.get_secret_value() == HOOK
    with caplog.at_level(logging.INFO):
        logging.getLogger("t").info("settings: %s %r", settings, settings)
    for text in (repr(settings), str(settings), repr(settings.clickhouse), caplog.text):
        assert PASSWORD not in text


def test_target_repr_str_and_describe_hide_the_password(caplog: pytest.LogCaptureFixture) -> None:
    target = parse_url(URL)
    assert target.password == PASSWORD
    with caplog.at_level(logging.INFO):
        logging.getLogger("t").info("target: %s %r", target, target)
    for text in (repr(target), str(target), target.describe(), caplog.text):
        assert PASSWORD not in text
    assert "alice@127.0.0.1:1/metrics" in target.describe()


def test_report_prints_the_url_without_its_password(env: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report"]) == 2  # nothing listens on port 1
    out = capsys.readouterr()
    assert "cannot open ClickHouse at http://alice@127.0.0.1:1/metrics" in out.err
    assert PASSWORD not in out.out + out.err


def test_report_is_read_only(capsys: pytest.CaptureFixture[str]) -> None:
    from streams.clickhouse.store import ClickHouseStore
    from tests.fixtures.store import store_settings
    from tests.integration.chdb import fresh_chdb_url

    url = fresh_chdb_url()
    assert cli.main(["report", "--json", "--clickhouse", url]) == 2  # nothing to report: said so, no DDL
    captured = capsys.readouterr()
    assert "has a worker run on it?" in captured.err and captured.out == ""
    store = ClickHouseStore.open_sync(store_settings(url), migrate=False)
    try:
        db = store.db
        tables = store.query_sync("SELECT name FROM system.tables WHERE database = {db:String}", {"db": db})
    finally:
        store.close()
    assert tables == []
