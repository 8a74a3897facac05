"""Every error groundwatch raises on purpose, in one hierarchy (catch ``GroundwatchError`` for all).

    GroundwatchError
    ├── ConfigError            a setting, argument or rules file is wrong; the message names it
    │   ├── SettingError       a GROUNDWATCH_* variable names no setting or cannot be read
    │   ├── KafkaAuthError     the Kafka security settings do not fit together
    │   └── DashboardConfigError  the dashboard may not be served as asked
    ├── InvalidMessage         a message does not decode or validate; the message says which field, why
    ├── JudgeError             the judge gave no verdict after its retries
    │   └── StageError         one stage of an evaluation failed (``stage``)
    ├── JoinTimeout            an interaction's parts did not all arrive in time
    ├── ClickHouseUnavailable  the ClickHouse server does not answer (the message names it, no password)
    ├── BrokerUnavailable      the Kafka broker does not answer (the message names it)
    └── DependencyMissing      an installable part is missing; the message says how to install it
        ├── PunktMissingError  the punkt sentence data
        └── LocalModelError    the local model could not be assembled, verified or served

In the stream, processors raise; the worker turns an error into a dead letter with its stage, the reason
and the original message in one place (``streams.context.StreamContext.send_dead``).
"""

from __future__ import annotations

from schemas.stages import Stage


class GroundwatchError(Exception):
    """Base of every error groundwatch raises on purpose."""


class ConfigError(GroundwatchError, ValueError):
    """A setting, command-line argument or rules file is wrong; the message names it and says why."""


class SettingError(ConfigError):
    """A ``GROUNDWATCH_*`` variable names no setting, or its value cannot be read; the message names the
    variable (and the closest setting's)."""


class KafkaAuthError(ConfigError):
    """The Kafka security settings do not make sense together; the message says which setting to fix."""


class DashboardConfigError(ConfigError):
    """The dashboard's settings do not allow serving it as asked."""


class InvalidMessage(GroundwatchError):
    """A message that is not valid JSON or does not validate against its model; the text says why."""

    def __init__(self, message: str, interaction_id: str | None = None) -> None:
        super().__init__(message)
        self.interaction_id = interaction_id


class MessageTooLarge(GroundwatchError):
    """An output message over the producer's ``kafka.max_message_bytes``: its input is dead-lettered."""


class JudgeError(GroundwatchError):
    """The judge could not produce a verdict (after its retries); the message says why."""


class StageError(JudgeError):
    """A stage of the evaluation failed; ``stage`` names it, the message says why."""

    def __init__(self, stage: Stage, message: str) -> None:
        super().__init__(f"{stage}: {message}")
        self.stage: Stage = stage


class JoinTimeout(GroundwatchError):
    """An interaction's parts did not all arrive within the join timeout."""


class ClickHouseUnavailable(GroundwatchError):
    """The ClickHouse server could not be reached or refused the connection; the message names it
    (never with its password) and says why."""


class BrokerUnavailable(GroundwatchError):
    """The Kafka broker could not be reached; the message names it and says why."""


class DependencyMissing(GroundwatchError):
    """Something installable is missing; the message says how to install it."""


class PunktMissingError(DependencyMissing, LookupError):
    """The punkt_tab sentence data is not installed; the message says how to install it."""


class LocalModelError(DependencyMissing, RuntimeError):
    """The local model could not be assembled, verified, or served; the message says what to do."""


class ConversationError(GroundwatchError, ValueError):
    """A conversation cannot be rolled up (it has no turns)."""


class LocalStackError(GroundwatchError, RuntimeError):
    """A part of the local stack (``groundwatch demo``: Tansu, the worker, a report) stopped or failed."""
