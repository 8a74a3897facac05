"""The one way a pydantic ValidationError becomes text: ``where: why; where: why``.

Every reason built from a ValidationError (a dead letter's, a log line's, the CLI's, the dashboard API's,
a rules or labels file's) goes through here. ``values=False`` leaves out every value the input carried:
the locations keep field names and list positions but not the keys of the input's own dicts (a metadata
key, a labels key, an unknown field's name may be personal data), and a message loses what it quotes,
the input's own values and times written in it. ``privacy.mode`` all asks for that, so no reason, log line
or row carries a value the masking never saw.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError

HIDDEN = "…"
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,63}")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ][0-9:.]+(?:Z|[+-]\d{2}:?\d{2})?")
# pydantic's own messages built from the schema only (expected types, limits, allowed values), never
# from the input; a validator's message (value_error, assertion_error) may quote anything
_SCHEMA_ONLY_TYPES = frozenset(
    {
        "missing", "extra_forbidden", "string_type", "int_type", "float_type", "bool_type", "dict_type",
        "list_type", "model_type", "model_attributes_type", "none_required", "int_parsing",
        "float_parsing", "bool_parsing", "string_too_short", "string_too_long", "too_short", "too_long",
        "greater_than", "greater_than_equal", "less_than", "less_than_equal", "literal_error", "enum",
        "finite_number", "datetime_type", "datetime_parsing", "datetime_from_date_parsing",
        "date_parsing", "json_invalid", "json_type", "url_parsing", "url_type", "int_from_float",
        "union_tag_invalid", "union_tag_not_found", "frozen_instance", "frozen_field",
    }
)  # fmt: skip


def field_names(model: type[BaseModel]) -> frozenset[str]:
    """The field names and aliases of ``model`` and of every model its fields hold, at any depth."""
    seen: set[type[BaseModel]] = set()
    names: set[str] = set()

    def walk(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation in seen:
                return
            seen.add(annotation)
            for name, info in annotation.model_fields.items():
                names.add(name)
                if info.alias:
                    names.add(info.alias)
                walk(info.annotation)
        for arg in getattr(annotation, "__args__", ()) or ():
            walk(arg)

    walk(model)
    return frozenset(names)


def _leaves(value: Any, depth: int = 0) -> Iterator[str]:
    """The input's scalar values and dict keys, as text."""
    if depth > 50:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _leaves(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item, depth + 1)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


class Problem(NamedTuple):
    loc: tuple[int | str, ...]  # the location's parts, each shown or HIDDEN
    why: str

    @property
    def where(self) -> str:
        """The dotted location ("" for the whole input)."""
        return ".".join(str(p) for p in self.loc)


def _location(loc: Iterable[int | str], values: bool, names: frozenset[str] | None) -> tuple[int | str, ...]:
    parts: list[int | str] = []
    for part in loc:
        if values or isinstance(part, int):
            parts.append(part)
        elif names is not None:
            parts.append(part if part in names else HIDDEN)
        else:
            parts.append(part if _NAME.fullmatch(part) else HIDDEN)
    return tuple(parts)


def _message(err: Any, values: bool) -> str:
    message = str(err.get("msg", "invalid")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if values or err.get("type") in _SCHEMA_ONLY_TYPES:
        return message
    for leaf in sorted(set(_leaves(err.get("input"))), key=len, reverse=True):
        if len(leaf) >= 2:
            message = message.replace(leaf, HIDDEN)
    message = _QUOTED.sub(HIDDEN, message)
    return _TIME.sub(HIDDEN, message)


def problems(
    exc: ValidationError, *, values: bool = True, model: type[BaseModel] | None = None
) -> list[Problem]:
    """Each problem pydantic found, where and why. ``values=False``: nothing of the input's own (see the
    module docstring); ``model`` names the fields a location may show (default: a location shows the
    parts that look like field names)."""
    names = field_names(model) if model is not None and not values else None
    return [
        Problem(_location(err.get("loc", ()), values, names), _message(err, values)) for err in exc.errors()
    ]


def describe_validation_error(
    exc: ValidationError, *, values: bool = True, model: type[BaseModel] | None = None, whole: str = ""
) -> str:
    """``where: why; where: why`` on one line (``whole`` names a problem of the whole input, e.g. "line";
    without it such a problem is its reason alone)."""
    out = []
    for problem in problems(exc, values=values, model=model):
        where = problem.where or whole
        out.append(f"{where}: {problem.why}" if where else problem.why)
    return "; ".join(out)
