"""One ClickHouse URL -> target: chdb paths, http(s) with credentials, identifiers checked."""

from __future__ import annotations

import pytest

from streams.clickhouse.client import check_identifier, parse_url


def test_chdb_url() -> None:
    t = parse_url("chdb:///var/lib/gw/chdb")
    assert (t.kind, t.path, t.database) == ("chdb", "/var/lib/gw/chdb", "groundwatch")
    assert parse_url("chdb:///x?database=other").database == "other"
    with pytest.raises(ValueError, match="absolute path"):
        parse_url("chdb://relative/path")


def test_http_url_with_credentials_never_shows_the_password() -> None:
    t = parse_url("https://alice:s%40cret@ch.example:8443/metrics")
    assert (t.kind, t.host, t.port, t.username, t.password, t.database) == (
        "https", "ch.example", 8443, "alice", "s@cret", "metrics"
    )  # fmt: skip
    assert "s@cret" not in t.describe() and "alice@" in t.describe()
    assert parse_url("http://localhost").port == 8123
    assert parse_url("http://localhost", default_database="gw").database == "gw"


def test_bad_urls_and_identifiers() -> None:
    with pytest.raises(ValueError, match="scheme"):
        parse_url("clickhouse://x")
    with pytest.raises(ValueError, match="identifier"):
        parse_url("http://h/db.x")
    assert check_identifier("gw_1") == "gw_1"
    for bad in ["1abc", "a-b", "a.b", "", "x" * 64]:
        with pytest.raises(ValueError):
            check_identifier(bad)
