"""Pydantic models for every message groundwatch reads or writes: the one source of truth."""

from pydantic import BaseModel

from schemas.alert import Alert, AlertMetric, AlertRule, AlertRules
from schemas.deadletter import DeadLetter
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction, Passage
from schemas.results import (
    VERDICT_SCORE,
    Converted,
    HypothesisResult,
    JudgeCall,
    NliResult,
    PairName,
    PairResult,
    RefusalResult,
    Stage,
    StatementVerdict,
    Verdict,
)
from schemas.settings import Settings
from schemas.window import WindowAggregate

ALL_MESSAGES: dict[str, type[BaseModel]] = {
    "Interaction": Interaction,
    "Converted": Converted,
    "NliResult": NliResult,
    "RefusalResult": RefusalResult,
    "Evaluation": Evaluation,
    "WindowAggregate": WindowAggregate,
    "Alert": Alert,
    "AlertRule": AlertRule,
    "DeadLetter": DeadLetter,
}

__all__ = [
    "ALL_MESSAGES",
    "VERDICT_SCORE",
    "Alert",
    "AlertMetric",
    "AlertRule",
    "AlertRules",
    "Converted",
    "DeadLetter",
    "Evaluation",
    "HypothesisResult",
    "Interaction",
    "JudgeCall",
    "NliResult",
    "PairName",
    "PairResult",
    "Passage",
    "RefusalResult",
    "Settings",
    "Stage",
    "StatementVerdict",
    "Verdict",
    "WindowAggregate",
]
