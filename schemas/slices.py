"""Slices: the JSON API's queries and answers for a metric per value of one dimension and for what
changed between two periods (pipeline/slices.py computes them; docs/slices.md).

The slice filter (``slice``, repeated ``key:value`` terms) is ``schemas.slice_filter.SliceFilter``.
Every request value is validated here; in SQL it travels as a query parameter.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field, field_validator, model_validator

from schemas.alert import Alert
from schemas.dashboard import AppModelsQuery, Rollup, Series, TimeRange
from schemas.metrics import catalogue, metric_named
from schemas.slice_filter import SliceFilter, SliceTerms, check_dimension
from schemas.utc import utc


class SliceQuery(AppModelsQuery):
    slice: SliceTerms = Field(
        default_factory=SliceFilter, description="only this slice: repeated key:value terms (all when none)"
    )


class BreakdownQuery(SliceQuery):
    metric: str = Field(description="a metric of the catalogue (schemas/metrics.py)")
    dimension: str = Field(description="the dimension to slice by")
    limit: int = Field(50, ge=1, le=1000, description="slices returned, the rest summed as (rest)")

    @field_validator("metric")
    @classmethod
    def _metric(cls, value: str) -> str:
        if metric_named(value) is None:
            raise ValueError(f"not a metric; one of {', '.join(m.name for m in catalogue())}")
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
        return utc(value)

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


class SliceOverviewQuery(SliceQuery):
    slice: SliceTerms = Field(description="the slice: repeated key:value terms, at least one")
    rollup: Rollup = Field("auto", description="bucket size: auto (by range), window, hour, 6h or day")

    @field_validator("slice")
    @classmethod
    def _sliced(cls, value: SliceFilter) -> SliceFilter:
        if not value:
            raise ValueError("give the slice: at least one key:value term")
        return value


class SliceOverview(BaseModel):
    """The overview's answer for one slice (schemas.dashboard.Overview, from the interactions)."""

    start: datetime
    end: datetime
    rollup: str
    step_seconds: int
    slice: SliceFilter
    series: list[Series]
    dead_letters: list[dict[str, int]] = Field(
        default_factory=list, description="always empty: a dead letter has no dimensions"
    )
    alerts: list[Alert] = Field(
        default_factory=list,
        description="alerts of rules with group_by about this slice or a slice within it, newest first",
    )
