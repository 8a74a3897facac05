"""Answerability and refusal groundedness of one interaction (docs/answerability.md).

Whether the question can be answered from its documents, decided by the first source that knows, and
named in ``answerable_source``:

1. ``label``: an ``answerable`` label of 1 or 0 on the interaction (``labels``), as in a labeled file;
2. ``ground_truth``: a ground truth the refusal stage judged (``ground_truth_refusal`` not None: a blank
   ground truth is not judged and decides nothing); one that is itself a refusal ("the documents do not
   say") makes the question unanswerable, any other answerable;
3. ``contexts``: with ``pipeline.no_evidence_unanswerable`` (off by default), no evidence at all (no
   context with text, no tool-result passage: the test of ``no_evidence``) makes the question
   unanswerable: nothing retrieved can support an answer. Off, because an event without contexts may
   come from an app that does not send what it retrieved (docs/answerability.md measures it). Evidence
   that is there decides nothing: whether it holds an answer would have to be read off the verdicts on
   the answer being scored, which would mark answered questions answerable and leave refused ones
   unknown, so over-refusal could never be seen;
4. otherwise ``unknown``: answerable is None.

With the answer's refusal flag, the Trust-Eval cases (``pipeline.metrics.trust_eval``; Song et al., 2025)
each interaction is in, as flags that are None outside the figure's denominator:

- ``over_refusal``: an answerable question, refused (its rate: 1 - answerable recall);
- ``answered_unanswerable``: an unanswerable question, answered (its rate: 1 - reject recall);
- ``refused_unanswerable``: reject recall's case, over unanswerable questions;
- ``answered_answerable``: answerable recall's case, over answerable questions;
- ``justified_refusal``: reject precision's case, over refusals of questions whose answerability is known;
- ``justified_answer``: answerable precision's case, over answers of such questions.

A window's rate of each (schemas/metrics.py) is then Trust-Eval's figure over the window's interactions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from schemas.evaluation import AnswerableSource
from schemas.interaction import Passage


class Answerability(BaseModel):
    """Whether the question is answerable from its documents, which source said so, and the refusal
    groundedness flags it gives with the answer's refusal flag (the module docstring)."""

    model_config = ConfigDict(frozen=True)

    answerable: bool | None = Field(None, description="answerable from its documents; None: not known")
    answerable_source: AnswerableSource = Field("unknown", description="what decided answerable")
    over_refusal: bool | None = Field(None, description="answerable question: refused")
    answered_unanswerable: bool | None = Field(None, description="unanswerable question: answered")
    refused_unanswerable: bool | None = Field(None, description="unanswerable question: refused")
    answered_answerable: bool | None = Field(None, description="answerable question: answered")
    justified_refusal: bool | None = Field(
        None, description="refusal of a question whose answerability is known: it was unanswerable"
    )
    justified_answer: bool | None = Field(
        None, description="answer to a question whose answerability is known: it was answerable"
    )


def has_evidence(contexts: Sequence[Passage], tool_passages: Sequence[Passage]) -> bool:
    """Evidence to judge an answer against: a context with text, or a tool-result passage."""
    return bool(tool_passages) or any(p.text.strip() for p in contexts)


def nothing_retrieved(
    contexts: Sequence[Passage], tool_passages: Sequence[Passage], no_evidence_unanswerable: bool
) -> bool:
    """The contexts say the question is unanswerable: there is no evidence at all and the setting
    ``pipeline.no_evidence_unanswerable`` says an empty retrieval means the documents hold nothing."""
    return no_evidence_unanswerable and not has_evidence(contexts, tool_passages)


def answerable_from(
    labels: Mapping[str, int] | None, ground_truth_refusal: bool | None, nothing: bool
) -> tuple[bool | None, AnswerableSource]:
    """Whether the question is answerable and the source that decided (the module docstring's order);
    ``nothing``: ``nothing_retrieved``."""
    label = (labels or {}).get("answerable")
    if label in (0, 1):
        return bool(label), "label"
    if ground_truth_refusal is not None:
        return not ground_truth_refusal, "ground_truth"
    if nothing:
        return False, "contexts"
    return None, "unknown"


def answerability(
    labels: Mapping[str, int] | None,
    ground_truth_refusal: bool | None,
    nothing: bool,
    answer_refusal: bool | None,
) -> Answerability:
    """Answerability and the refusal groundedness flags of one interaction; every flag is None when the
    answer's refusal flag is (a blank answer, an unjudged one), as Trust-Eval leaves such a case out."""
    answerable, source = answerable_from(labels, ground_truth_refusal, nothing)
    if answerable is None or answer_refusal is None:
        return Answerability(answerable=answerable, answerable_source=source)
    refused = answer_refusal
    return Answerability(
        answerable=answerable,
        answerable_source=source,
        over_refusal=refused if answerable else None,
        answered_answerable=(not refused) if answerable else None,
        answered_unanswerable=None if answerable else not refused,
        refused_unanswerable=None if answerable else refused,
        justified_refusal=(not answerable) if refused else None,
        justified_answer=answerable if not refused else None,
    )
