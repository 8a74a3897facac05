"""What travels on each topic: the one registry of topic -> message model. The worker's processors
decode their inputs with it and ``groundwatch schema`` prints it (with the files and rows users write
or read, ``FILE_AND_ROW_MODELS``)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from pydantic import BaseModel

from schemas.alert import Alert, AlertRule
from schemas.deadletter import DeadLetter
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.label import Label
from schemas.otlp import OtlpLogs, OtlpTraces
from schemas.results import Converted, JudgeResult
from schemas.topic_model import TopicModel
from schemas.touch import Touch
from schemas.window import WindowAggregate


@dataclass(frozen=True)
class TopicMessages:
    """Each topic (by its name without ``kafka.topic_prefix``) and the model of its messages."""

    interactions: type[Interaction] = Interaction
    converted: type[Converted] = Converted
    judged: type[JudgeResult] = JudgeResult
    evaluations: type[Evaluation] = Evaluation
    alerts: type[Alert] = Alert
    deadletter: type[DeadLetter] = DeadLetter
    otlp: type[OtlpTraces] = OtlpTraces
    otlp_logs: type[OtlpLogs] = OtlpLogs
    labels: type[Label] = Label
    touches: type[Touch] = Touch  # internal: work keyed to the partition that owns it
    # internal: each refit's topic model (streams.topic_models), read whole by every process
    topic_models: type[TopicModel] = TopicModel

    def by_topic(self) -> dict[str, type[BaseModel]]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


TOPIC_MESSAGES = TopicMessages()

#: what users write or read besides the topics: the alert rules file's rules, a window_aggregates row
FILE_AND_ROW_MODELS: tuple[type[BaseModel], ...] = (AlertRule, WindowAggregate)


def message_models() -> dict[str, type[BaseModel]]:
    """Every message model by its name: the topics' and ``FILE_AND_ROW_MODELS``."""
    models = [*TOPIC_MESSAGES.by_topic().values(), *FILE_AND_ROW_MODELS]
    return {m.__name__: m for m in models}
