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
from schemas.topics import TOPIC_MESSAGES, message_models
from schemas.window import WindowAggregate

#: every message model by name (``schemas.topics``: the topics' models, the rules file's, a window's row)
ALL_MESSAGES: dict[str, type[BaseModel]] = message_models()

__all__ = [
    "ALL_MESSAGES",
    "TOPIC_MESSAGES",
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
