"""The names of the worker's stages: where a failure happened (a dead letter's ``stage``, a
``StageError``'s). A leaf module: ``schemas.errors`` and ``schemas.results`` both read it."""

from __future__ import annotations

from typing import Literal

Stage = Literal[
    "convert",
    "pronouns",
    "nli",
    "refusal",
    "relevance",
    "join",
    "sink",
    "validate",
    "evaluate",
    "otlp",
    "labels",
    "privacy",
    "custom",
    "arguments",
    "conversation",
    "touches",
]
