"""The review queue's draw: which interactions are put before a reviewer, and with what chance.

An interaction is drawn when ``stable_fraction(id, "review")`` (the SHA-256 draw that sampling uses,
with a salt of its own) falls under its inclusion probability: ``labels.review_rate`` for every judged
interaction, and at least ``labels.review_near_threshold_rate`` for one whose context entailment lies
within ``labels.review_near_threshold_band`` of the hallucination threshold (the judge's unsure cases).
The same id is drawn in every process, and the probability travels with the label, so agreement can be
weighted back to the whole traffic (``pipeline.metrics.agreement``). ``REVIEW_FRACTION_SQL`` is the same
draw in ClickHouse, so the queue is read without scanning every interaction.
"""

from __future__ import annotations

from pipeline.sampling import stable_fraction
from schemas.settings import LabelsSettings

SALT = "review"

#: ``stable_fraction(interaction_id, SALT)`` in ClickHouse SQL (big-endian first 8 bytes of the SHA-256)
REVIEW_FRACTION_SQL = (
    f"reinterpretAsUInt64(reverse(substring(SHA256(concat('{SALT}', char(0), interaction_id)), 1, 8)))"
    " / pow(2, 64)"
)


def near_threshold(context_entailment: float | None, threshold: float, settings: LabelsSettings) -> bool:
    return context_entailment is not None and abs(context_entailment - threshold) <= (
        settings.review_near_threshold_band
    )


def inclusion_probability(
    context_entailment: float | None, threshold: float, settings: LabelsSettings
) -> float:
    """The chance the queue draws an interaction with this context entailment."""
    if settings.review_near_threshold_rate > 0 and near_threshold(context_entailment, threshold, settings):
        return max(settings.review_rate, settings.review_near_threshold_rate)
    return settings.review_rate


def drawn(interaction_id: str, probability: float, salt: str = SALT) -> bool:
    """Whether the queue draws this interaction at this probability (the same answer everywhere). Another
    ``salt`` makes an independent draw (``groundwatch labels import --sample`` uses one, so an imported
    sample never empties the review queue)."""
    return stable_fraction(interaction_id, salt) < probability
