"""SQL fragments every reader of the tables shares: the time type of a query parameter, a half-open time
range, the optional app and model filters (an empty parameter: every app, every model), and the pooling of
``window_aggregates`` rows as the metric catalogue declares it."""

from __future__ import annotations

from collections.abc import Iterable

from schemas.metrics import Metric

#: a time parameter: milliseconds, UTC (the tables' DateTime64(3, 'UTC') columns)
TS = "DateTime64(3, 'UTC')"
#: ``{app:String}`` set: that app only; "": every app
APP_FILTER = "({app:String} = '' OR app = {app:String})"
#: ``{model:String}`` set: that model only; "": every model
MODEL_FILTER = "({model:String} = '' OR model = {model:String})"


def in_range(column: str = "timestamp", start: str = "start", end: str = "end") -> str:
    """``column`` in [``{start}``, ``{end}``), the two given as query parameters."""
    return f"{column} >= {{{start}:{TS}}} AND {column} < {{{end}:{TS}}}"


def pooled_columns(metrics: Iterable[Metric]) -> str:
    """Each metric's numerator and denominator summed over the rows grouped (``<name>__num``,
    ``<name>__den``; a total has no denominator): the pooling every reader of ``window_aggregates``
    divides afterwards."""
    parts = []
    for m in metrics:
        parts.append(f"sum({m.numerator}) AS `{m.name}__num`")
        if m.denominator is not None:
            parts.append(f"sum({m.denominator}) AS `{m.name}__den`")
    return ",\n  ".join(parts)
