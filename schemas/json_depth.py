"""How deeply JSON nests, measured without recursion (``json.loads`` and pydantic recurse once a level, and
a deep enough value makes them raise, or fail later when it is written out)."""

from __future__ import annotations

import re
from typing import Any

# a JSON string (skipped whole, at C speed) or one bracket; what is left between them cannot nest
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def json_depth_exceeds(text: str, limit: int) -> bool:
    """True when objects and arrays in ``text`` nest deeper than ``limit``; a linear scan without
    recursion (``json.loads`` recurses once a level and a deep enough message raises RecursionError).
    Brackets inside strings do not count; for text that is not JSON the answer is only an estimate."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for m in _STRING_OR_BRACKET.finditer(text):
        ch = m.group()
        if ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth = max(0, depth - 1)
    return False


def value_depth_exceeds(value: Any, limit: int) -> bool:
    """True when the dicts and lists in ``value`` (as ``json.loads`` returns them) nest deeper than
    ``limit``; walked with a stack, not recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            depth += 1
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth) for child in children)
    return False
