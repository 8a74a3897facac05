"""Personal data: masking before the judge and storage (``GROUNDWATCH_PRIVACY__*``)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from schemas.settings.common import Share, variable_name

PrivacyMode = Literal["off", "judge", "all"]
#: what the detectors find without a spaCy model (Presidio's entity names)
PATTERN_ENTITIES: tuple[str, ...] = (
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "CREDIT_CARD",
    "IBAN_CODE",
    "IP_ADDRESS",
    "US_SSN",
    "URL",
)
#: what needs a spaCy model with a named-entity recogniser (``privacy.spacy_model``)
NLP_ENTITIES: tuple[str, ...] = ("PERSON", "LOCATION")
_ENTITY_NAME = r"^[A-Z][A-Z0-9_]{0,31}$"


class PrivacySettings(BaseModel):
    """Personal data in the texts (pipeline.privacy; docs/privacy.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: PrivacyMode = Field(
        "off",
        description=(
            "off: texts as they are; judge: the judge sees placeholders (<EMAIL_1>), ClickHouse keeps the "
            "originals; all: the judge, ClickHouse, dead letters, logs and the dashboard see placeholders "
            "only (needs the extra privacy)"
        ),
    )
    entities: list[str] = Field(
        default_factory=lambda: list(PATTERN_ENTITIES),
        description=(
            "Presidio entity types detected: "
            + ", ".join(PATTERN_ENTITIES)
            + "; "
            + " and ".join(NLP_ENTITIES)
            + " only with spacy_model"
        ),
    )
    patterns: dict[Annotated[str, Field(pattern=_ENTITY_NAME)], str] = Field(
        default_factory=dict,
        description=(
            'your own patterns, entity name -> regular expression (e.g. {"CUSTOMER_ID": "CUS-[0-9]{8}"}); '
            "a match becomes <CUSTOMER_ID_1>"
        ),
    )
    deny_lists: dict[Annotated[str, Field(pattern=_ENTITY_NAME)], list[str]] = Field(
        default_factory=dict,
        description='words always masked, entity name -> words (e.g. {"PROJECT": ["Bluebird"]})',
    )
    min_score: Share = Field(
        0.3, description="the least detector confidence masked (Presidio's score, 0 to 1)"
    )
    pseudonym_key: SecretStr | None = Field(
        None,
        description=(
            "a secret: with it a value's placeholder is a keyed hash (<EMAIL_3f9a0c2d1b7e>), the same in "
            "every interaction, so one person can be followed and erased (groundwatch erase --pseudonym) "
            "without the value being stored; none: numbered per interaction (<EMAIL_1>)"
        ),
    )
    spacy_model: str | None = Field(
        None,
        description=(
            "an installed spaCy model package (e.g. en_core_web_sm) for "
            + " and ".join(NLP_ENTITIES)
            + "; loaded from the environment, never downloaded; none: a blank English tokenizer and "
            "pattern detectors only"
        ),
    )

    @model_validator(mode="after")
    def _known_entities(self) -> PrivacySettings:
        allowed = set(PATTERN_ENTITIES) | (set(NLP_ENTITIES) if self.spacy_model else set())
        unknown = sorted(set(self.entities) - allowed)
        if unknown:
            hint = " (PERSON and LOCATION need spacy_model)" if set(unknown) & set(NLP_ENTITIES) else ""
            raise ValueError(
                f"{variable_name('privacy', 'entities')}: unknown {', '.join(unknown)}{hint}; "
                f"known: {', '.join(sorted(allowed))}"
            )
        for name, pattern in self.patterns.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{variable_name('privacy', 'patterns')} ({name}): {exc}") from None
        return self
