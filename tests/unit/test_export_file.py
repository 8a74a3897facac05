"""Production to dataset: an exported line is the interaction, people's majority labels and this judge's
verdict as a peer, in the format `groundwatch eval` reads."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pipeline.dataset import parse_line
from pipeline.export_file import export_line
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.label import Label
from schemas.settings import Limits
from tests.fixtures.messages import EVALUATED_AT

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _evaluation(hallucination: bool | None) -> Evaluation:
    interaction = Interaction.model_validate(
        {"interaction_id": "x", "timestamp": T0.isoformat(), "app": "a", "model": "m",
         "question": "When?", "contexts": ["At ten."], "answer": "At ten."}
    )  # fmt: skip
    return Evaluation(evaluated_at=EVALUATED_AT,
        interaction_id="x", timestamp=T0, app="a", model="m", judge="lexical", judge_model="lexical-v1",
        hallucination=hallucination, interaction=interaction,
    )  # fmt: skip


def _label(value: int, reviewer: str, source: str = "reviewer") -> Label:
    return Label.model_validate(
        {"interaction_id": "x", "kind": "grounded", "value": value, "reviewer": reviewer, "source": source,
         "labeled_at": EVALUATED_AT}
    )  # fmt: skip


def test_majority_label_and_the_judge_as_a_peer_round_trip_through_the_eval_reader() -> None:
    labels = [_label(1, "ann"), _label(1, "bob"), _label(0, "cy"), _label(0, "u", "end_user")]
    line = export_line(_evaluation(hallucination=True), labels, correct_threshold=0.5)
    assert line is not None
    assert line["labels"] == {"grounded": 1}  # 2 to 1; the end user left out
    assert line["peers"] == {"lexical:lexical-v1": 0}  # flagged a hallucination: not grounded
    parsed = parse_line(json.dumps(line), 1, Limits())
    assert not hasattr(parsed, "reason"), parsed
    assert parsed.interaction.labels == {"grounded": 1}  # type: ignore[union-attr]


def test_a_tie_gives_no_label_and_no_peer() -> None:
    line = export_line(_evaluation(False), [_label(1, "ann"), _label(0, "bob")], correct_threshold=0.5)
    assert line is not None and "labels" not in line and "peers" not in line
