"""End users' thumbs as labels: a verdict an end user gave on an answer (``metadata.feedback``: "up",
"down", 1, -1, ...) mapped by a rule (``labels.end_user_feedback``) to a label of the rule's kind (one
of ``schemas.label_kinds.LABEL_TARGETS``), source ``end_user``, reviewer ``end_user``. Such labels are
kept apart from reviewers': the judge's agreement counts them only with ``labels.include_end_user``, and
they never take an interaction out of the review queue. A rule of a conversation kind (``resolved``)
labels the turn's conversation (its conversation_id); a turn of no conversation gives none.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from schemas.evaluation import Evaluation
from schemas.label import CONVERSATION_KINDS, Label, LabelSource
from schemas.settings import FeedbackRule

END_USER = "end_user"


def verdict_text(value: Any) -> str | None:
    """A metadata value as the rule matches it: text trimmed and in lower case, whole numbers as their
    digits, booleans as true/false; None for anything else (a list, an object, a fraction)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return value.strip().lower()
    return None


def feedback_labels(evaluations: Iterable[Evaluation], rule: FeedbackRule, now: datetime) -> list[Label]:
    """The end-user labels ``rule`` gives these evaluations' interactions (none for an interaction
    without the metadata key or with a verdict the rule does not list)."""
    labels = []
    for evaluation in evaluations:
        interaction = evaluation.interaction
        if interaction is None or rule.key not in interaction.metadata:
            continue
        text = verdict_text(interaction.metadata[rule.key])
        value = rule.values.get(text) if text is not None else None
        if value is None:
            continue
        target = evaluation.conversation_id if rule.kind in CONVERSATION_KINDS else evaluation.interaction_id
        if not target:
            continue
        labels.append(
            Label(
                interaction_id=target,
                kind=rule.kind,
                value=value,
                reviewer=END_USER,
                source=LabelSource.END_USER,
                labeled_at=now,
            )
        )
    return labels
