"""Placeholders for personal data, consistent within an interaction, and their reversal.

Every text of an interaction (the question, the history's turns and speakers' names, the contexts and
their document names, the answer, the ground truth and every string of its metadata, nested ones
included) is searched by one ``Detector``; each value found is
replaced by a placeholder named after its kind, the same everywhere in the interaction: the e-mail
address in the context and the same address in the answer are both ``<EMAIL_1>``, so entailment still
sees that they agree. With a pseudonym key the number is a keyed hash of the value (HMAC-SHA256), the
same in every interaction (``<EMAIL_3f9a0c2d1b7e>``), so one person's interactions can be found and
erased without the value being stored.

Where ``privacy.mode`` says (``PrivacyGuard``): ``all`` masks the interaction before anything is
built from it (a sampled-out row too); ``judge`` masks what the judge sees and keeps the values behind
the placeholders beside it (``Masked.originals``), which ``restore_evaluation`` puts back before the
evaluation is stored. A detector that fails raises ``PrivacyError`` (stage ``privacy``): the
interaction is dead-lettered, never judged unmasked.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.privacy.detect import Detector, PresidioDetector, Span
from schemas.errors import StageError
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.label import Label
from schemas.settings import PrivacySettings

#: the placeholder's name for each of Presidio's entity types (others keep their own name)
LABELS: dict[str, str] = {
    "EMAIL_ADDRESS": "EMAIL",
    "PHONE_NUMBER": "PHONE",
    "CREDIT_CARD": "CARD",
    "IBAN_CODE": "IBAN",
    "IP_ADDRESS": "IP",
    "US_SSN": "SSN",
    "URL": "URL",
    "PERSON": "PERSON",
    "LOCATION": "LOCATION",
}
#: hex digits of a keyed pseudonym (48 bits: collisions within one deployment are negligible)
PSEUDONYM_HEX = 12
#: a keyed pseudonym, with or without its brackets (``groundwatch erase --pseudonym``)
PSEUDONYM = re.compile(rf"^<?([A-Z][A-Z0-9_]*_[0-9a-f]{{{PSEUDONYM_HEX}}})>?$")

Text = Callable[[str], str]


class PrivacyError(StageError):
    """The detector failed on an interaction: it is dead-lettered (stage ``privacy``), never sent on
    with its texts unmasked."""

    def __init__(self, message: str) -> None:
        super().__init__("privacy", message)


def choose(spans: Sequence[Span]) -> list[Span]:
    """Non-overlapping spans, the most confident first (then the longest): an e-mail address (1.0) wins
    over the URL-looking part inside it (0.5), an SSN (0.5) over a phone number (0.4) reaching past it."""
    kept: list[Span] = []
    for span in sorted(spans, key=lambda s: (-s.score, -(s.end - s.start), s.start)):
        if all(span.end <= k.start or span.start >= k.end for k in kept):
            kept.append(span)
    return sorted(kept)


def _map_value(value: Any, fn: Text) -> Any:
    """``fn`` applied to every string in a metadata value, however deep in objects and lists."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_value(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_value(v, fn) for v in value]
    return value


def map_interaction(interaction: Interaction, fn: Text) -> Interaction:
    """The interaction with ``fn`` applied to each of its texts: question, history (each turn's content
    and speaker's name), contexts (each passage's text and document name), tool steps (every string of
    their arguments, their results), answer, ground truth, and every string in its metadata, nested ones
    included; ids, times, app, model and tool names are kept."""
    return interaction.model_copy(
        update={
            "question": fn(interaction.question),
            "history": [
                t.model_copy(
                    update={"content": fn(t.content), "name": None if t.name is None else fn(t.name)}
                )
                for t in interaction.history
            ],
            "contexts": [
                p.model_copy(
                    update={"text": fn(p.text), "document": None if p.document is None else fn(p.document)}
                )
                for p in interaction.contexts
            ],
            "steps": [
                s.model_copy(
                    update={
                        "arguments": _map_value(s.arguments, fn),
                        "result": None if s.result is None else fn(s.result),
                    }
                )
                for s in interaction.steps
            ],
            "answer": fn(interaction.answer),
            "ground_truth": None if interaction.ground_truth is None else fn(interaction.ground_truth),
            "metadata": {k: _map_value(v, fn) for k, v in interaction.metadata.items()},
        }
    )


def texts_of(interaction: Interaction) -> list[str]:
    """The interaction's texts in the order ``map_interaction`` visits them."""
    seen: list[str] = []

    def keep(text: str) -> str:
        seen.append(text)
        return text

    map_interaction(interaction, keep)
    return seen


def map_evaluation(evaluation: Evaluation, fn: Text, interaction: Interaction | None) -> Evaluation:
    """The evaluation with ``fn`` applied to its statement texts, reasons, unsupported claims, tool
    evidence passages and ungrounded argument values, and the given interaction in place of its own."""
    pairs = [
        pair.model_copy(
            update={
                "hypotheses": [
                    h.model_copy(
                        update={
                            "hypothesis": fn(h.hypothesis),
                            "statements": [
                                s.model_copy(update={"statement": fn(s.statement), "reason": fn(s.reason)})
                                for s in h.statements
                            ],
                        }
                    )
                    for h in pair.hypotheses
                ]
            }
        )
        for pair in evaluation.pairs
    ]
    claims = [fn(c) for c in evaluation.unsupported_claims]
    evidence = [
        p.model_copy(update={"text": fn(p.text), "document": None if p.document is None else fn(p.document)})
        for p in evaluation.evidence
    ]
    return evaluation.model_copy(
        update={
            "pairs": pairs,
            "unsupported_claims": claims,
            "interaction": interaction,
            "evidence": evidence,
            "ungrounded_argument_values": [fn(v) for v in evaluation.ungrounded_argument_values],
        }
    )


def without_texts(evaluation: Evaluation) -> Evaluation:
    """What ``clickhouse.store_payload=false`` stores: scores, flags, counts and verdicts, no text."""
    return map_evaluation(evaluation, lambda _: "", None).model_copy(update={"unsupported_claims": []})


def _substitute(mapping: Mapping[str, str]) -> Text:
    if not mapping:
        return lambda s: s
    pattern = re.compile("|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True)))
    return lambda s: pattern.sub(lambda m: mapping[m.group(0)], s) if s else s


def restore_interaction(interaction: Interaction, originals: Mapping[str, str]) -> Interaction:
    """Mode ``judge``: a masked interaction with its values put back (what a dead letter offers for
    replay: the message as it was sent)."""
    return map_interaction(interaction, _substitute(originals)) if originals else interaction


def restore_evaluation(evaluation: Evaluation, originals: Mapping[str, str]) -> Evaluation:
    """Mode ``judge``: the evaluation of a masked interaction with the values put back everywhere."""
    if not originals:
        return evaluation
    back = _substitute(originals)
    interaction = None if evaluation.interaction is None else map_interaction(evaluation.interaction, back)
    return map_evaluation(evaluation, back, interaction)


@dataclass(frozen=True)
class Masked:
    """A masked interaction; ``originals`` maps each placeholder to the value it replaced."""

    interaction: Interaction
    originals: dict[str, str] = field(default_factory=dict)

    @property
    def found(self) -> int:
        return len(self.originals)


class Masker:
    """Masks interactions with one detector (see the module docstring)."""

    def __init__(self, detector: Detector, pseudonym_key: bytes | None = None) -> None:
        self.detector = detector
        self.key = pseudonym_key

    def _name(self, label: str, value: str, taken: set[str], counts: dict[str, int]) -> str:
        if self.key is not None:
            digest = hmac.new(self.key, f"{label}\x00{value}".encode(), hashlib.sha256).hexdigest()
            return f"<{label}_{digest[:PSEUDONYM_HEX]}>"
        while True:  # skip a number whose placeholder the texts already hold
            counts[label] = counts.get(label, 0) + 1
            name = f"<{label}_{counts[label]}>"
            if name not in taken:
                return name

    def mask(self, interaction: Interaction) -> Masked:
        masked, originals = self._mask_texts(texts_of(interaction))
        if not originals:
            return Masked(interaction)
        return Masked(map_interaction(interaction, lambda s: masked.get(s, s)), originals)

    def mask_text(self, text: str) -> str:
        """One text on its own (a reviewer's note), with placeholders of its own."""
        masked, _ = self._mask_texts([text])
        return masked.get(text, text)

    def _mask_texts(self, texts: list[str]) -> tuple[dict[str, str], dict[str, str]]:
        """Each text that holds personal data -> its masked form, and each placeholder -> its value;
        one value has one placeholder across all the texts."""
        try:
            found = [choose(self.detector.detect(text)) for text in texts]
        except Exception as exc:  # the texts must not go on unmasked
            raise PrivacyError(f"detector failed ({type(exc).__name__})") from exc
        if not any(found):
            return {}, {}
        blob = "\n".join(texts)
        taken = {m.group(0) for m in re.finditer(r"<[A-Z][A-Z0-9_]*_[0-9a-f]+>", blob)}
        names: dict[tuple[str, str], str] = {}
        counts: dict[str, int] = {}
        masked: dict[str, str] = {}
        for text, spans in zip(texts, found, strict=True):
            if not spans or text in masked:
                continue
            out, last = [], 0
            for span in spans:
                label = LABELS.get(span.entity, span.entity)
                value = text[span.start : span.end]
                key = (label, value)
                if key not in names:
                    names[key] = self._name(label, value, taken, counts)
                out += [text[last : span.start], names[key]]
                last = span.end
            masked[text] = "".join([*out, text[last:]])
        return masked, {name: value for (_, value), name in names.items()}


class PrivacyGuard:
    """``privacy.mode`` applied where an interaction enters judging: ``for_storage`` before sampling
    (mode ``all``: every row is built from the masked interaction), ``for_judge`` before the judge
    (mode ``judge``: the placeholders' values come back in ``Masked.originals``)."""

    def __init__(self, settings: PrivacySettings, masker: Masker | None = None) -> None:
        self.mode = settings.mode
        self.masker = masker
        if masker is None and self.mode != "off":
            key = settings.pseudonym_key
            self.masker = Masker(
                PresidioDetector(settings), key.get_secret_value().encode() if key is not None else None
            )

    def for_storage(self, interaction: Interaction) -> Interaction:
        if self.mode != "all" or self.masker is None:
            return interaction
        return self.masker.mask(interaction).interaction

    def label_for_storage(self, label: Label) -> Label:
        """Mode ``all``: a label's free-text note masked before it is stored (every way labels come
        in: the labels topic, the dashboard, ``groundwatch labels import``)."""
        if self.mode != "all" or self.masker is None or not label.note:
            return label
        return label.model_copy(update={"note": self.masker.mask_text(label.note)})

    def for_judge(self, interaction: Interaction) -> Masked:
        if self.mode != "judge" or self.masker is None:
            return Masked(interaction)  # off, or all (masked already by for_storage)
        return self.masker.mask(interaction)

    def text_for_judge(self, text: str) -> str:
        """A stored text (a conversation's turn) as the judge may see it: masked under mode ``judge``
        (under ``all`` it was stored masked)."""
        if self.mode != "judge" or self.masker is None:
            return text
        return self.masker.mask_text(text)
