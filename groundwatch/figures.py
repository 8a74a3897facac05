"""How the command line shows a statistic that may be undefined (None, NaN or infinite): ``-`` in text,
``null`` in JSON (pydantic writes a non-finite float as null; ``defined`` does it for plain values)."""

from __future__ import annotations

import math

UNDEFINED = "-"


def defined(value: float | None) -> float | None:
    """The value, or None when it is undefined (None, NaN, infinite)."""
    if value is None or not math.isfinite(value):
        return None
    return value


def fixed(value: float | None, digits: int = 3, width: int = 0) -> str:
    """``value`` to ``digits`` places, right-aligned in ``width``; ``-`` when undefined."""
    shown = defined(value)
    text = UNDEFINED if shown is None else f"{shown:.{digits}f}"
    return f"{text:>{width}}"
