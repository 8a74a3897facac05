"""Text from messages made safe to show in a log line or a report: one line, no terminal control.

Stored values stay as sent (they are data); only what is *shown* is escaped. ``safe_text`` escapes
C0 controls (newline, tab, ESC...), DEL, C1 controls, the Unicode line and paragraph separators and the
bidirectional controls (which can reorder what a reader sees) as ``\\n``, ``\\x1b``, ``\\u202e``; a
backslash stays a backslash. ``SafeLogFilter`` applies it to every log record's message (and to the
message of a logged exception), so a value holding ``"\\n[CRITICAL] FORGED"`` can never start a line
of its own.
"""

from __future__ import annotations

import logging
import re
import traceback
from types import TracebackType
from typing import Any

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029" + _BIDI + "]")


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(value: object, max_chars: int | None = None) -> str:
    """``str(value)`` on one line with every control character escaped; cut to ``max_chars`` (with
    "…") when given."""
    text = value if isinstance(value, str) else str(value)
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars] + "…"
    return _UNSAFE.sub(_escape, text)


def _exception_lines(te: traceback.TracebackException) -> set[str]:
    """The "Type: message" chunks of an exception and of its causes and contexts: the untrusted part."""
    out: set[str] = set()
    seen: set[int] = set()
    todo = [te]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        out.update(current.format_exception_only())
        todo.extend(x for x in (current.__cause__, current.__context__) if x is not None)
    return out


def safe_exception(
    exc_info: tuple[type[BaseException], BaseException, TracebackType | None],
) -> str:
    """A traceback whose exception messages are escaped (the frames are the program's own text)."""
    te = traceback.TracebackException(*exc_info)
    untrusted = _exception_lines(te)
    chunks = [safe_text(c.rstrip("\n")) + "\n" if c in untrusted else c for c in te.format()]
    return "".join(chunks).rstrip("\n")


class SafeLogFilter(logging.Filter):
    """Escapes every record's message (its arguments merged in) and its exception's message, so a log
    line shows what a message held without letting it forge lines or drive the terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: show what there is
            message = f"{record.msg!r} % {record.args!r}"
        record.msg = safe_text(message)
        record.args = ()  # not None: faust's formatter would format the message again with (None,)
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            exc_type, exc, tb = record.exc_info
            assert exc_type is not None
            try:
                record.exc_text = safe_exception((exc_type, exc, tb))
            except Exception:
                record.exc_text = safe_text(f"{exc_type.__name__}: {exc}")
        return True


def install_safe_logging() -> None:
    """Escape every log record of this process from now on: a record factory applies SafeLogFilter as
    each record is made, so it holds whatever handlers a framework installs later (faust's worker sets
    up its own logging). Idempotent."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "groundwatch_safe", False):
        return
    escape = SafeLogFilter()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        escape.filter(record)
        return record

    factory.groundwatch_safe = True  # type: ignore[attr-defined]
    factory.previous = previous  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


def uninstall_safe_logging() -> None:
    """Undo ``install_safe_logging`` (for tests)."""
    current = logging.getLogRecordFactory()
    if getattr(current, "groundwatch_safe", False):
        logging.setLogRecordFactory(current.previous)  # type: ignore[attr-defined]
