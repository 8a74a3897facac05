"""SQL fragments every reader of the tables shares: the time type of a query parameter, a half-open time
range, the optional app and model filters (an empty parameter: every app, every model)."""

from __future__ import annotations

#: a time parameter: milliseconds, UTC (the tables' DateTime64(3, 'UTC') columns)
TS = "DateTime64(3, 'UTC')"
#: ``{app:String}`` set: that app only; "": every app
APP_FILTER = "({app:String} = '' OR app = {app:String})"
#: ``{model:String}`` set: that model only; "": every model
MODEL_FILTER = "({model:String} = '' OR model = {model:String})"


def in_range(column: str = "timestamp", start: str = "start", end: str = "end") -> str:
    """``column`` in [``{start}``, ``{end}``), the two given as query parameters."""
    return f"{column} >= {{{start}:{TS}}} AND {column} < {{{end}:{TS}}}"
