"""A ``SliceFilter`` as a SQL condition over ``evaluations`` (and ``evaluation_statements``, which carry
app and model too), its values as query parameters named with a prefix so two slices share one query."""

from __future__ import annotations

from typing import Any

from schemas.slice_filter import SliceFilter

#: the column each SliceFilter field matches (a String column of evaluations and evaluation_statements)
COLUMNS: dict[str, str] = {"app": "app", "model": "model"}


def slice_condition(f: SliceFilter, prefix: str) -> tuple[str, dict[str, Any]]:
    """``(sql, params)``: every set field equal to its value; ``1`` for an empty filter."""
    parts: list[str] = []
    params: dict[str, Any] = {}
    for key, value in f.model_dump(exclude_none=True).items():
        name = f"{prefix}_{key}"
        parts.append(f"{COLUMNS[key]} = {{{name}:String}}")
        params[name] = value
    return (" AND ".join(parts) or "1"), params
