"""A message that could not be processed, with where and why."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from schemas.results import Stage


class DeadLetter(BaseModel):
    # stable for one failed message (streams.codec.dead_letter_id): a redelivered message dead-lettered
    # again gets the same id, so its ``dead_letters`` row is replaced, not added; "" in a letter that
    # carries none (its row is keyed by the letter's bytes)
    dead_letter_id: str = ""
    stage: Stage
    error_type: str
    error: str  # human-readable: which field and why, or the judge's last error
    source_topic: str | None = None
    interaction_id: str | None = None
    # the original message, as text (undecodable bytes are base64 with a "base64:" prefix); cut to
    # kafka.deadletter_max_bytes when longer (then ``truncated`` and the whole's sha256 and length)
    payload: str
    payload_bytes: int | None = None  # UTF-8 length of the whole payload
    payload_sha256: str | None = None  # of the whole payload (set when truncated)
    truncated: bool = False
    # the Interaction JSON when known (the interaction a Converted carried): replay it onto interactions
    original: str | None = None
    failed_at: datetime  # on the worker's clock (streams.codec.dead_letter)
