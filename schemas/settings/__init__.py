"""Every setting of groundwatch, read from ``GROUNDWATCH_*`` environment variables.

Nested settings use ``__``: ``GROUNDWATCH_JUDGE__MODEL=gpt-4o-mini``,
``GROUNDWATCH_PIPELINE__NLI_MODE=per_hypothesis``. The numbers the seeds give (500/20 characters,
16 sentences a prompt, batches of 8, 32 in flight, first 2 sentences) are the defaults here.

A module per section (``judge``, ``kafka``, ...), the root model in ``root``, the environment source in
``source`` and the loading from an environment in ``env``; every public name is importable from here.
"""

from schemas.settings.alerts import AlertSettings
from schemas.settings.citations import CitationSettings
from schemas.settings.clickhouse import ClickHouseSettings
from schemas.settings.common import NLI_PAIRS, PREFIX, NliPair, Share, variable_name
from schemas.settings.conversations import ConversationSettings
from schemas.settings.dashboard import DASHBOARD_TOKEN_MIN_CHARS, DashboardSettings
from schemas.settings.dimensions import BUILTIN_DIMENSIONS, DimensionSettings
from schemas.settings.env import (
    describe_settings_error,
    setting_variables,
    settings_from_env,
    unknown_variables,
)
from schemas.settings.evaluators import EvaluatorsSettings
from schemas.settings.judge import JudgeKind, JudgeSettings, ModelPrice
from schemas.settings.kafka import KafkaSettings
from schemas.settings.labels import FeedbackRule, LabelsSettings
from schemas.settings.limits import Limits
from schemas.settings.pipeline import PipelineSettings
from schemas.settings.privacy import NLP_ENTITIES, PATTERN_ENTITIES, PrivacyMode, PrivacySettings
from schemas.settings.root import Settings
from schemas.settings.sampling import SamplingSettings
from schemas.settings.source import NOT_SETTINGS
from schemas.settings.split import SplitSettings
from schemas.settings.thresholds import THRESHOLD_KIND, AppThresholds, Thresholds
from schemas.settings.tools import ToolSettings
from schemas.settings.topics import TopicMethod, TopicsSettings
from schemas.settings.window import WindowSettings

__all__ = [
    "BUILTIN_DIMENSIONS",
    "DASHBOARD_TOKEN_MIN_CHARS",
    "NLI_PAIRS",
    "NLP_ENTITIES",
    "NOT_SETTINGS",
    "PATTERN_ENTITIES",
    "PREFIX",
    "THRESHOLD_KIND",
    "AlertSettings",
    "AppThresholds",
    "CitationSettings",
    "ClickHouseSettings",
    "ConversationSettings",
    "DashboardSettings",
    "DimensionSettings",
    "EvaluatorsSettings",
    "FeedbackRule",
    "JudgeKind",
    "JudgeSettings",
    "KafkaSettings",
    "LabelsSettings",
    "Limits",
    "ModelPrice",
    "NliPair",
    "PipelineSettings",
    "PrivacyMode",
    "PrivacySettings",
    "SamplingSettings",
    "Settings",
    "Share",
    "SplitSettings",
    "Thresholds",
    "ToolSettings",
    "TopicMethod",
    "TopicsSettings",
    "WindowSettings",
    "describe_settings_error",
    "setting_variables",
    "settings_from_env",
    "unknown_variables",
    "variable_name",
]
