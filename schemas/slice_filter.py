"""A slice of the traffic: which interactions the overview, the drill-down, the Breakdown, Documents and
each side of Compare read.

A slice is a small parameter object: every field that is set must match. In a query string it is given
as repeated ``key:value`` terms, each key at most once: ``app`` and ``model`` match those columns, any
other key is a dimension of ``evaluations.dimensions`` (a configured metadata path or a built-in,
``pipeline/dimensions.py``), ``(none)`` matching the interactions without it::

    slice=app:wiki-qa&slice=prompt_version:v2          (the page, Documents, the drill-down, Breakdown)
    a=app:wiki-qa&a=prompt_version:v1&b=app:wiki-qa&b=prompt_version:v2          (Compare's two sides)

``streams.clickhouse.slices.slice_condition`` turns it into SQL.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

_NAME = 200  # longest app or model name accepted in a filter
#: a dimension's name: a configured metadata path or a built-in (schemas.settings.DimensionSettings)
DIMENSION = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
MAX_VALUE_CHARS = 1000
MAX_TERMS = 10
#: the keys naming a column rather than a dimension
COLUMNS = ("app", "model")


def check_dimension(value: str) -> str:
    if not 0 < len(value) <= 64 or not DIMENSION.match(value):
        raise ValueError("a dimension name: letters, digits, _ and -, parts joined by dots, at most 64")
    return value


class SliceFilter(BaseModel):
    """Interactions whose every given field matches; an empty filter is all of them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    app: str | None = Field(None, min_length=1, max_length=_NAME, description="one app")
    model: str | None = Field(None, min_length=1, max_length=_NAME, description="one model")
    dimensions: dict[str, str] = Field(
        default_factory=dict,
        max_length=MAX_TERMS,
        description="dimension name -> value, each must match ('(none)': the interactions without it)",
    )

    @field_validator("dimensions")
    @classmethod
    def _dimensions(cls, value: dict[str, str]) -> dict[str, str]:
        for name, v in value.items():
            if name in COLUMNS:
                raise ValueError(f"{name!r} is a column, not a dimension")
            check_dimension(name)
            if not 0 < len(v) <= MAX_VALUE_CHARS:
                raise ValueError(f"{name}: a value has 1-{MAX_VALUE_CHARS} characters")
        return value

    @classmethod
    def parse_terms(cls, terms: list[str]) -> dict[str, Any]:
        """``["app:wiki-qa", "prompt_version:v2"]`` -> the filter's fields, unvalidated; a term without
        ``key:value`` or a key given twice is refused (ValueError)."""
        if len(terms) > MAX_TERMS + len(COLUMNS):
            raise ValueError(f"at most {MAX_TERMS + len(COLUMNS)} terms")
        data: dict[str, Any] = {}
        dims: dict[str, str] = {}
        for term in terms:
            key, sep, value = term.partition(":")
            if not sep or not key or not value:
                raise ValueError(f"{term!r}: write key:value (app, model or a dimension: prompt_version:v2)")
            if key in data or key in dims:
                raise ValueError(f"{key!r} given twice")
            if key in COLUMNS:
                data[key] = value
            else:
                dims[check_dimension(key)] = value
        return {**data, "dimensions": dims} if dims else data

    def terms(self) -> list[str]:
        columns = [f"{k}:{v}" for k in COLUMNS if (v := getattr(self, k)) is not None]
        return columns + [f"{k}:{v}" for k, v in self.dimensions.items()]

    def describe(self) -> str:
        return ", ".join(self.terms()) or "all traffic"

    def __bool__(self) -> bool:
        return bool(self.app or self.model or self.dimensions)


def _terms(value: Any) -> Any:
    """A query's repeated terms (or one term) as the filter's fields; a filter or dict as it is."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        return SliceFilter.parse_terms(value)
    return value


#: a query field holding a slice filter, given as ``key:value`` terms
SliceTerms = Annotated[SliceFilter, BeforeValidator(_terms)]
