"""Work that spans interactions, handed to the worker that owns it: the ``touches`` topic's message.

After each write the sink says which windows and conversations got rows, as touches keyed so that one
partition, and so one worker of the group, owns each: a series' windows by (app, model), a conversation
by (app, model, conversation_id). Only that partition's owner closes them (``streams.ownership``).
"""

from __future__ import annotations

import json
from datetime import datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator


class Touch(BaseModel):
    """Rows were written for a series' windows (no ``conversation_id``) or for one conversation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    app: str = Field(description="the app of the rows written")
    model: str = Field(description="the model of the rows written")
    conversation_id: str | None = Field(
        default=None, min_length=1, description="the conversation that got turns; none: the series' windows"
    )
    at: list[AwareDatetime] = Field(
        min_length=1,
        description="windows: the latest event time written into each window touched; a conversation: "
        "its latest turn's event time written",
    )
    ends: bool = Field(default=False, description="a turn written marks the conversation's end")
    watermark: AwareDatetime = Field(
        description="the latest event time of the series among the rows of the write (moves its "
        "watermark: windows and conversations close on event time)"
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Touch:
        if self.ends and self.conversation_id is None:
            raise ValueError("ends marks a conversation's end: it needs a conversation_id")
        return self

    @property
    def key(self) -> str:
        return touch_key(self.app, self.model, self.conversation_id)

    @property
    def last(self) -> datetime:
        return max(self.at)


def touch_key(app: str, model: str, conversation_id: str | None = None) -> str:
    """The Kafka key of a series' windows or of one conversation (its partition owns that work)."""
    parts = [app, model] if conversation_id is None else [app, model, conversation_id]
    return json.dumps(parts, separators=(",", ":"))  # ASCII: any app name, even one not UTF-8-safe
