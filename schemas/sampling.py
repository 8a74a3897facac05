"""Sampling and routing rules, and judge budgets, from a YAML/JSON file (``sampling.rules_file``).

Which interactions go to the judge: the rules are tried in file order and the FIRST whose scope (``app``,
``model``) and conditions (``when``) all match decides (``action``): ``judge`` always judges, ``skip``
never does, ``sample`` judges the share ``rate`` of the interactions it matches. An interaction no rule
matches is sampled at ``sampling.default_rate`` (a setting, 1.0 by default: every interaction). The
share is decided by a stable hash of the interaction id (``pipeline.sampling.stable_fraction``), so a
replay, or another worker, decides the same. A judge budget per app (tokens per minute, USD per day)
then skips what would go over it. ``pipeline.sampling`` applies all of it; docs in docs/sampling.md,
an example in deploy/sampling/rules.example.yaml.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SampleAction = Literal["judge", "skip", "sample"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LengthRange(_Strict):
    """A range of answer lengths in characters, both ends inclusive (either may be left out)."""

    min: int | None = Field(None, ge=0, description="shortest answer that matches (characters)")
    max: int | None = Field(None, ge=0, description="longest answer that matches (characters)")

    @model_validator(mode="after")
    def _ordered(self) -> LengthRange:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is over max ({self.max})")
        return self


class Conditions(_Strict):
    """What an interaction must show for a rule to match; every condition given must hold (AND)."""

    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="metadata key (a dotted path for nested objects: user.tier) -> the value it must "
        "have; a list of values: any of them. Fields an interaction sends that groundwatch does not know "
        "(feedback, tags...) are kept in its metadata, so they match here too",
    )
    tags: list[str] = Field(
        default_factory=list,
        description="matches when metadata.tags (a list of strings, or one string) holds ANY of these",
    )
    answer_chars: LengthRange | None = Field(None, description="the answer's length lies in this range")
    has_ground_truth: bool | None = Field(
        None, description="true: only interactions with a ground truth; false: only those without"
    )


class SamplingRule(_Strict):
    """One rule: a scope, conditions and what to do with the interactions that match."""

    name: str = Field(
        min_length=1,
        description="named in the decision's reason (always:, never:, sampled:, sampled_out:<name>)",
    )
    action: SampleAction = Field(
        description="judge: always judge; skip: never judge; sample: judge the share `rate` of them"
    )
    rate: float | None = Field(
        None, ge=0.0, le=1.0, description="sample: the share judged, 0-1 (by a stable hash of the id)"
    )
    app: str | None = Field(None, description="only interactions of this app (none: every app)")
    model: str | None = Field(None, description="only interactions of this model (none: every model)")
    when: Conditions = Field(default_factory=Conditions, description="conditions (none: always matches)")

    @model_validator(mode="after")
    def _rate_for_sample(self) -> SamplingRule:
        if self.action == "sample" and self.rate is None:
            raise ValueError(f"rule {self.name!r}: action sample needs a rate (0-1)")
        if self.action != "sample" and self.rate is not None:
            raise ValueError(f"rule {self.name!r}: rate goes with action sample only")
        return self


class JudgeBudget(_Strict):
    """A ceiling on what judging one app may spend; past it interactions are skipped with the reason
    ``budget:tokens_per_minute`` or ``budget:cost_per_day`` until the spend falls back under it. Counted per
    worker process from the evaluations it writes (see docs/sampling.md)."""

    app: str | None = Field(
        None, description="the app (none: every app without a budget of its own, each apart)"
    )
    tokens_per_minute: int | None = Field(
        None, ge=0, description="judge tokens (input + output) over the last 60 seconds"
    )
    cost_per_day_usd: float | None = Field(None, ge=0.0, description="judge cost in USD over the UTC day")

    @model_validator(mode="after")
    def _some_limit(self) -> JudgeBudget:
        if self.tokens_per_minute is None and self.cost_per_day_usd is None:
            raise ValueError("a budget needs tokens_per_minute, cost_per_day_usd or both")
        return self


class SamplingRules(_Strict):
    """The sampling rules file: ``rules`` (first match wins) and ``budgets`` (one per app at most)."""

    rules: list[SamplingRule] = Field(
        default_factory=list, description="tried in order; the first match decides"
    )
    budgets: list[JudgeBudget] = Field(default_factory=list, description="judge budgets per app")
    salt: str = Field(
        "",
        description="mixed into the hash of the id: change it to sample another subset at the same rate",
    )

    @model_validator(mode="after")
    def _unique(self) -> SamplingRules:
        names = [r.name for r in self.rules]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"rule names must be unique: {', '.join(dupes)}")
        apps = [b.app for b in self.budgets]
        twice = sorted({str(a) for a in apps if apps.count(a) > 1})
        if twice:
            raise ValueError(f"one budget per app: {', '.join(twice)} (None = the default budget)")
        return self


class Decision(_Strict):
    """Judge an interaction or not, and why. Judged: ``always:<rule>`` (a judge rule) or
    ``sampled:<rule>`` / ``sampled:default`` (picked by a rate). Skipped: ``never:<rule>`` (a skip rule),
    ``sampled_out:<rule>`` / ``sampled_out:default`` (not picked by a rate), ``budget:tokens_per_minute``
    or ``budget:cost_per_day`` (the app's judge budget is spent)."""

    judge: bool
    reason: str
