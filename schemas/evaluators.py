"""Your own evaluators, declared in a YAML or JSON file (``evaluators.file``; docs/evaluators.md).

The file holds ``evaluators:``, a list of entries, each with a ``name``, a ``version`` and a ``kind``:

- ``pattern``: regular expressions (``patterns``) and/or whole words (``words``) looked for in one or more
  fields of the interaction (``field`` or ``fields``: answer, question, ground_truth, contexts, history);
  it flags an interaction (score 1) when ANY of them matches (``flag_when: any``) or when NONE does
  (``flag_when: none``), else scores 0; the ``regex`` module runs them (Python's ``re`` syntax) on the first
  ``max_chars`` of each field, within ``timeout_s``;
- ``python``: an importable callable (``function: "module:function"``; the evaluators file's own folder
  is on the import path) called with the ``schemas.interaction.Interaction`` off the event loop, under
  ``timeout_s``; it returns a float in [0, 1], a bool, or a mapping with ``score`` (either) and ``reason``;
- ``rubric``: an LLM judge asked the user's ``instructions`` over the fields it shows (``fields``), sent
  through the judge client the core verdicts use (retries, cache, cost); ``output`` ``pass_fail`` scores
  pass 1 and fail 0, ``score_1_5`` scores (s - 1) / 4, each with the judge's short reason.

An entry may be scoped like a sampling rule (``app``, ``model``, ``when``) and sampled (``sample_rate``, by
the same stable hash of the interaction id, salted with the evaluator's name). Each evaluator becomes the
catalogue metric ``custom.<name>`` (``metric``): a rate for a flag (pattern, pass_fail, a python
evaluator with ``output: pass_fail``), a mean for a score; a flag's evaluator is also the label kind
``custom.<name>`` (``label_targets``), so reviewers can label it and its agreement and corrected rate
are measured like the core judge's.
"""

from __future__ import annotations

from typing import Annotated, Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from schemas.label_kinds import CUSTOM_KEYS, LabelTarget, custom_label_target
from schemas.metrics import Metric, MetricKind
from schemas.sampling import Conditions

#: the interaction's fields an evaluator may read
EvaluatorField = Literal["answer", "question", "ground_truth", "contexts", "history"]
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,47}$"
#: the prefix of every custom metric in the catalogue
CUSTOM_PREFIX = "custom."


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Evaluator(_Strict):
    name: str = Field(
        pattern=NAME_PATTERN,
        description="identifier (lower case, digits, _; up to 48 characters): the metric is custom.<name>",
    )
    version: str = Field(
        min_length=1,
        max_length=32,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="bump it when the evaluator changes: stored with every score, part of a rubric's cache "
        "key and judge identity, so a changed check shows as a new series instead of a silent jump",
    )
    label: str | None = Field(None, max_length=80, description="chart title (default: the name)")
    app: str | None = Field(None, description="only interactions of this app (none: every app)")
    model: str | None = Field(None, description="only interactions of this model (none: every model)")
    when: Conditions = Field(
        default_factory=Conditions, description="conditions as in the sampling rules (none: always)"
    )
    sample_rate: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="share of the interactions in scope it scores (stable hash of the id)",
    )
    higher_is_better: bool | None = Field(
        None,
        description="the good direction of its metric, for alerts and colours (default: a pattern's flag "
        "is bad, a rubric's pass and a python score are good)",
    )

    def good_when_high(self) -> bool:
        return self.higher_is_better if self.higher_is_better is not None else self._default_high()

    def _default_high(self) -> bool:
        return True

    def is_rate(self) -> bool:
        return True

    @property
    def identity(self) -> str:
        """``<name>@<version>``: what is stored with each score and keys a rubric's cached verdicts."""
        return f"{self.name}@{self.version}"

    def metric(self) -> Metric:
        """Its catalogue entry ``custom.<name>`` (schemas.metrics.custom_metric)."""
        kind = MetricKind.RATE if self.is_rate() else MetricKind.MEAN
        return custom_metric(self.name, kind, self.label or self.name, not self.good_when_high())

    def missing_metric(self) -> Metric:
        """``custom.<name>.missing``: the interactions it failed to score (a total)."""
        return custom_missing_metric(self.name, self.label or self.name)

    def coverage_metric(self) -> Metric:
        """``custom.<name>.coverage``: the share of the judged interactions it scored (falls when it fails
        or goes silent)."""
        return custom_coverage_metric(self.name, self.label or self.name)


class PatternEvaluator(_Evaluator):
    """Flags an interaction when any (or none) of its patterns matches the chosen fields."""

    kind: Literal["pattern"] = Field(description="pattern")
    field: EvaluatorField | None = Field(None, description="the one field searched (or give fields)")
    fields: list[EvaluatorField] = Field(default_factory=list, description="the fields searched")
    patterns: list[str] = Field(
        default_factory=list, description="regular expressions (Python syntax), searched anywhere in a field"
    )
    words: list[str] = Field(
        default_factory=list, description="words or phrases matched whole (not inside a longer word)"
    )
    case_sensitive: bool = Field(False, description="match case as written (default: ignore case)")
    flag_when: Literal["any", "none"] = Field(
        "any", description="any: flag when one pattern or word matches; none: flag when nothing matches"
    )
    max_chars: int = Field(
        20_000,
        ge=1,
        le=1_000_000,
        description="how much of each field is searched: its first max_chars characters (a match further "
        "on is not seen)",
    )
    timeout_s: float = Field(
        0.1,
        gt=0.0,
        le=5.0,
        description="how long its patterns may search one interaction, all fields together; a pattern "
        "that backtracks past it gives a missing score (reason timeout) instead of holding the worker",
    )

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for i, pattern in enumerate(patterns):
            try:
                regex.compile(pattern)
            except regex.error as exc:
                raise ValueError(f"pattern {i} {pattern!r} is not a regular expression: {exc}") from None
        return patterns

    @field_validator("words")
    @classmethod
    def _words(cls, words: list[str]) -> list[str]:
        if any(not w.strip() for w in words):
            raise ValueError("a word is empty")
        return words

    @model_validator(mode="after")
    def _complete(self) -> PatternEvaluator:
        if self.field is not None and self.fields:
            raise ValueError("give field or fields, not both")
        if self.field is None and not self.fields:
            raise ValueError("give field (or fields): answer, question, ground_truth, contexts, history")
        if not self.patterns and not self.words:
            raise ValueError("give patterns, words or both")
        return self

    @property
    def searched(self) -> list[EvaluatorField]:
        return [self.field] if self.field is not None else list(self.fields)

    def _default_high(self) -> bool:
        return False


class PythonEvaluator(_Evaluator):
    """A function of yours: ``module:function``, called with the Interaction."""

    kind: Literal["python"] = Field(description="python")
    function: str = Field(
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="module:function, importable (the evaluators file's folder is on the import path)",
    )
    output: Literal["pass_fail", "score"] = Field(
        "score", description="pass_fail: a bool (a rate of true); score: a float in [0, 1] (a mean)"
    )
    timeout_s: float = Field(
        2.0, gt=0.0, le=300.0, description="how long one call may run; past it the score is missing"
    )

    def is_rate(self) -> bool:
        return self.output == "pass_fail"


class RubricEvaluator(_Evaluator):
    """An LLM judge of your instructions, through the core judge's client."""

    kind: Literal["rubric"] = Field(description="rubric")
    instructions: str = Field(
        min_length=1,
        max_length=8000,
        description="what the judge checks, in plain words (what passes and what fails, or what 1 and 5 "
        "mean); the interaction's fields are shown to it fenced, as data",
    )
    output: Literal["pass_fail", "score_1_5"] = Field(
        description="pass_fail: pass 1, fail 0 (a rate of passes); score_1_5: (s - 1) / 4 (a mean)"
    )
    fields: list[EvaluatorField] = Field(
        default_factory=lambda: list[EvaluatorField](("question", "answer")),
        min_length=1,
        description="the interaction's fields the judge sees",
    )
    timeout_s: float = Field(
        60.0, gt=0.0, le=600.0, description="how long its judge call (retries included) may take"
    )

    def is_rate(self) -> bool:
        return self.output == "pass_fail"


Evaluator = Annotated[PatternEvaluator | PythonEvaluator | RubricEvaluator, Field(discriminator="kind")]


class EvaluatorsFile(_Strict):
    """The evaluators file: ``evaluators``, a list of entries with unique names."""

    evaluators: list[Evaluator] = Field(default_factory=list, description="your evaluators")

    @model_validator(mode="after")
    def _unique(self) -> EvaluatorsFile:
        names = [e.name for e in self.evaluators]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"evaluator names must be unique: {', '.join(twice)}")
        return self

    def metrics(self) -> tuple[Metric, ...]:
        """Each evaluator's three catalogue entries: its score, its missing scores and its coverage."""
        return tuple(
            m for e in self.evaluators for m in (e.metric(), e.missing_metric(), e.coverage_metric())
        )

    def label_targets(self) -> tuple[LabelTarget, ...]:
        """The label kind ``custom.<name>`` of each pattern and pass/fail evaluator (a score evaluator has
        none), the first ones with the dashboard's keys 1/2, 3/4, ..."""
        flags = [e for e in self.evaluators if e.is_rate()]
        keys = [*CUSTOM_KEYS, *([None] * len(flags))]
        return tuple(
            custom_label_target(e.name, e.label or e.name, e.kind, keys[i]) for i, e in enumerate(flags)
        )

    def score_names(self) -> tuple[str, ...]:
        """The score evaluators' names (a mean; no label kind)."""
        return tuple(e.name for e in self.evaluators if not e.is_rate())


def custom_metric(name: str, kind: MetricKind, label: str, lower_is_better: bool) -> Metric:
    """The catalogue entry of a custom evaluator: its window value and count live in the Map columns
    ``custom_values`` and ``custom_scored`` of window_aggregates, under its name."""
    return Metric(
        name=CUSTOM_PREFIX + name,
        label=label,
        short=name[:8],
        kind=kind,
        source="custom_scores",
        count_column=f"custom_scored['{name}']",
        custom_key=name,
        lower_is_better=lower_is_better,
    )


def custom_coverage_metric(name: str, label: str) -> Metric:
    """A custom evaluator's coverage per window: the share of the judged interactions it scored (its count
    in ``custom_scored`` over the window's ``judged``); it falls when the evaluator fails or goes silent."""
    return Metric(
        name=f"{CUSTOM_PREFIX}{name}.coverage",
        label=f"{label}: coverage",
        short=f"{name[:6]}%",
        kind=MetricKind.RATE,
        source="custom_scores",
        count_column="judged",
        events_column=f"custom_scored['{name}']",
        custom_key=name,
        coverage=True,
        lower_is_better=False,
    )


def custom_missing_metric(name: str, label: str) -> Metric:
    """A custom evaluator's missing scores per window (``custom_missing`` of window_aggregates)."""
    return Metric(
        name=f"{CUSTOM_PREFIX}{name}.missing",
        label=f"{label}: scores missing",
        short=f"{name[:6]}?",
        kind=MetricKind.SUM,
        sum_columns=(f"custom_missing['{name}']",),
        custom_key=name,
        unit="count",
    )
