"""Slices: the JSON API's queries and answers for a metric per value of one dimension and for what
changed between two periods (pipeline/slices.py computes them; README "Slices: why did it move?").

A slice filter is ``DIMENSION=VALUE`` (``prompt_version=v2``; ``(none)`` selects the interactions
without the dimension). Every request value is validated here; in SQL it travels as a query parameter.
"""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel, Field, field_validator, model_validator

from schemas.alert import Alert
from schemas.dashboard import _NAME, Rollup, Series, TimeRange, _utc
from schemas.metrics import METRICS_BY_NAME

#: a dimension's name: a configured metadata path or a built-in (schemas.settings.DimensionSettings)
DIMENSION = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
MAX_VALUE_CHARS = 1000


def check_dimension(value: str) -> str:
    if not 0 < len(value) <= 64 or not DIMENSION.match(value):
        raise ValueError("a dimension name: letters, digits, _ and -, parts joined by dots, at most 64")
    return value


def parse_slice(text: str) -> tuple[str, str]:
    """``DIMENSION=VALUE`` as (dimension, value); ValueError naming what is wrong."""
    dimension, sep, value = text.partition("=")
    if not sep or not value:
        raise ValueError(f"a slice is DIMENSION=VALUE (prompt_version=v2), got {text!r}")
    if len(value) > MAX_VALUE_CHARS:
        raise ValueError(f"a slice value has at most {MAX_VALUE_CHARS} characters")
    return check_dimension(dimension), value


def check_slice(text: str | None) -> str | None:
    """A filter field's validator: None, or a valid ``DIMENSION=VALUE``."""
    if text is not None:
        parse_slice(text)
    return text


def slice_pair(text: str | None) -> tuple[str, str]:
    """(dimension, value) of a validated filter; ('', '') without one (the SQL's "no filter")."""
    return parse_slice(text) if text else ("", "")


class SliceFilter(TimeRange):
    app: str | None = Field(None, max_length=_NAME, description="one app, or every app when absent")
    models: list[str] = Field(default_factory=list, max_length=20, description="models; every one when empty")
    slice: str | None = Field(None, description="only this slice: DIMENSION=VALUE")

    @field_validator("slice")
    @classmethod
    def _slice(cls, value: str | None) -> str | None:
        return check_slice(value)

    @field_validator("models")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        if any(not m or len(m) > _NAME for m in value):
            raise ValueError(f"each model must be 1-{_NAME} characters")
        return value


class BreakdownQuery(SliceFilter):
    metric: str = Field(description="a metric of the catalogue (schemas/metrics.py)")
    dimension: str = Field(description="the dimension to slice by")
    limit: int = Field(50, ge=1, le=1000, description="slices returned, the rest summed as (rest)")

    @field_validator("metric")
    @classmethod
    def _metric(cls, value: str) -> str:
        if value not in METRICS_BY_NAME:
            raise ValueError(f"not a metric; one of {', '.join(METRICS_BY_NAME)}")
        return value

    @field_validator("dimension")
    @classmethod
    def _dimension(cls, value: str) -> str:
        return check_dimension(value)


class ChangesQuery(BreakdownQuery):
    baseline_start: datetime = Field(description="baseline period start (ISO 8601), inclusive")
    baseline_end: datetime = Field(description="baseline period end (ISO 8601), exclusive")

    @field_validator("baseline_start", "baseline_end")
    @classmethod
    def _as_utc(cls, value: datetime) -> datetime:
        return _utc(value)

    @model_validator(mode="after")
    def _baseline(self) -> ChangesQuery:
        TimeRange(start=self.baseline_start, end=self.baseline_end)  # the same checks as the period's
        return self


class Period(BaseModel):
    start: datetime
    end: datetime
    value: float | None = Field(description="the metric over the whole period")
    interactions: int


class SliceTotals(BaseModel):
    """One slice's sums in one period, as the SQL returns them."""

    value: str = Field(description="the dimension's value ('(none)' without one, '(other)' past the guard)")
    total: float = Field(description="the metric's numerator (events, sum of scores, or the sum itself)")
    n: int = Field(description="the metric's denominator (0 for a sum)")
    interactions: int = Field(description="interactions in the slice")


class SliceValue(BaseModel):
    value: str
    metric: float | None = Field(description="the metric over the slice (None without a denominator)")
    lower: float | None = Field(None, description="a rate: Wilson 95 % lower bound")
    upper: float | None = Field(None, description="a rate: Wilson 95 % upper bound")
    n: int = Field(description="the metric's denominator (a sum: the interactions)")
    interactions: int
    share: float = Field(description="the slice's share of the period's interactions")


class Contribution(BaseModel):
    value: str
    baseline: float | None = Field(description="the slice's metric in the baseline period")
    current: float | None = Field(description="the slice's metric in the current period")
    baseline_share: float = Field(description="its share of the metric's denominator (a sum: of the total)")
    current_share: float
    baseline_n: int
    current_n: int
    mix: float | None = Field(description="change from its share moving (None for a sum)")
    rate: float | None = Field(description="change from its own value moving (None for a sum)")
    contribution: float = Field(description="its part of the overall change (mix + rate; a sum: its change)")


class Decomposition(BaseModel):
    baseline: float | None = Field(description="the overall metric in the baseline period")
    current: float | None
    change: float | None = Field(description="current - baseline; the contributions add up to it")
    contributions: list[Contribution] = Field(description="largest contribution (absolute) first")


class Breakdown(BaseModel):
    metric: str
    kind: str
    dimension: str
    period: Period
    slices: list[SliceValue] = Field(description="largest volume first; past the limit summed as (rest)")


class WhatChanged(BaseModel):
    metric: str
    kind: str
    dimension: str
    baseline: Period
    current: Period
    change: float | None = Field(description="current - baseline; the contributions add up to it")
    contributions: list[Contribution] = Field(
        description="largest contribution (absolute) first; past the limit summed as (rest)"
    )


class SliceOverviewQuery(SliceFilter):
    slice: str = Field(description="the slice: DIMENSION=VALUE")
    rollup: Rollup = Field("auto", description="bucket size: auto (by range), window, hour, 6h or day")


class SliceOverview(BaseModel):
    """The overview's answer for one slice (schemas.dashboard.Overview, from the interactions)."""

    start: datetime
    end: datetime
    rollup: str
    step_seconds: int
    slice: str
    series: list[Series]
    dead_letters: list[dict[str, int]] = Field(
        default_factory=list, description="always empty: a dead letter has no dimensions"
    )
    alerts: list[Alert] = Field(
        default_factory=list,
        description="alerts of rules with group_by about this slice or a slice within it, newest first",
    )
