"""Expand a Grafana panel query the way Grafana and grafana-clickhouse-datasource (v4) do, so the SQL of
deploy/grafana/dashboards/groundwatch.json can run on chDB without a Grafana server.

The order and semantics follow the plugin's source (github.com/grafana/clickhouse-datasource):

1. frontend, ``CHDatasource.applyConditionalAll``: each ``$__conditionalAll(condition, $var)``, from the
   last one back, becomes ``1=1`` when the variable's current value is "All" (``$__all``) or empty, else
   ``condition``; arguments are split on commas outside brackets (``getMacroArgs``). It reads the
   variable's dashboard-wide value, not a repeated panel's scoped one.
2. frontend, Grafana's template service: ``${var:singlequote}`` (each value quoted, ``'`` escaped as
   ``\\'``, joined by ``,``), ``$var`` / ``${var}`` (the plugin's own format: an array becomes
   ``'a','b'``). "All" without a custom all value stands for every option of the variable; a repeated
   panel sees its own single value.
3. backend, ``pkg/macros/macros.go``: ``$__timeFilter(col)`` -> ``col >= toDateTime(from) AND col <=
   toDateTime(to)``; ``$__timeInterval(col)`` -> ``toStartOfInterval(toDateTime(col), INTERVAL n second)``
   with n = max(interval, 1 s) in whole seconds; ``$__fromTime`` / ``$__toTime`` -> ``toDateTime(unix)``.

Anything this expander does not know is left in place, and ``expand`` refuses SQL that still holds a ``$``,
so a macro or format it does not model fails the test instead of being guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

ALL = "$__all"


@dataclass
class Variable:
    name: str
    options: list[str]  # what the variable's query returned
    selected: list[str] | None = None  # None: "All"

    @property
    def current_value(self) -> str:
        """``current.value.toString()`` as the plugin reads it (a JS array joins with commas)."""
        return ALL if self.selected is None else ",".join(self.selected)

    def values(self) -> list[str]:
        return list(self.options) if self.selected is None else list(self.selected)


@dataclass
class QueryContext:
    start: datetime
    end: datetime
    interval_seconds: float
    variables: dict[str, Variable] = field(default_factory=dict)
    scoped: dict[str, str] = field(default_factory=dict)  # a repeated panel's own value per variable


def _macro_args(sql: str, open_index: int) -> list[str]:
    """``getMacroArgs``: the arguments of the call whose ``(`` is at ``open_index``; [] if unbalanced."""
    args: list[str] = []
    depth = 0
    last = 1
    sub = sql[open_index:]
    for m in re.finditer(r"[(),]", sub):
        token = m.group(0)
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        if token == "," and depth == 1:
            args.append(sub[last : m.end() - 1])
            last = m.end()
        if depth == 0:
            args.append(sub[last : m.end() - 1])
            return args
    return []


def apply_conditional_all(sql: str, variables: dict[str, Variable]) -> str:
    macro = "$__conditionalAll("
    index = sql.rfind(macro)
    while index != -1:
        params = _macro_args(sql, index + len(macro) - 1)
        if len(params) != 2:
            return sql
        phrase = params[0]
        name = re.search(r"(?<=\$\{)\w+(?=\})|(?<=\$)\w+", params[1].strip())
        if name:
            var = variables.get(name.group(0))
            if var is not None and var.current_value in ("", ALL):
                phrase = "1=1"
        sql = sql.replace(f"{macro}{params[0]},{params[1]})", phrase, 1)
        index = sql.rfind(macro)
    return sql


def _singlequote(values: list[str]) -> str:
    return ",".join("'" + v.replace("'", "\\'") + "'" for v in values)


def replace_variables(sql: str, ctx: QueryContext) -> str:
    def value(name: str, fmt: str | None) -> str | None:
        if name in ctx.scoped:
            values: list[str] | str = ctx.scoped[name]
        elif name in ctx.variables:
            values = ctx.variables[name].values()
        else:
            return None  # not a variable (a macro such as $__timeFilter): left for the backend
        if fmt == "singlequote":
            return _singlequote([values] if isinstance(values, str) else values)
        if fmt is not None:
            raise NotImplementedError(f"variable format {fmt!r} is not modelled")
        if isinstance(values, str):
            return values
        return "'" + "','".join(values) + "'"

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        out = value(name, m.group(3))
        return m.group(0) if out is None else out

    return re.sub(r"\$(\w+)|\$\{(\w+)(?::(\w+))?\}", sub, sql)


def apply_backend_macros(sql: str, ctx: QueryContext) -> str:
    start = f"toDateTime({int(ctx.start.timestamp())})"
    end = f"toDateTime({int(ctx.end.timestamp())})"
    seconds = int(max(ctx.interval_seconds, 1))

    def sub(m: re.Match[str]) -> str:
        name, arg = m.group(1), m.group(2)
        if name == "timeFilter" and arg is not None:
            col = arg.strip()
            return f"{col} >= {start} AND {col} <= {end}"
        if name == "timeInterval" and arg is not None:
            return f"toStartOfInterval(toDateTime({arg.strip()}), INTERVAL {seconds} second)"
        if name == "fromTime" and arg is None:
            return start
        if name == "toTime" and arg is None:
            return end
        return m.group(0)

    return re.sub(r"\$__(\w+)(?:\(([^()]*)\))?", sub, sql)


def expand(sql: str, ctx: QueryContext) -> str:
    out = apply_backend_macros(replace_variables(apply_conditional_all(sql, ctx.variables), ctx), ctx)
    if "$" in out:
        raise ValueError(f"unexpanded macro or variable left in:\n{out}")
    return out
