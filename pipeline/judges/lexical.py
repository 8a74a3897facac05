"""LexicalJudge: a fast, deterministic judge that needs no LLM (judge kind ``lexical``).

Entailment
    Each hypothesis is split into statements (clauses, see ``split_statements``). A statement's score is
    the weighted share of its content tokens (``pipeline.text_normalise.tokens_of``: stemmed words,
    names, canonical numbers) found in the premise: a number weighs 3, a name (capitalised token) 2, a
    word 1; a word that shares a 5-letter prefix with a premise word counts half. Numbers match when equal
    after normalisation ("67 million" = "67,000,000") or when the statement's number is the premise's
    rounded to its significant digits ("$181.7 million" for "181,674,817"; 1997 is not 1995).
    A number absent from the premise is strong evidence of a hallucination: the score is capped at
    ``number_cap`` times the support and the verdict is ``contradicted`` when the premise has other numbers
    (else ``not_stated``). A year (a whole number 1000-2099) matches only itself. A missing name caps the
    score at ``name_cap``.
    The verdict is ``entailed`` when the score is at least ``entail_threshold`` (0.5), else ``not_stated``
    (or ``contradicted`` as above). The reason lists the missing tokens; the tag is ``number`` when the
    statement has a number, ``entity`` when it has a name, else ``claim``.
    A hypothesis whose content tokens are all in the premise is entailed in full (score 1): this is how a
    short answer ("Jonathan Stark") that the context contains is judged. Gold-answer lists of QA sets
    (``a | b | c``): a hypothesis written so takes its best alternative, and when the premise's last line
    is such a list, a hypothesis that contains any alternative (normalised tokens, in order) is entailed.

Question-framed premises
    When the premise carries ``Premise.question`` (the ground-truth pairs: question's end + ground truth
    or answer), the question frames the claim but is not evidence: a hypothesis token that occurs in the
    question is left out of the check, and the rest must be found in the premise after the question.
    A hypothesis made only of question words is checked against the premise after the question
    ("lithium" for "what is the main mineral in lithium batteries" needs "lithium" in the answer).

Refusals
    Phrase patterns (``pipeline.refusal_phrases``): "I don't know", "not mentioned in the context",
    "the passage does not provide", "I'm sorry, but", ...

Pronouns
    A lexical judge cannot resolve pronouns: ``replace_pronouns`` returns the sentences unchanged.

Every method returns one ``JudgeCall`` with judge "lexical", 0 tokens, 0 cost and the measured latency.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from pipeline.judges.base import JudgeOutput, NliOutput, Premise
from pipeline.refusal_phrases import refusal_match
from pipeline.text_normalise import Token, fold, stem, tokens_of
from schemas.results import HypothesisResult, JudgeCall, Stage, StatementVerdict, Verdict

WEIGHTS: dict[str, float] = {"number": 3.0, "name": 2.0, "word": 1.0}

# clause boundaries: a statement is a clause of the hypothesis
_CLAUSE_SPLIT = re.compile(
    r"\s*;\s*|,\s+(?=(?:and|but|while|whereas|which|who|although|though|so|yet)\b)|\s+(?=(?:but|whereas)\s)",
    re.IGNORECASE,
)
_LEADING_CONJ = re.compile(r"^(?:and|but|while|whereas|although|though|so|yet)\s+", re.IGNORECASE)
_ALTERNATIVES = re.compile(r"\s+\|\s+")
_INITIAL = re.compile(r"\b([A-Z])\.")
_LETTER = re.compile(r"\b([A-Za-z])\b")
_CENTURY = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)[\s-]+century\b(?!\s*(?:BC|B\.C\.|BCE))", re.IGNORECASE)
_DECADE = re.compile(r"\b(1\d\d|20\d)0'?s\b")


@dataclass(frozen=True)
class LexicalConfig:
    entail_threshold: float = 0.5  # statement score at or over this: entailed
    number_cap: float = 0.25  # a statement with a number absent from the premise scores support * this
    name_cap: float = 0.45  # ... with a name absent from the premise scores at most this
    prefix_len: int = 5  # a word matching a premise word on this many leading letters counts half
    min_clause_tokens: int = 2  # a clause with fewer content tokens stays with the previous one
    sharpness: float = 3.0  # score = support ** sharpness (>1: each missing word costs more)
    # question-framed premises (ground-truth pairs: a reference answer vs a candidate answer) are
    # compared leniently, like SQuAD's token F1: plain weighted recall, a missing name not capped
    reference_sharpness: float = 1.0
    reference_name_cap: float = 1.0
    # ... unless the premise names another entity beside a shared token (``PremiseIndex.competitor``)
    competitor_check: bool = True


def split_statements(hypothesis: str, min_tokens: int = 2) -> list[str]:
    """Split a hypothesis into clause statements (";", ", and", ", which", ", while", " but ", ...).

    A clause with fewer than ``min_tokens`` content tokens is joined back to the one before it, so a
    statement always has something to check. Deterministic; the parts are substrings of the hypothesis.
    """
    text = hypothesis.strip()
    if not text:
        return []
    parts = [p.strip(" ,;") for p in _CLAUSE_SPLIT.split(text) if p and p.strip(" ,;")]
    statements: list[str] = []
    for part in parts:
        if statements and len(tokens_of(part)) < min_tokens:
            statements[-1] = f"{statements[-1]}, {part}"
        else:
            statements.append(part)
    if len(statements) > 1 and len(tokens_of(statements[0])) < min_tokens:
        statements[1] = f"{statements[0]}, {statements[1]}"
        statements.pop(0)
    return statements or [text]


def is_year(value: Decimal) -> bool:
    """A whole number from 1000 to 2099: read as a year, which is never a rounding of another number."""
    return value == value.to_integral_value() and 1000 <= value <= 2099


def is_rounding_of(value: Decimal, exact: Decimal) -> bool:
    """True when ``value`` is ``exact`` rounded to ``value``'s significant digits, at least 2 of them.

    "$181.7 million" (1817 x 10^5) is 181,674,817 rounded; 1997 is not 1995, nor 2018 2017; a year
    (``is_year``) is no rounding: 1900 is not 1908, nor 2020 2016.
    """
    if value == exact:
        return True
    if is_year(value):
        return False
    if value == 0 or exact == 0 or (value < 0) != (exact < 0):
        return False
    digits = value.normalize().as_tuple()
    significant = len(digits.digits)
    exponent = digits.exponent
    if not isinstance(exponent, int) or significant < 2:
        return False
    quantum = Decimal(1).scaleb(exponent)
    return exact.quantize(quantum, rounding=ROUND_HALF_UP) == value.quantize(quantum)


def gold_alternatives(premise: str) -> list[tuple[str, ...]]:
    """Gold short answers when the premise ends in a line of alternatives ``a | b | c`` (QA sets)."""
    last = premise.strip().rsplit("\n", 1)[-1]
    if " | " not in last or last.lstrip().startswith("|"):
        return []
    out = []
    for part in _ALTERNATIVES.split(last):
        norms = tuple(t.norm for t in tokens_of(part))
        if norms and norms not in out:
            out.append(norms)
    return out


#: words with which an answer refers to its source or to itself, not to the world ("The passage
#: describes...", "Here is a concise summary..."): not checked when the premise lacks them
FRAMING: frozenset[str] = frozenset(
    stem(w)
    for w in """passage passages summary summaries summarize summarise summarizes summarises summarized
    concise article text document documents context excerpt snippet mention mentions mentioned describe
    describes described according provided""".split()
)

_CAPITALISED_RUN = re.compile(r"\b[A-Z][a-z]+(?:\s+(?:(?:of|for|the)\s+)?[A-Z][a-z]+)+")
_ARTICLE_WORDS = frozenset({"The", "A", "An"})


def acronyms_of(text: str) -> set[str]:
    """Acronyms of runs of capitalised words: "Department of Motor Vehicles" -> {"DMV", "DOMV"}."""
    out: set[str] = set()
    for run in _CAPITALISED_RUN.finditer(text):
        segment: list[str] = []
        for word in [*run.group(0).split(), "The"]:  # an article starts a new run; the sentinel ends it
            if word in _ARTICLE_WORDS:
                if len([w for w in segment if w[0].isupper()]) >= 2:
                    out.add("".join(w[0] for w in segment if w[0].isupper()))
                    out.add("".join(w[0].upper() for w in segment))
                segment = []
            else:
                segment.append(word)
    return out


class PremiseIndex:
    """The premise's content tokens, indexed for lookups; ``question`` tokens are given, not evidence."""

    def __init__(self, text: str, prefix_len: int = 5, question: str | None = None) -> None:
        self.given: frozenset[str] = frozenset()
        self.reference = bool(question and text.startswith(question))
        if question and text.startswith(question):
            self.given = frozenset(t.norm for t in tokens_of(question))
            text = text[len(question) :]
        self.tokens = tokens_of(text)
        # "B. R. Ambedkar": B and R; not a letter the question names ("what does G stand for")
        asked = {c.upper() for c in _LETTER.findall(question or "")} if self.reference else set()
        self.initials = set(_INITIAL.findall(fold(text))) - asked
        self.acronyms = acronyms_of(fold(text))  # "Department of Motor Vehicles": DMV
        # coarser dates a reference comparison accepts for a year: "the 16th century", "the 1960s"
        self.centuries = {int(n) for n in _CENTURY.findall(text)}
        self.decades = set(_DECADE.findall(text))
        self.norms = {t.norm for t in self.tokens if t.kind != "number"}
        self.prefix_len = prefix_len
        self.prefixes = {n[:prefix_len] for n in self.norms if len(n) >= prefix_len}
        self.numbers = [Decimal(t.norm) for t in self.tokens if t.kind == "number"]
        self.number_norms = {t.norm for t in self.tokens if t.kind == "number"}
        self.alternatives = gold_alternatives(text)

    def contains_alternative(self, hypothesis_tokens: Sequence[Token]) -> str | None:
        """The gold alternative whose tokens appear, in order and adjacent, in the hypothesis."""
        norms = [t.norm for t in hypothesis_tokens]
        for alternative in self.alternatives:
            n = len(alternative)
            if n and any(tuple(norms[i : i + n]) == alternative for i in range(len(norms) - n + 1)):
                return " ".join(alternative)
        return None

    def content(self, tokens: Sequence[Token]) -> list[Token]:
        """The tokens to check: those not given by the question (all of them when every one is), less
        framing words the premise lacks ("the passage mentions X" is checked as "X")."""
        framed = [t for t in tokens if t.norm not in FRAMING or t.norm in self.norms]
        tokens = framed or list(tokens)
        if not self.given:
            return list(tokens)
        kept = [t for t in tokens if t.norm not in self.given]
        return kept or list(tokens)

    def competitor(self, hypothesis_tokens: Sequence[Token]) -> Token | None:
        """A name (number) of the premise beside a name (number) the hypothesis shares with it, itself
        absent from the hypothesis and the question: "Emmitt Smith" against "Timmy Smith", "May 30, 2017"
        against "January 2017". None when there is none."""
        norms = {t.norm for t in hypothesis_tokens}
        for i, token in enumerate(self.tokens):
            if token.norm not in norms:
                continue
            for j in (i - 1, i + 1):
                if 0 <= j < len(self.tokens):
                    other = self.tokens[j]
                    if (
                        other.kind == token.kind != "word"
                        and other.norm not in norms
                        and other.norm not in self.given
                    ):
                        return other
        return None

    def credit(self, token: Token) -> float:
        """1 if the premise has the token, 0.5 for a prefix match of a word, else 0."""
        if token.kind == "number":
            if token.norm in self.number_norms:
                return 1.0
            value = Decimal(token.norm)
            if any(is_rounding_of(value, n) for n in self.numbers):
                return 1.0
            if self.reference and is_year(value):
                year = int(value)
                if year // 100 + 1 in self.centuries or str(year)[:3] in self.decades:
                    return 1.0  # the year's century or decade: the same date, coarser
            # a number written as a word in the premise ("two") is a word there, not a number
            return 1.0 if token.surface.lower() in self.norms else 0.0
        if token.norm in self.norms:
            return 1.0
        if token.kind == "name" and token.surface[:1].upper() in self.initials:
            return 1.0  # a name the premise abbreviates to its initial ("B. R. Ambedkar")
        if token.kind == "name" and token.surface.isupper() and token.surface in self.acronyms:
            return 1.0  # an acronym of capitalised words in the premise
        if (
            token.kind == "word"
            and len(token.norm) >= self.prefix_len
            and (token.norm[: self.prefix_len] in self.prefixes)
        ):
            return 0.5
        return 0.0


_MONTHS = frozenset(
    stem(m)
    for m in "january february march april may june july august september october november december".split()
)


def _is_day(token: Token) -> bool:
    return token.kind == "number" and token.norm.isdigit() and 1 <= int(token.norm) <= 31


def coarser_date(tokens: Sequence[Token], missing: Sequence[Token], index: PremiseIndex) -> bool:
    """True when the statement is a date the premise gives at a coarser granularity: its year is in the
    premise, every missing token is a month or a day number, and the premise names no other month."""
    has_year = any(t.kind == "number" and is_year(Decimal(t.norm)) and t not in missing for t in tokens)
    only_details = all(t.norm in _MONTHS or _is_day(t) for t in missing)
    norms = {t.norm for t in tokens}
    other_month = any(t.norm in _MONTHS and t.norm not in norms for t in index.tokens)
    return has_year and only_details and not other_month


def judge_statement(statement: str, index: PremiseIndex, config: LexicalConfig) -> StatementVerdict:
    tokens = index.content(tokens_of(statement))
    has_number = any(t.kind == "number" for t in tokens)
    has_name = any(t.kind == "name" for t in tokens)
    tag = "number" if has_number else "entity" if has_name else "claim"
    if not tokens:
        return StatementVerdict(
            statement=statement, verdict="entailed", score=1.0, tag=tag, reason="no content words to check"
        )
    total = found = 0.0
    missing: list[Token] = []
    for t in tokens:
        weight = WEIGHTS[t.kind]
        credit = index.credit(t)
        total += weight
        found += weight * credit
        if credit < 1.0:
            missing.append(t)
    sharpness = config.reference_sharpness if index.reference else config.sharpness
    name_cap = config.reference_name_cap if index.reference else config.name_cap
    support = (found / total) ** sharpness
    missing_numbers = [t for t in missing if t.kind == "number"]
    missing_names = [t for t in missing if t.kind == "name"]
    score = support
    verdict: Verdict
    lenient = index.reference and config.competitor_check and index.competitor(tokens) is None
    coarser = lenient and bool(missing) and coarser_date(tokens, missing, index)
    if coarser:
        # "1965" for "1 August 1965": the same date at a coarser granularity (year, or month and year)
        missing = missing_numbers = missing_names = []
        total = found = sum(WEIGHTS[t.kind] for t in tokens if t.norm not in _MONTHS and not _is_day(t))
        score = support = 1.0
    if missing_numbers and not lenient:
        score = support * config.number_cap
        verdict = "contradicted" if index.numbers else "not_stated"
    elif missing_numbers:  # a reference answer's number the candidate leaves out: less specific, not wrong
        verdict = "entailed" if score >= config.entail_threshold else "not_stated"
    else:
        if missing_names:
            score = min(support, name_cap)
            if index.reference and config.competitor_check and index.competitor(tokens) is not None:
                score = min(score, config.name_cap)  # another entity where this one's name is missing
        verdict = "entailed" if score >= config.entail_threshold else "not_stated"
    if coarser:
        reason = "the premise gives this date at a coarser granularity (its year), naming no other month"
    elif missing:
        shown = ", ".join(f"{t.surface} ({t.kind})" for t in missing[:8])
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        reason = f"{found:.1f}/{total:.1f} of the weighted content found; not in the premise: {shown}{more}"
    else:
        reason = "every content token is in the premise"
    return StatementVerdict(
        statement=statement,
        verdict=verdict,
        score=round(min(max(score, 0.0), 1.0), 6),
        tag=tag,
        reason=reason,
    )


def judge_hypothesis(hypothesis: str, index: PremiseIndex, config: LexicalConfig) -> HypothesisResult:
    """Judge one hypothesis; alternatives "a | b | c" take the best alternative."""
    alternatives = [a for a in _ALTERNATIVES.split(hypothesis.strip()) if a.strip()]
    if len(alternatives) > 1 and not hypothesis.strip().startswith("|"):
        results = [_judge_single(a, index, config) for a in alternatives]
        best = max(results, key=lambda r: r.score)
        return HypothesisResult(hypothesis=hypothesis, statements=best.statements, score=best.score)
    return _judge_single(hypothesis, index, config)


def _judge_single(hypothesis: str, index: PremiseIndex, config: LexicalConfig) -> HypothesisResult:
    written = tokens_of(hypothesis)
    tokens = index.content(written)
    gold = index.contains_alternative(written) if index.alternatives else None
    if gold is not None:
        statement = StatementVerdict(
            statement=hypothesis.strip(),
            verdict="entailed",
            score=1.0,
            tag="claim",
            reason=f"contains the gold answer {gold!r}",
        )
        return HypothesisResult(hypothesis=hypothesis, statements=[statement], score=1.0)
    if tokens and all(index.credit(t) == 1.0 for t in tokens):
        statement = StatementVerdict(
            statement=hypothesis.strip(),
            verdict="entailed",
            score=1.0,
            tag="number" if any(t.kind == "number" for t in tokens) else "entity"
            if any(t.kind == "name" for t in tokens) else "claim",
            reason="every content token is in the premise",
        )  # fmt: skip
        return HypothesisResult(hypothesis=hypothesis, statements=[statement], score=1.0)
    statements = [
        judge_statement(s, index, config) for s in split_statements(hypothesis, config.min_clause_tokens)
    ]
    if not statements:
        statements = [judge_statement(hypothesis, index, config)]
    score = sum(s.score for s in statements) / len(statements)
    return HypothesisResult(hypothesis=hypothesis, statements=statements, score=round(score, 6))


class LexicalJudge:
    """Deterministic judge from normalised tokens, numbers, names and refusal phrases (no LLM)."""

    name = "lexical"
    model = "lexical-v1"

    def __init__(self, config: LexicalConfig | None = None) -> None:
        self.config = config or LexicalConfig()

    def _call(self, stage: Stage, started: float, items: int) -> JudgeCall:
        return JudgeCall(
            stage=stage,
            judge=self.name,
            model=self.model,
            latency_ms=(time.perf_counter() - started) * 1000.0,
            items=items,
        )

    async def replace_pronouns(self, sentences: Sequence[str]) -> JudgeOutput[list[str]]:
        """Return the sentences unchanged: a lexical judge cannot resolve pronouns."""
        started = time.perf_counter()
        return JudgeOutput(list(sentences), [self._call("pronouns", started, len(sentences))])

    async def entail(
        self, premise: Premise, hypotheses: Sequence[str], *, ask_refusal: bool = False
    ) -> JudgeOutput[NliOutput]:
        started = time.perf_counter()
        index = PremiseIndex(premise.text, self.config.prefix_len, premise.question)
        results = [judge_hypothesis(h, index, self.config) for h in hypotheses]
        refusal = self.is_refusal(" ".join(hypotheses)) if ask_refusal else None
        return JudgeOutput(NliOutput(results, refusal), [self._call("nli", started, len(hypotheses))])

    async def classify_refusals(self, texts: Sequence[str]) -> JudgeOutput[list[bool]]:
        started = time.perf_counter()
        flags = [self.is_refusal(t) for t in texts]
        return JudgeOutput(flags, [self._call("refusal", started, len(texts))])

    @staticmethod
    def is_refusal(text: str) -> bool:
        return refusal_match(text) is not None

    async def aclose(self) -> None:
        return None
