"""Text from messages shown in logs and reports cannot forge lines or drive the terminal."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from groundwatch.trend_report import Report, render
from schemas.safe_text import (
    SafeLogFilter,
    install_safe_logging,
    safe_exception,
    safe_text,
    uninstall_safe_logging,
)
from streams.windows.aggregator import WindowStats

FORGED = "shop\n2026-01-01 00:00:00 CRITICAL groundwatch: [CRITICAL] FORGED LOG LINE\x1b[2J\x1b]0;x\x07"


def test_controls_are_escaped_and_plain_text_is_kept() -> None:
    assert safe_text("plain café – 東京 \\ backslash") == "plain café – 東京 \\ backslash"
    assert safe_text("a\nb\r\tc") == "a\\nb\\r\\tc"
    assert safe_text("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"
    assert safe_text("\x00\x7f\x85\x9b") == "\\x00\\x7f\\x85\\x9b"  # NUL, DEL, C1 NEL and CSI
    assert safe_text("evil\u202etxt.exe\u2066\u2069\u200f") == "evil\\u202etxt.exe\\u2066\\u2069\\u200f"
    assert safe_text("line\u2028sep\u2029") == "line\\u2028sep\\u2029"
    assert safe_text("x" * 10, max_chars=4) == "xxxx…"
    assert "\n" not in safe_text(FORGED) and "\x1b" not in safe_text(FORGED)


def _capture() -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger(f"test_safe_text.{id(stream)}")
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, stream


@pytest.fixture()
def safe_logging() -> Iterator[None]:
    install_safe_logging()
    install_safe_logging()  # idempotent
    try:
        yield
    finally:
        uninstall_safe_logging()


def test_every_log_record_is_escaped_once_installed(safe_logging: None) -> None:
    logger, stream = _capture()
    logger.warning("dead letter: app=%s id=%r", FORGED, "x\ny")
    logger.info(FORGED)  # a message with no arguments, too
    try:
        raise ValueError(f"bad app {FORGED}")
    except ValueError:
        logger.exception("window %s failed", FORGED)
    lines = stream.getvalue().splitlines()
    assert not any(line.startswith(("2026-01-01 00:00:00 CRITICAL", "[CRITICAL]")) for line in lines)
    assert sum("FORGED LOG LINE" in line for line in lines) == 4  # each inside its own record
    assert lines[0].startswith("WARNING") and "shop\\n2026-01-01" in lines[0] and "\\x1b[2J" in lines[0]
    assert "'x\\ny'" in lines[0]
    assert any(line.startswith("Traceback") for line in lines)  # the traceback keeps its lines
    assert any(line.startswith("ValueError: bad app shop\\n") for line in lines)
    assert "\x1b" not in stream.getvalue()


def test_faust_s_formatter_shows_the_escaped_message_as_is(safe_logging: None) -> None:
    """mode's ExtensionFormatter (the worker's) turns args into a tuple and formats again: the escaped
    message must come out unchanged, a literal % and a %s in the data included."""
    from mode.utils.logging import ExtensionFormatter

    logger, stream = _capture()
    logger.handlers[0].setFormatter(ExtensionFormatter(stream=stream, fmt="%(message)s"))
    logger.info("Creating topic %s at 50%%", "a%sb\n")
    logger.info("plain 100% done")
    assert stream.getvalue().splitlines() == ["Creating topic a%sb\\n at 50%", "plain 100% done"]


def test_without_the_factory_a_forged_line_appears_and_the_filter_stops_it() -> None:
    logger, stream = _capture()
    logger.warning("app=%s", FORGED)
    assert any(line.startswith("2026-01-01 00:00:00 CRITICAL") for line in stream.getvalue().splitlines())
    logger, stream = _capture()
    logger.handlers[0].addFilter(SafeLogFilter())
    logger.warning("app=%s", FORGED)
    assert len(stream.getvalue().splitlines()) == 1


def test_a_chained_exception_message_is_escaped() -> None:
    try:
        try:
            raise KeyError(FORGED)
        except KeyError as inner:
            raise RuntimeError("outer\nFORGED") from inner
    except RuntimeError as exc:
        text = safe_exception((RuntimeError, exc, exc.__traceback__))
    assert "RuntimeError: outer\\nFORGED" in text and "\x1b" not in text
    assert not any(line.startswith(("FORGED", "2026")) for line in text.splitlines())


def test_the_report_escapes_app_and_model_names() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    window = WindowStats().result(window_start=start, window_end=start, app=FORGED, model="m\x1b[31m")
    text = render(Report(counts={"evaluations": 0}, windows=[window], alerts=[]))
    assert "\x1b" not in text
    assert not any(line.startswith("2026-01-01 00:00:00 CRITICAL") for line in text.splitlines())
    assert "== shop\\n2026-01-01 00:00:00 CRITICAL" in text and "m\\x1b[31m" in text
    assert window.app == FORGED  # the stored value stays as sent
