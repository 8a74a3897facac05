"""The label kinds and what each measures the judge on (``LABEL_TARGETS``): the one registry that
``schemas.label``, the settings (``labels.end_user_feedback.kind``), calibration, the offline report and
the dashboards read.

Your own evaluators (``schemas.evaluators``) add a label kind each, ``custom.<name>``, once the
evaluators file is loaded (``install_custom_kinds``): a pattern's or a pass/fail evaluator's score is a
flag, and its label says whether the flag (the match, the pass) is right; a score evaluator (a mean) has
none. ``label_target`` and ``label_targets`` read the fixed kinds and the installed ones together.

Every label kind names what the judge flags for it: the judge's *flag* is the event a dashboard rate
counts (a hallucination, an incorrect answer, a refusal), and the label's *condition* is that event as
the person saw it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema


class LabelKind(StrEnum):
    GROUNDED = "grounded"  # 1 = the answer is supported by its context
    CORRECT = "correct"  # 1 = the answer agrees with the ground truth
    ANSWER_REFUSAL = "answer_refusal"  # 1 = the answer is a refusal
    GROUND_TRUTH_REFUSAL = "ground_truth_refusal"  # 1 = the ground truth is a refusal
    RESOLVED = "resolved"  # 1 = the conversation ended resolved (a label on a conversation_id)


class LabelTarget(BaseModel):
    """What a label kind measures the judge on: the event the judge flags and the rate that counts it."""

    model_config = ConfigDict(frozen=True)

    kind: LabelKind | str = Field(description="a LabelKind, or custom.<name> for an evaluator of yours")
    condition: str = Field(description="the event, in words: what a flag claims ('hallucinated')")
    condition_value: int = Field(description="the label value (0 or 1) that means the condition holds")
    flag: str = Field(
        description="the evaluations column that holds the judge's flag, or 'answer_entails_ground_truth' "
        "(flagged when under the correct threshold)"
    )
    rate_metric: str | None = Field(
        description="the metric catalogue's rate counting the flag (schemas.metrics), None when there is none"
    )
    question: str = Field(description="what a reviewer is asked, on the dashboard's interaction page")
    yes_text: str = Field(description="the answer of value 1, in words")
    no_text: str = Field(description="the answer of value 0, in words")
    keys: tuple[str, str] | None = Field(
        None, description="the dashboard's keys for 1 and 0; None: not asked on the dashboard"
    )
    threshold: tuple[str, Literal["hallucination", "correct"]] | None = Field(
        None,
        description="the score the judge's flag thresholds and that threshold's key in "
        "pipeline.app_thresholds (what groundwatch calibrate chooses); None: the flag is the judge's own",
    )
    cascade_band: tuple[str, str] | None = Field(
        None,
        description="the settings of the cascade judge's unsure band on the thresholded score (low, high), "
        "which groundwatch calibrate proposes; None: the cascade does not band this kind",
    )
    scores: tuple[str, ...] = Field(
        (),
        description="the scores the offline report measures against this label (pipeline.report.SCORES), "
        "the primary first; empty: none",
    )
    evaluator: Literal["pattern", "python", "rubric"] | None = Field(
        None,
        description="a custom evaluator's kind (its label kind is custom.<name>); None for the fixed kinds",
    )


LABEL_TARGETS: dict[LabelKind, LabelTarget] = {
    LabelKind(t.kind): t
    for t in (
        LabelTarget(
            kind=LabelKind.GROUNDED,
            condition="hallucinated",
            condition_value=0,
            flag="hallucination",
            rate_metric="hallucination_rate",
            question="Grounded in its context?",
            yes_text="grounded",
            no_text="hallucinated",
            keys=("g", "h"),
            threshold=("context_entailment", "hallucination"),
            cascade_band=("GROUNDWATCH_JUDGE__CASCADE_UNSURE_LOW", "GROUNDWATCH_JUDGE__CASCADE_UNSURE_HIGH"),
            scores=("context_entailment", "grounded_precision"),
        ),
        LabelTarget(
            kind=LabelKind.CORRECT,
            condition="incorrect",
            condition_value=0,
            flag="answer_entails_ground_truth",
            rate_metric=None,
            question="Agrees with the ground truth?",
            yes_text="correct",
            no_text="incorrect",
            keys=("c", "x"),
            threshold=("answer_entails_ground_truth", "correct"),
            cascade_band=(
                "GROUNDWATCH_JUDGE__CASCADE_GROUND_TRUTH_UNSURE_LOW",
                "GROUNDWATCH_JUDGE__CASCADE_GROUND_TRUTH_UNSURE_HIGH",
            ),
            scores=("answer_entails_ground_truth", "ground_truth_entails_answer", "agreement"),
        ),
        LabelTarget(
            kind=LabelKind.ANSWER_REFUSAL,
            condition="answer is a refusal",
            condition_value=1,
            flag="answer_refusal",
            rate_metric="answer_refusal_rate",
            question="Is the answer a refusal?",
            yes_text="refusal",
            no_text="answers",
            keys=("r", "a"),
            scores=("answer_refusal",),
        ),
        LabelTarget(
            kind=LabelKind.GROUND_TRUTH_REFUSAL,
            condition="ground truth is a refusal",
            condition_value=1,
            flag="ground_truth_refusal",
            rate_metric="ground_truth_refusal_rate",
            question="Is the ground truth a refusal?",
            yes_text="refusal",
            no_text="answers",
        ),
        LabelTarget(
            kind=LabelKind.RESOLVED,
            condition="ended unresolved",
            condition_value=0,
            flag="ended_unresolved",
            rate_metric="conversation_unresolved_rate",
            question="Did the conversation end resolved?",
            yes_text="resolved",
            no_text="unresolved",
        ),
    )
}

#: the label kinds given on a conversation (the label's interaction_id holds the conversation_id) and
#: measured against the conversation's rollup (``conversations``), not an interaction's verdicts
CONVERSATION_KINDS: frozenset[LabelKind] = frozenset({LabelKind.RESOLVED})

#: the label kind whose agreement corrects a catalogue rate
KIND_OF_RATE: dict[str, LabelKind] = {
    t.rate_metric: LabelKind(t.kind) for t in LABEL_TARGETS.values() if t.rate_metric is not None
}


# ---- your own evaluators' label kinds -----------------------------------------------------------------

#: a custom evaluator's label kind: ``custom.<name>`` (schemas.evaluators.NAME_PATTERN after the prefix)
CUSTOM_KIND_PATTERN = r"^custom\.[a-z][a-z0-9_]{0,47}$"
#: the dashboard's keys of the first custom kinds, in the evaluators file's order (the others get buttons)
CUSTOM_KEYS: tuple[tuple[str, str], ...] = (("1", "2"), ("3", "4"), ("5", "6"), ("7", "8"))
_FIXED = frozenset(k.value for k in LabelKind)
#: the installed evaluators' label kinds, by kind; None for a score evaluator (no label kind)
_CUSTOM: dict[str, LabelTarget | None] = {}


def custom_label_target(
    name: str, label: str, evaluator: Literal["pattern", "python", "rubric"], keys: tuple[str, str] | None
) -> LabelTarget:
    """The label kind ``custom.<name>`` of a pattern or pass/fail evaluator: value 1 says its score-1
    outcome (a pattern's flag, a pass) is what the person sees; its rate ``custom.<name>`` counts them."""
    flagged = evaluator == "pattern"
    return LabelTarget(
        kind=f"custom.{name}",
        condition=f"{label}: flagged" if flagged else f"{label}: passes",
        condition_value=1,
        flag=f"custom_scores['{name}']",
        rate_metric=f"custom.{name}",
        question=f"{label}: should it be flagged?" if flagged else f"{label}: does it pass?",
        yes_text="flag" if flagged else "pass",
        no_text="no flag" if flagged else "fail",
        keys=keys,
        evaluator=evaluator,
    )


def install_custom_kinds(targets: Iterable[LabelTarget], scores: Iterable[str] = ()) -> None:
    """Make these custom label kinds (and only these) known; ``scores``: the score evaluators' names,
    whose labels are refused with that reason."""
    _CUSTOM.clear()
    _CUSTOM.update((f"custom.{name}", None) for name in scores)
    _CUSTOM.update((str(t.kind), t) for t in targets)


def label_targets() -> dict[str, LabelTarget]:
    """Every label kind's target: the fixed ones, then the installed custom evaluators'."""
    custom = {kind: t for kind, t in _CUSTOM.items() if t is not None}
    return {**{str(k): t for k, t in LABEL_TARGETS.items()}, **custom}


def label_target(kind: str) -> LabelTarget:
    """A fixed or installed custom label kind's target; KeyError when there is none."""
    target = LABEL_TARGETS.get(LabelKind(kind)) if kind in _FIXED else _CUSTOM.get(kind)
    if target is None:
        raise KeyError(f"no label kind {kind!r}")
    return target


def check_label_kind(value: object) -> object:
    """A label kind as given: a LabelKind member, or an installed custom evaluator's kind; anything else
    one reason why not (a ValueError)."""
    if not isinstance(value, str):
        return value  # the union's own type error
    if value in _FIXED:
        return LabelKind(value)
    if value in _CUSTOM:
        if _CUSTOM[value] is None:
            raise ValueError(
                f"{value} is a score evaluator (a mean): only pattern and pass/fail evaluators take labels"
            )
        return value
    if value.startswith("custom."):
        mine = [k for k, t in _CUSTOM.items() if t is not None]
        if not _CUSTOM:
            raise ValueError(f"{value}: no evaluators file is loaded (GROUNDWATCH_EVALUATORS__FILE)")
        raise ValueError(
            f"{value}: no such evaluator in the evaluators file; its label kinds: {', '.join(mine) or 'none'}"
        )
    known = [*(k.value for k in LabelKind), *(k for k, t in _CUSTOM.items() if t is not None)]
    raise ValueError(f"unknown label kind {value!r}: one of {', '.join(known)}")


#: a label kind in a model: a LabelKind member, or ``custom.<name>`` of an evaluator in the evaluators file
AnyLabelKind = Annotated[
    LabelKind | str,
    BeforeValidator(check_label_kind),
    WithJsonSchema(
        {
            "anyOf": [
                {"enum": [k.value for k in LabelKind]},
                {"type": "string", "pattern": CUSTOM_KIND_PATTERN},
            ]
        }
    ),
]
