"""How the command line shows a statistic that may be undefined (None, NaN or infinite): ``-`` in text,
``null`` in JSON (pydantic writes a non-finite float as null; ``defined`` does it for plain values)."""

from __future__ import annotations

import math
from typing import Any

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


def json_safe(value: Any) -> Any:
    """``value`` (plain JSON types, as ``model_dump(mode="json")`` gives) with every undefined float as
    None, so ``json.dumps`` writes ``null`` where it would write ``NaN`` or ``Infinity`` (not JSON)."""
    if isinstance(value, float):
        return defined(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
