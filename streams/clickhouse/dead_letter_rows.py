"""Dead letters as ``dead_letters`` rows (deploy/clickhouse/003): what the dashboards count per stage.

A row keeps where and why a message failed, not its payload (that stays on the dead-letter topic, where
it can be replayed). ``dead_letter_id`` is the letter's own id, stable for one failed message
(``streams.codec.dead_letter_id``: where it was read and the stage), so a letter sent again for a
redelivered message, or read twice from the topic, replaces its row; a letter without one (an empty
id, or not a DeadLetter at all) is keyed by the sha256 of its bytes.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from schemas.deadletter import DeadLetter
from schemas.json_input import json_value
from schemas.utc import utc
from schemas.validation import describe_validation_error

DEAD_LETTER_COLUMNS = [
    "dead_letter_id",
    "failed_at",
    "stage",
    "error_type",
    "error",
    "source_topic",
    "interaction_id",
    "app",
    "model",
    "payload_bytes",
    "truncated",
]

#: longest app or model name taken from a failed message (longer ones are not names)
_NAME_CHARS = 200


def _app_model(letter: DeadLetter) -> tuple[str, str]:
    """The app and model the failed message named, when it was a JSON object that named them."""
    for text in (letter.original, letter.payload):
        if not text:
            continue
        ok, data = json_value(text)
        if not ok:
            continue
        if isinstance(data, dict) and "interaction" in data and isinstance(data["interaction"], dict):
            data = data["interaction"]  # a Converted message carries its interaction
        if isinstance(data, dict):
            app, model = data.get("app"), data.get("model")
            if isinstance(app, str) and isinstance(model, str):
                return app[:_NAME_CHARS], model[:_NAME_CHARS]
    return "", ""


def dead_letter_row(raw: bytes, received_at: datetime) -> list[Any]:
    """The row of one message read from the dead-letter topic. A message that is not a DeadLetter (written
    there by something else) still gets a row, stage ``validate``, so it is counted, never dropped; its time
    is ``received_at`` (the record's timestamp, the same at every redelivery, so the row is the same too)."""
    digest = hashlib.sha256(raw).hexdigest()
    try:
        letter = DeadLetter.model_validate_json(raw)
    except (ValidationError, ValueError, RecursionError) as exc:
        # what the message holds stays out of the row: it was never masked
        why = type(exc).__name__
        if isinstance(exc, ValidationError):
            why = describe_validation_error(exc, values=False)
        when = utc(received_at)
        return [digest, when, "validate", "InvalidDeadLetter", why[:4000], "", None, "", "", len(raw), 0]
    app, model = _app_model(letter)
    return [
        letter.dead_letter_id or digest,
        utc(letter.failed_at),
        letter.stage,
        letter.error_type,
        letter.error[:4000],
        letter.source_topic or "",
        letter.interaction_id,
        app,
        model,
        letter.payload_bytes or len(letter.payload.encode("utf-8")),
        int(letter.truncated),
    ]
