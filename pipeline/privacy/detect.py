"""Where personal data is in a text: Microsoft Presidio's recognisers (the extra ``privacy``).

Presidio's own pattern recognisers find e-mail addresses, phone numbers (Google's libphonenumber
port), payment cards (with the Luhn check), IBANs (with their checksum), IP addresses, US SSNs and
URLs; your own patterns and deny-lists (``privacy.patterns``, ``privacy.deny_lists``) are Presidio
pattern recognisers too. They are called directly, not through Presidio's ``AnalyzerEngine``: the
engine's spaCy pass costs more than all the patterns together and the patterns do not need it (what is
lost is the context boost: "phone" or "SSN" near a weak match does not raise its score). The phone
recogniser parses for eight regions in turn, the most expensive step by far, so it only sees the
stretches of a text with at least seven digits (``PHONE_CANDIDATE``), with some text either side, that
another recogniser has not already claimed (a card number, an IBAN). The other recognisers only run
on a text their cheap gate (``GATES``: an ``@``, four digits and three more...) lets through. A URL
finding that is two sentences glued together ("Spain.Club") is dropped, and so is the punctuation a URL
finding ends with. Mastercard's 2-series numbers, which Presidio's card patterns miss, are one more
pattern of its card recogniser (Luhn-checked).

Names and locations need a spaCy model with a named-entity recogniser, named by ``privacy.spacy_model``,
which must already be installed: it is loaded from the environment, never downloaded, and runs through
Presidio's ``AnalyzerEngine`` for PERSON and LOCATION only.

Nothing here reaches the network: tldextract (used by the e-mail recogniser) is pointed at the public
suffix list it ships instead of fetching one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from schemas.errors import DependencyMissing
from schemas.settings import NLP_ENTITIES, PrivacySettings

INSTALL_HINT = "install the extra: pip install 'groundwatch[privacy]'"
#: where a phone number may be: seven or more digits with separators between them
PHONE_CANDIDATE = re.compile(r"[+(]?\d(?:[\d\s().\-/]{0,3}\d){6,}")
#: characters of text kept either side of a phone candidate (the parser looks at what surrounds it)
PHONE_MARGIN = 8
#: a recogniser runs on a text only when its gate matches: each gate matches wherever one of Presidio's
#: patterns for that entity could (a superset), so a text it skips has nothing that recogniser finds
GATES: dict[str, re.Pattern[str]] = {
    "EMAIL_ADDRESS": re.compile(r"@"),
    "CREDIT_CARD": re.compile(r"\d{4}[- ]?\d{3}"),
    "IBAN_CODE": re.compile(r"[A-Za-z]{2}\d{2}"),
    "URL": re.compile(r"[A-Za-z0-9-]\.[A-Za-z]{2}"),
    "IP_ADDRESS": re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|[0-9A-Fa-f]{0,4}::?[0-9A-Fa-f]{0,4}:"),
    "US_SSN": re.compile(r"\d{3}[- .]?\d{2}[- .]?\d{4}|\d{5}-\d{4}|\d{3}-\d{6}"),
}
#: Mastercard's 2-series (2221-2720), which Presidio's card patterns leave out; Luhn-checked like the rest
MASTERCARD_2_SERIES = r"\b2(?:2[2-9]\d|[3-6]\d{2}|7[01]\d|720)[- ]?\d{4}[- ]?\d{4}[- ]?\d{4}\b"


@dataclass(frozen=True, order=True)
class Span:
    """One finding: ``text[start:end]`` is an ``entity`` (Presidio's name), with the detector's score."""

    start: int
    end: int
    entity: str
    score: float


def glued_sentences(value: str) -> bool:
    """A URL finding without a scheme, ``www.`` or a path whose last part starts with a capital is two
    sentences glued together ("Spain.Club", as scraped passages have them), not an address."""
    if "://" in value or "/" in value or value.lower().startswith("www."):
        return False
    return value.rsplit(".", 1)[-1][:1].isupper()


class Detector(Protocol):
    def detect(self, text: str) -> list[Span]: ...


def _offline_tldextract() -> None:
    """tldextract's default extractor fetches the public suffix list over the network on first use;
    use the snapshot it ships instead."""
    import tldextract.tldextract as tld

    tld.TLD_EXTRACTOR = tld.TLDExtract(suffix_list_urls=(), cache_dir=None, fallback_to_snapshot=True)


#: where an IBAN may start: a country code and two check digits, not inside a longer word
IBAN_START = re.compile(r"(?<![A-Z0-9])[A-Z]{2}[0-9]{2}")


def _iban_recognizer() -> Any:
    """Presidio's IbanRecognizer, plus a second reading of each place an IBAN may start, by the
    country's own format from Presidio's table (``iban_patterns.regex_per_country``, so its exact
    length) and Presidio's checksum. Presidio's generic pattern takes up to two groups of four after
    the number into the match and trims at most those, so an IBAN followed by a word such as "NQ301"
    or "IBAN" fails its checksum and is missed; read by its country's length it is found."""
    from presidio_analyzer import EntityRecognizer, RecognizerResult
    from presidio_analyzer.predefined_recognizers import IbanRecognizer
    from presidio_analyzer.predefined_recognizers.generic.iban_patterns import regex_per_country

    formats = {country: re.compile(regex) for country, regex in regex_per_country.items()}

    class CountryFormatIban(IbanRecognizer):
        def analyze(self, text: str, entities: list[str], *args: Any, **kwargs: Any) -> list[Any]:
            results: list[Any] = super().analyze(text, entities, *args, **kwargs)
            for start in IBAN_START.finditer(text):
                s = start.start()
                form = formats.get(text[s : s + 2])
                if form is None or any(r.start <= s < r.end for r in results):
                    continue
                found = form.match(text, s)
                if found is None:
                    continue
                e = s + len(found.group(0).rstrip(" "))
                if e < len(text) and text[e].isalnum():  # glued to more letters or digits: not this
                    continue
                if self.validate_result(text[s:e]) is True:
                    results.append(
                        RecognizerResult(
                            entity_type=self.supported_entities[0],
                            start=s,
                            end=e,
                            score=EntityRecognizer.MAX_SCORE,
                        )
                    )
            return results

    return CountryFormatIban()


def _ner_analyzer(model: str) -> Any:
    """Presidio's AnalyzerEngine over an installed spaCy model, with only its NER recogniser."""
    import spacy
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import SpacyNlpEngine
    from presidio_analyzer.predefined_recognizers import SpacyRecognizer

    try:
        nlp = spacy.load(model)
    except OSError as exc:
        raise DependencyMissing(
            f"spaCy model {model!r} is not installed (GROUNDWATCH_PRIVACY__SPACY_MODEL): install its "
            f"package pinned with its hash; it is never downloaded at run time ({exc})"
        ) from None

    # the model above, never engine.load(): Presidio's own load downloads a model that is missing
    engine: Any = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": model}])
    engine.nlp = {"en": nlp}
    registry = RecognizerRegistry(supported_languages=["en"])
    registry.add_recognizer(SpacyRecognizer(supported_entities=list(NLP_ENTITIES)))
    return AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=["en"])


class PresidioDetector:
    """Presidio's recognisers for the entities the settings name (see the module docstring)."""

    def __init__(self, settings: PrivacySettings) -> None:
        try:
            from presidio_analyzer import Pattern, PatternRecognizer
            from presidio_analyzer.predefined_recognizers import (
                CreditCardRecognizer,
                EmailRecognizer,
                IpRecognizer,
                PhoneRecognizer,
                UrlRecognizer,
                UsSsnRecognizer,
            )
        except ImportError:
            raise DependencyMissing(f"privacy.mode needs Presidio: {INSTALL_HINT}") from None
        _offline_tldextract()
        cards = [*CreditCardRecognizer.PATTERNS, Pattern("Mastercard 2-series", MASTERCARD_2_SERIES, 0.3)]
        predefined: dict[str, Any] = {
            "EMAIL_ADDRESS": EmailRecognizer,
            "CREDIT_CARD": lambda: CreditCardRecognizer(patterns=cards),
            "IBAN_CODE": _iban_recognizer,
            "IP_ADDRESS": IpRecognizer,
            "US_SSN": UsSsnRecognizer,
            "URL": UrlRecognizer,
        }
        wanted = set(settings.entities)
        self.recognizers: list[Any] = [cls() for name, cls in predefined.items() if name in wanted]
        for name, regex in settings.patterns.items():
            pattern = Pattern(name, regex, 1.0)
            self.recognizers.append(PatternRecognizer(supported_entity=name, patterns=[pattern]))
        for name, words in settings.deny_lists.items():
            if words:
                self.recognizers.append(PatternRecognizer(supported_entity=name, deny_list=list(words)))
        self.phone: Any = PhoneRecognizer() if "PHONE_NUMBER" in wanted else None
        ner = wanted & set(NLP_ENTITIES)
        self.ner_entities = sorted(ner)
        self.ner = _ner_analyzer(settings.spacy_model) if ner and settings.spacy_model else None
        self.min_score = settings.min_score

    def _phones(self, text: str, found: list[Span]) -> list[Span]:
        """Phone numbers in the digit runs that no other finding (a card, an IBAN) already covers."""
        assert self.phone is not None
        out = []
        for candidate in PHONE_CANDIDATE.finditer(text):
            if any(s.start <= candidate.start() and candidate.end() <= s.end for s in found):
                continue
            start = max(0, candidate.start() - PHONE_MARGIN)
            window = text[start : candidate.end() + PHONE_MARGIN]
            for r in self.phone.analyze(window, ["PHONE_NUMBER"], None):
                out.append(Span(start + r.start, start + r.end, r.entity_type, float(r.score)))
        return out

    @staticmethod
    def _gate_open(recognizer: Any, text: str) -> bool:
        gate = GATES.get(recognizer.supported_entities[0])
        return gate is None or gate.search(text) is not None

    def detect(self, text: str) -> list[Span]:
        if not text:
            return []
        found = [
            Span(r.start, r.end, r.entity_type, float(r.score))
            for recognizer in self.recognizers
            if self._gate_open(recognizer, text)
            for r in recognizer.analyze(text, recognizer.supported_entities, None)
        ]
        if self.phone is not None:
            found += self._phones(text, found)
        if self.ner is not None:
            found += [
                Span(r.start, r.end, r.entity_type, float(r.score))
                for r in self.ner.analyze(text, language="en", entities=self.ner_entities)
            ]
        out = []
        for s in found:
            if s.score < self.min_score:
                continue
            if s.entity == "URL":
                end = len(text[s.start : s.end].rstrip(".,;:!?)"))  # the sentence's stop is not the address's
                s = Span(s.start, s.start + end, s.entity, s.score)
                if not end or glued_sentences(text[s.start : s.end]):
                    continue
            out.append(s)
        return out
