"""``privacy.mode`` where interactions enter judging (the convert stage, or the fused processor).

``all``: the interaction is masked before sampling, so every row, message and log line built from it
holds placeholders; a failure after that dead-letters the masked interaction (masked again here: the
same detector gives the same placeholders), so the dead letter carries no more than storage does; one
that cannot be masked or written out again is dead-lettered without a payload, never as read.
``judge``: the judge sees the masked interaction; the originals travel with it to the Evaluation. A
detector failure raises ``PrivacyError``: the interaction is dead-lettered with stage ``privacy``
(then the letter holds the message as read, as the ``interactions`` topic does; its ``dead_letters``
row holds no text).
"""

from __future__ import annotations

import logging

from pipeline.privacy.mask import PrivacyError, PrivacyGuard
from schemas.errors import InvalidMessage
from schemas.interaction import Interaction
from schemas.settings import Limits
from streams.codec import decode

log = logging.getLogger(__name__)


def letter_payload(
    guard: PrivacyGuard, raw: bytes | str, exc: Exception, limits: Limits
) -> bytes | str | None:
    """The payload of a dead letter for an interaction read from ``interactions``: masked in mode
    ``all``; the message as read when it does not decode (or the detector failed). An interaction that
    decodes but cannot be masked or written out again gets no payload (the reason says why, and the log):
    in mode ``all`` nothing of a readable interaction leaves unmasked."""
    if guard.mode != "all" or isinstance(exc, InvalidMessage | PrivacyError):
        return raw
    try:
        interaction = decode(raw, Interaction, limits)
    except Exception:  # not an interaction: the letter holds the message as read
        return raw
    assert isinstance(interaction, Interaction)
    try:
        return guard.for_storage(interaction).model_dump_json()
    except Exception as again:  # the failure being dead-lettered stays the one reported
        log.warning(
            "could not mask a dead letter's interaction (%s): the letter carries no payload",
            type(again).__name__,
        )
        return None
