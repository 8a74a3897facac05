"""Alert rules with ``group_by``: each rule evaluated per slice (a value of its dimensions), from the
interactions of the windows it reads (``evaluations``: windows hold no dimensions). Every slice has its
own lifecycle (``streams.alerts.lifecycle.decide``), its own ``min_interactions`` and its own alert id.

A slice is only evaluated while it has interactions in the windows its rule reads: one that vanished
entirely leaves its open alert as it was until it has traffic again.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from schemas.alert import AlertRules
from schemas.errors import ConfigError
from schemas.metrics import named
from schemas.settings import DimensionSettings, variable_name
from streams.alerts.lifecycle import Rule
from streams.alerts.stats import Obs
from streams.clickhouse.slices import dimension_sql, metric_sql
from streams.clickhouse.store import WINDOW_ROWS, ClickHouseStore


def check_group_by(rules: AlertRules, dimensions: DimensionSettings) -> None:
    """A rule grouped by a dimension the workers do not store is a ConfigError naming both."""
    known = set(dimensions.names)
    for rule in rules.rules:
        unknown = [d for d in rule.group_by if d not in known]
        if unknown:
            raise ConfigError(
                f"alert rule {rule.name!r}: group_by {', '.join(unknown)} is not a dimension; add it to "
                f"{variable_name('dimensions', 'paths')} or use one of {', '.join(dimensions.names)}"
            )


def slice_name(dimensions: list[str], values: list[str]) -> str:
    """``prompt_version=v2``; several dimensions joined by ', '."""
    return ", ".join(f"{d}={v}" for d, v in zip(dimensions, values, strict=True))


#: where one ``dimension=value`` part of a slice name ends: ", " before the next dimension's name and "="
_NEXT_PART = re.compile(r", (?=[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*=)")


def slice_values(name: str) -> dict[str, str]:
    """A slice name read back: dimension -> value (a value may hold ", " or "=": "city=Paris, France")."""
    return dict(part.partition("=")[::2] for part in _NEXT_PART.split(name)) if name else {}


def observations_sql(db: str, rule: Rule) -> str:
    num, den = metric_sql(named(rule.metric))
    values = ", ".join(dimension_sql(f"d{i}") for i in range(len(rule.group_by)))
    return (
        "SELECT intDiv(toUnixTimestamp(timestamp), {size:UInt32}) * {size:UInt32} AS w, "
        f"[{values}] AS slice, {num} AS total, {den} AS n "
        f"FROM {db}.evaluations FINAL WHERE {WINDOW_ROWS} GROUP BY w, slice"
    )


async def slice_observations(
    store: ClickHouseStore, rule: Rule, app: str, model: str, start: datetime, end: datetime, size: int
) -> dict[str, dict[datetime, Obs]]:
    """slice -> window start -> the rule's metric observed there, over [start, end)."""
    params = {
        "app": app, "model": model, "start": start, "end": end, "size": size,
        **{f"d{i}": d for i, d in enumerate(rule.group_by)},
    }  # fmt: skip
    out: dict[str, dict[datetime, Obs]] = {}
    for r in await store.query(observations_sql(store.db, rule), params):
        name = slice_name(rule.group_by, [str(v) for v in r["slice"]])
        at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=int(r["w"]))
        out.setdefault(name, {})[at] = Obs(float(r["total"] or 0), int(r["n"]))
    return out
