"""OpenTelemetry exports (OTLP/JSON ``ExportTraceServiceRequest`` and ``ExportLogsServiceRequest``) as
they arrive on Kafka."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class OtlpTraces(BaseModel):
    """Only the top level is checked here; ``pipeline.otlp`` reads the spans (and names what it cannot)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    resourceSpans: list[dict[str, Any]] = Field(min_length=1)  # the OTLP field name


class OtlpLogs(BaseModel):
    """Only the top level is checked here; ``pipeline.otlp`` reads the log records."""

    model_config = ConfigDict(extra="allow", frozen=True)

    resourceLogs: list[dict[str, Any]] = Field(min_length=1)  # the OTLP field name
