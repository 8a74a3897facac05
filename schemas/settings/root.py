"""The root of the settings: one field per section, each section's model in a module of its own.

A new section is a module with its model, a field here, and a name in ``schemas/settings/__init__.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from schemas.settings.alerts import AlertSettings
from schemas.settings.citations import CitationSettings
from schemas.settings.clickhouse import ClickHouseSettings
from schemas.settings.common import PREFIX, variable_name
from schemas.settings.conversations import ConversationSettings
from schemas.settings.dashboard import DashboardSettings
from schemas.settings.dimensions import DimensionSettings
from schemas.settings.evaluators import EvaluatorsSettings
from schemas.settings.judge import JudgeSettings
from schemas.settings.kafka import KafkaSettings
from schemas.settings.labels import LabelsSettings
from schemas.settings.limits import Limits
from schemas.settings.pipeline import PipelineSettings
from schemas.settings.privacy import PrivacySettings
from schemas.settings.sampling import SamplingSettings
from schemas.settings.source import CheckedEnvSource
from schemas.settings.split import SplitSettings
from schemas.settings.tools import ToolSettings
from schemas.settings.topics import TopicsSettings
from schemas.settings.window import WindowSettings


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    @model_validator(mode="after")
    def _texts_fit(self) -> Settings:
        return self._texts_fit_a_message()

    def _texts_fit_a_message(self) -> Settings:
        """Each text limit, at 2 bytes a character (the text and its sentences in the converted message;
        4 for what is not ASCII), admits a message the producer can send."""
        budget = self.kafka.max_message_bytes
        for field in ("max_question_chars", "max_answer_chars", "max_ground_truth_chars"):
            chars = getattr(self.limits, field)
            if 2 * chars > budget:
                raise ValueError(
                    f"{variable_name('limits', field)} ({chars:,}) admits a text whose converted message "
                    f"(the text and its sentences, {2 * chars:,} bytes or more) is over "
                    f"{variable_name('kafka', 'max_message_bytes')} ({budget:,}): lower the one or raise the "
                    "other (and the broker's message.max.bytes with it)"
                )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The environment is read by ``CheckedEnvSource``: a GROUNDWATCH_* variable that names no
        setting stops the load."""
        return init_settings, CheckedEnvSource(settings_cls), dotenv_settings, file_secret_settings

    limits: Limits = Field(default_factory=Limits, description="size limits on incoming interactions")
    split: SplitSettings = Field(default_factory=SplitSettings, description="sentence conversion")
    judge: JudgeSettings = Field(
        default_factory=JudgeSettings, description="the judge (LLM endpoint, local model or lexical)"
    )
    pipeline: PipelineSettings = Field(
        default_factory=PipelineSettings, description="the evaluation pipeline"
    )
    kafka: KafkaSettings = Field(
        default_factory=KafkaSettings, description="Kafka connection, topics and stream processing"
    )
    clickhouse: ClickHouseSettings = Field(
        default_factory=ClickHouseSettings, description="ClickHouse connection, retention and sink"
    )
    window: WindowSettings = Field(default_factory=WindowSettings, description="tumbling windows")
    topics: TopicsSettings = Field(
        default_factory=TopicsSettings, description="topics discovered from the questions (docs/topics.md)"
    )
    conversations: ConversationSettings = Field(
        default_factory=ConversationSettings, description="conversation rollups and their metrics"
    )
    alerts: AlertSettings = Field(default_factory=AlertSettings, description="alert rules and webhook")
    sampling: SamplingSettings = Field(
        default_factory=SamplingSettings, description="sampling rules and judge budgets"
    )
    dashboard: DashboardSettings = Field(
        default_factory=DashboardSettings, description="the built-in dashboard"
    )
    labels: LabelsSettings = Field(
        default_factory=LabelsSettings, description="people's labels, the review queue and agreement"
    )
    dimensions: DimensionSettings = Field(
        default_factory=DimensionSettings, description="metadata dimensions evaluations are sliced by"
    )
    privacy: PrivacySettings = Field(
        default_factory=PrivacySettings, description="personal data: masking before the judge and storage"
    )
    tools: ToolSettings = Field(
        default_factory=ToolSettings, description="tool calls: their results as evidence, their arguments"
    )
    citations: CitationSettings = Field(
        default_factory=CitationSettings, description="the answers' citations: read, removed, checked"
    )
    evaluators: EvaluatorsSettings = Field(
        default_factory=EvaluatorsSettings, description="your own evaluators (custom.<name> metrics)"
    )

    def with_changes(self, **sections: Mapping[str, Any] | BaseModel) -> Settings:
        """A validated copy with fields of some sections changed (settings are frozen), e.g.
        ``settings.with_changes(judge={"kind": "local"}, kafka={"broker": url})``. Fields set before
        stay set and the changed ones become set (per-judge defaults look at which fields were set)."""
        data: dict[str, Any] = {
            name: getattr(self, name).model_dump(exclude_unset=True) for name in self.model_fields_set
        }
        for name, fields in sections.items():
            if name not in type(self).model_fields:
                raise ValueError(f"no settings section {name!r}")
            values = fields.model_dump(exclude_unset=True) if isinstance(fields, BaseModel) else dict(fields)
            data[name] = {**data.get(name, {}), **values}
        return type(self).from_values(data)

    @classmethod
    def from_values(cls, data: Mapping[str, Any]) -> Settings:
        """Settings from these values and the defaults only, never the environment (``model_validate``
        of a BaseSettings reads it): each section is validated by its own model."""
        unknown = sorted(set(data) - set(cls.model_fields))
        if unknown:
            raise ValueError(f"unknown settings sections: {', '.join(unknown)}")
        sections: dict[str, Any] = {}
        problems: list[Any] = []
        for name, value in data.items():
            model = cls.model_fields[name].annotation
            assert isinstance(model, type) and issubclass(model, BaseModel)
            try:
                sections[name] = model.model_validate(value)
            except ValidationError as exc:  # named as the whole Settings would name them
                problems += [{**e, "loc": (name, *e["loc"])} for e in exc.errors()]
        if problems:
            raise ValidationError.from_exception_data(cls.__name__, problems)
        built = cls.model_construct(_fields_set=set(sections), **sections)
        try:  # the checks across sections (model_construct runs none)
            return built._texts_fit_a_message()
        except ValueError as exc:
            error = InitErrorDetails(
                type="value_error", loc=("limits",), input=data.get("limits"), ctx={"error": exc}
            )
            raise ValidationError.from_exception_data(cls.__name__, [error]) from None
