"""Settings for tests: defaults plus what a test says, never the environment of the machine running it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from schemas.settings import Settings, settings_from_env


def make_settings(**sections: Mapping[str, Any] | BaseModel) -> Settings:
    """``make_settings(judge={"kind": "local"}, kafka=KafkaSettings(partitions=3))``: the defaults with
    these sections' fields changed; no ``GROUNDWATCH_*`` variable is read."""
    return settings_from_env({}).with_changes(**sections)
