"""LexicalJudge: a fast, deterministic judge that needs no LLM (judge kind ``lexical``).

What it sees, and what it cannot
    It compares surface tokens: stemmed words, capitalised names and canonical numbers
    (``pipeline.text_normalise``). It sees whether the claims of a statement are spelled out in the
    premise, numbers that are absent, names that are absent, and the wording of refusals. It cannot
    see meaning: a paraphrase with other words ("the ecology" for "the environment"), a negation or a
    swapped relation made of the premise's own words ("A beat B" for "B beat A"), world knowledge
    (Dakar -> Senegal), or a pronoun's referent. It does not read the answer's length: a score only
    falls with words the premise lacks (on HaluEval, where right answers are short, a length-only score
    does better than it; ``docs/accuracy.md``). Its operating threshold is a setting
    (``judge_hallucination_thresholds``); out-of-fold figures and the rule ablation are in
    ``docs/accuracy.md``. Every rule below has a switch in ``LexicalOptions``; (off) marks those off
    by default.

Entailment
    Each hypothesis is split into statements (clauses, ``split_statements``; ``clauses``). A
    statement's score is the weighted share of its content tokens found in the premise: a number weighs
    3, a name 2, a word 1 (``kind_weights``); a word that shares a 5-letter prefix with a premise word
    counts half (``prefix_credit``); the share is raised to the power ``sharpness`` (3; ``sharpen``).
    Numbers match when equal after normalisation ("67 million" = "67,000,000"); a number word ("two")
    is a word (``number_words``, off: as a number), except bound to a unit, where it is the number
    ("two-year" = "two years" = "2 years", "30-day" = "thirty days"; ``number_units``); a rounding
    ("$181.7 million" for 181,674,817) is no match (``number_rounding``, off; with it, a year is no
    rounding of another: ``years_exact``).
    A number absent from the premise caps the score at ``number_cap`` times the support and the verdict
    is ``contradicted`` when the premise has other numbers, else ``not_stated``
    (``number_cap_rule``). A missing name caps the score at ``name_cap`` (``name_cap_rule``).
    Framing words ("the passage describes", "a concise summary") the premise lacks are not checked
    (``FRAMING``; ``framing_words``). The verdict is ``entailed`` when the score is at least
    ``entail_threshold`` (0.5), else ``not_stated`` (or ``contradicted`` as above); the reason lists
    the missing tokens; the tag is ``number``, ``entity`` or ``claim``. The hypothesis score is the
    mean of its statements'. (Off: a hypothesis whose tokens are all found scores 1 without splitting,
    ``whole_hypothesis``; a hypothesis written ``a | b`` takes its best part,
    ``hypothesis_alternatives``: the pipeline splits ground-truth alternatives before the judge.)
    When the premise's last line is a list of gold answers ``a | b | c``, a hypothesis containing any
    of them (normalised tokens, in order) is entailed (``premise_alternatives``).

Question-framed premises (a reference answer against a candidate, ``Premise.question``)
    The question frames the claim but is not evidence: a hypothesis token the question has is left
    out, the rest must be in the premise after the question (``question_not_evidence``). The
    comparison is plain weighted recall, a missing name not capped (``reference_lenient``), unless the
    premise has a rival name or number beside a shared one ("Emmitt Smith" for "Timmy Smith";
    ``competitor_check``). A reference number the candidate leaves out, with no rival, is less
    specific, not wrong (``less_specific_numbers``); a date the premise gives at a coarser granularity
    is entailed ("1965" for "1 August 1965", ``coarser_dates``; "the 16th century" or "the 1520s" for
    1524, ``centuries_decades``); initials and acronyms match names ("B. R. Ambedkar", "DMV";
    ``initials``, ``acronyms``; off: a letter the question asks about is no initial, ``asked_letter``).

Refusals
    Phrase patterns (``pipeline.refusal_phrases``), those named in ``refusal_off`` left out: "I don't
    know", "the passage does not provide", "is not mentioned", "I'm sorry, but", ... An answer that
    opens with a negative reply and states a fact ("No, X is not covered by the warranty.") is no
    refusal; "No, that is not mentioned in the manual" and "No, I can't help with that" are
    (``negative_reply``).

Pronouns and conversations
    A lexical judge cannot resolve pronouns: ``replace_pronouns`` returns the sentences unchanged, with
    or without a conversation's earlier turns. It ignores those turns by design everywhere: they are
    not evidence (an earlier assistant turn that states a claim does not ground it: only the contexts
    do, and the question and ground truth in the ground-truth pairs), and a word-overlap match of an
    answer's "it" against the nouns of earlier turns would guess, not resolve. A follow-up's verdicts
    are therefore those of the same question asked alone.

Supporting passage
    When the premise lists its passages (``Premise.passages``: the retrieved context), each statement
    records the passage it was judged against (``StatementVerdict.passage``): the one that alone gives
    it the highest score (the earlier on ties), or None when it shares no content with any of them;
    and the passages that support it (``StatementVerdict.supported_by``, what citations are checked
    against): each passage that alone entails it, or, when none does but the whole premise does, the
    fewest passages (best-scoring first) that entail it together. Its verdict and score stay those
    against the whole premise: the passages are only recorded.

Every method returns one ``JudgeCall`` with judge "lexical", 0 tokens, 0 cost and the measured latency.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.clock import Stopwatch
from pipeline.judges.base import JudgeOutput, NliOutput, Premise
from pipeline.judges.identity import LEXICAL_MODEL
from pipeline.refusal_phrases import REFUSAL_OFF, refusal_match
from pipeline.text_normalise import NUMBER_WORDS, Token, fold, stem
from pipeline.text_normalise import tokens_of as _tokens_of
from prompts.models import PronounTurn
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


class LexicalOptions(BaseModel):
    """The lexical judge's numbers and rule switches (frozen; ``LexicalJudge(options)``).

    Every switch turns one rule, feature or word list on (True) or off; ``benchmarks/accuracy_cv.py``
    measures each one's out-of-fold effect on every labeled set (``docs/accuracy.md``). The defaults are
    what that ablation kept: a rule is on when it helped on average over the sets and hurt none by more
    than its fold-to-fold sd; rules that never changed a score, and ``asked_letter`` (a quirk of a few
    questions of one set), are off. Two rules are on although the dev sets cannot show them helping:
    ``negative_reply`` (no dev answer is decided by it) and ``number_units`` (20 FaithBench and 2
    HaluEval scores move; at the settings' shared threshold one FaithBench case of 306 flips);
    ``docs/accuracy.md`` has the figures. The factory builds the judge with these defaults.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    entail_threshold: float = 0.5  # statement score at or over this: entailed (verdict only, not score)
    number_cap: float = 0.25  # a statement with a number absent from the premise scores support * this
    name_cap: float = 0.45  # ... with a name absent from the premise scores at most this
    prefix_len: int = 5  # a word matching a premise word on this many leading letters counts half
    min_clause_tokens: int = 2  # a clause with fewer content tokens stays with the previous one
    sharpness: float = 3.0  # score = support ** sharpness (>1: each missing word costs more)
    # question-framed premises (ground-truth pairs: a reference answer vs a candidate answer) are
    # compared leniently, like SQuAD's token F1: plain weighted recall, a missing name not capped
    reference_sharpness: float = 1.0
    reference_name_cap: float = 1.0

    # rule switches
    clauses: bool = Field(True, description="a hypothesis is split into clause statements, scores averaged")
    kind_weights: bool = Field(True, description="a number weighs 3, a name 2, a word 1 (else all 1)")
    prefix_credit: bool = Field(True, description="a word sharing a prefix_len-letter prefix counts half")
    number_words: bool = Field(False, description='number words ("two", "third") are numbers, not words')
    number_units: bool = Field(
        True,
        description='a number word bound to a unit is a number: "two-year" = "two years" = "2 years", '
        '"30-day" = "thirty days" (with number_words off)',
    )
    number_rounding: bool = Field(False, description='"$181.7 million" matches 181,674,817')
    years_exact: bool = Field(True, description="with number_rounding: a year is no rounding of another")
    number_cap_rule: bool = Field(True, description="a missing number caps the score at number_cap")
    name_cap_rule: bool = Field(True, description="a missing name caps the score at name_cap")
    sharpen: bool = Field(True, description="score = support ** sharpness (else plain weighted support)")
    whole_hypothesis: bool = Field(False, description="a hypothesis whose tokens are all found scores 1")
    premise_alternatives: bool = Field(
        True, description="a premise ending in 'a | b | c' entails a hypothesis containing any of them"
    )
    hypothesis_alternatives: bool = Field(False, description="a hypothesis 'a | b' takes its best part")
    question_not_evidence: bool = Field(
        True, description="in question-framed premises the question's words are given, not evidence"
    )
    reference_lenient: bool = Field(
        True, description="question-framed premises use reference_sharpness and reference_name_cap"
    )
    competitor_check: bool = Field(
        True, description='a rival name/number beside a shared one caps a reference match ("Timmy Smith")'
    )
    less_specific_numbers: bool = Field(
        True, description="a reference number the candidate leaves out (no rival) is not capped"
    )
    coarser_dates: bool = Field(True, description='"1965" is entailed by "1 August 1965" in references')
    centuries_decades: bool = Field(True, description='"the 16th century" / "the 1520s" entail 1524')
    initials: bool = Field(True, description='"B. R. Ambedkar": an initial matches a name')
    asked_letter: bool = Field(
        False, description='a letter the question asks about ("what does G stand for") is no initial'
    )
    acronyms: bool = Field(True, description='"DMV" matches "Department of Motor Vehicles"')
    framing_words: bool = Field(True, description='"the passage describes": framing words are not claims')
    # refusal phrase patterns (``pipeline.refusal_phrases.REFUSAL_PATTERNS`` names) not used: by default
    # those that did not help on the labeled refusal set (``docs/accuracy.md``, ablation)
    refusal_off: frozenset[str] = REFUSAL_OFF
    negative_reply: bool = Field(
        True,
        description='an answer opening with "No," whose negation is about the thing asked ("No, X is not '
        'covered.") is no refusal unless it names the source ("not mentioned in the manual")',
    )


#: the former name of the options
LexicalConfig = LexicalOptions

#: the rule switches (boolean options), in declaration order
SWITCHES: tuple[str, ...] = tuple(
    name for name, field in LexicalOptions.model_fields.items() if field.annotation is bool
)

_NUMBER_WORDS = frozenset(NUMBER_WORDS) | {"one"}
_PARTS = re.compile(r"[\s-]+")


def _spelled(token: Token) -> list[str] | None:
    """The words of a number written in number words ("two", "twenty-four"), else None."""
    parts = _PARTS.split(token.surface.lower())
    return parts if token.kind == "number" and all(p in _NUMBER_WORDS for p in parts) else None


def tokens_of(text: str, options: LexicalOptions | None = None) -> list[Token]:
    """``pipeline.text_normalise.tokens_of``; without ``number_words`` a number word is a word, unless
    it is bound to a unit ("two-year", "thirty days") with ``number_units``."""
    tokens = _tokens_of(text)
    if options is None or options.number_words:
        return tokens
    out: list[Token] = []
    for t in tokens:
        parts = _spelled(t)
        if parts is None or (t.bound and options.number_units):
            out.append(t)
        else:
            out.extend(Token("word", stem(p), p) for p in parts)
    return out


def weight_of(token: Token, options: LexicalOptions) -> float:
    return WEIGHTS[token.kind] if options.kind_weights else 1.0


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


def is_rounding_of(value: Decimal, exact: Decimal, years_exact: bool = True) -> bool:
    """True when ``value`` is ``exact`` rounded to ``value``'s significant digits, at least 2 of them.

    "$181.7 million" (1817 x 10^5) is 181,674,817 rounded; 1997 is not 1995, nor 2018 2017; a year
    (``is_year``, with ``years_exact``) is no rounding: 1900 is not 1908, nor 2020 2016.
    """
    if value == exact:
        return True
    if years_exact and is_year(value):
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

    def __init__(self, text: str, options: LexicalOptions | None = None, question: str | None = None) -> None:
        self.options = options = options or LexicalOptions()
        self.given: frozenset[str] = frozenset()
        self.reference = bool(question and text.startswith(question))
        if question and self.reference and options.question_not_evidence:
            self.given = frozenset(t.norm for t in tokens_of(question, options))
            text = text[len(question) :]
        self.tokens = tokens_of(text, options)
        # "B. R. Ambedkar": B and R; not a letter the question names ("what does G stand for")
        asked = set()
        if self.reference and options.asked_letter:
            asked = {c.upper() for c in _LETTER.findall(question or "")}
        self.initials = set(_INITIAL.findall(fold(text))) - asked if options.initials else set()
        self.acronyms = acronyms_of(fold(text)) if options.acronyms else set()  # "Dept of Motor Vehicles"
        # coarser dates a reference comparison accepts for a year: "the 16th century", "the 1960s"
        dates = options.centuries_decades
        self.centuries = {int(n) for n in _CENTURY.findall(text)} if dates else set()
        self.decades = set(_DECADE.findall(text)) if dates else set()
        # a number word the premise binds to a unit ("two-year") is also the word a hypothesis may use
        spelled = [w for t in self.tokens if t.bound for w in _spelled(t) or ()]
        self.norms = {t.norm for t in self.tokens if t.kind != "number"} | {stem(w) for w in spelled}
        self.prefix_len = options.prefix_len
        self.prefixes = {n[: self.prefix_len] for n in self.norms if len(n) >= self.prefix_len}
        self.numbers = [Decimal(t.norm) for t in self.tokens if t.kind == "number"]
        self.number_norms = {t.norm for t in self.tokens if t.kind == "number"}
        self.alternatives = gold_alternatives(text) if options.premise_alternatives else []

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
        if self.options.framing_words:
            framed = [t for t in tokens if t.norm not in FRAMING or t.norm in self.norms]
            tokens = framed or list(tokens)
        if not self.given:
            return list(tokens)
        kept = [t for t in tokens if t.norm not in self.given]
        return kept or list(tokens)

    def competitor(self, hypothesis_tokens: Sequence[Token]) -> Token | None:
        """A name (number) of the premise beside a name (number) the hypothesis shares with it, itself
        absent from the hypothesis and the question: "Emmitt Smith" against "Timmy Smith", "May 30, 2017"
        against "January 2017". None when there is none (or the check is off)."""
        if not self.options.competitor_check:
            return None
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

    def number_credit(self, token: Token) -> float:
        """1 if the premise has the number (equal, rounded, or a coarser date of a reference), else 0."""
        if token.norm in self.number_norms:
            return 1.0
        value = Decimal(token.norm)
        if self.options.number_rounding and any(
            is_rounding_of(value, n, self.options.years_exact) for n in self.numbers
        ):
            return 1.0
        if self.reference and is_year(value):
            year = int(value)
            if year // 100 + 1 in self.centuries or str(year)[:3] in self.decades:
                return 1.0  # the year's century or decade: the same date, coarser
        # a number written as a word in the premise ("two") is a word there, not a number
        return 1.0 if token.surface.lower() in self.norms else 0.0

    def credit(self, token: Token) -> float:
        """1 if the premise has the token, 0.5 for a prefix match of a word, else 0."""
        if token.kind == "number":
            return self.number_credit(token)
        if token.norm in self.norms:
            return 1.0
        if token.kind == "name" and token.surface[:1].upper() in self.initials:
            return 1.0  # a name the premise abbreviates to its initial ("B. R. Ambedkar")
        if token.kind == "name" and token.surface.isupper() and token.surface in self.acronyms:
            return 1.0  # an acronym of capitalised words in the premise
        if (
            self.options.prefix_credit
            and token.kind == "word"
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


def _tag(tokens: Sequence[Token]) -> str:
    if any(t.kind == "number" for t in tokens):
        return "number"
    return "entity" if any(t.kind == "name" for t in tokens) else "claim"


def _capped(
    support: float, missing: Sequence[Token], index: PremiseIndex, rival: bool, lenient_numbers: bool
) -> tuple[float, Verdict | None]:
    """The score after the number and name caps, and the verdict a missing number forces (else None)."""
    o = index.options
    if any(t.kind == "number" for t in missing):
        if lenient_numbers:  # a reference answer's number the candidate leaves out: less specific, not wrong
            return support, None
        if o.number_cap_rule:
            return support * o.number_cap, "contradicted" if index.numbers else "not_stated"
    score = support
    if any(t.kind == "name" for t in missing) and o.name_cap_rule:
        name_cap = o.reference_name_cap if index.reference and o.reference_lenient else o.name_cap
        score = min(support, name_cap)
        if index.reference and rival:
            score = min(score, o.name_cap)  # another entity where this one's name is missing
    return score, None


def judge_statement(statement: str, index: PremiseIndex, options: LexicalOptions) -> StatementVerdict:
    """Score one statement: weighted share of its content tokens found, sharpened, capped (module doc)."""
    tokens = index.content(tokens_of(statement, options))
    tag = _tag(tokens)
    if not any(ch.isalnum() for ch in statement):  # only punctuation or symbols: nothing is claimed
        return StatementVerdict(
            statement=statement, verdict="not_stated", score=0.0, tag=tag, reason="no words or numbers"
        )
    if not tokens:
        return StatementVerdict(
            statement=statement, verdict="entailed", score=1.0, tag=tag, reason="no content words to check"
        )
    total = found = 0.0
    missing: list[Token] = []
    for t in tokens:
        credit = index.credit(t)
        total += weight_of(t, options)
        found += weight_of(t, options) * credit
        if credit < 1.0:
            missing.append(t)
    sharpness = (
        options.reference_sharpness if index.reference and options.reference_lenient else options.sharpness
    )
    support = (found / total) ** (sharpness if options.sharpen else 1.0)
    rival = index.reference and index.competitor(tokens) is not None
    coarser = (
        index.reference and options.coarser_dates and not rival and bool(missing)
        and coarser_date(tokens, missing, index)
    )  # fmt: skip
    if (
        coarser
    ):  # "1965" for "1 August 1965": the same date at a coarser granularity (year, or month and year)
        missing = []
        total = found = sum(weight_of(t, options) for t in tokens if t.norm not in _MONTHS and not _is_day(t))
        support = 1.0
    lenient_numbers = index.reference and options.less_specific_numbers and not rival
    score, forced = _capped(support, missing, index, rival, lenient_numbers)
    verdict: Verdict = forced or ("entailed" if score >= options.entail_threshold else "not_stated")
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


def judge_hypothesis(hypothesis: str, index: PremiseIndex, options: LexicalOptions) -> HypothesisResult:
    """Judge one hypothesis; alternatives "a | b | c" take the best alternative."""
    alternatives = [a for a in _ALTERNATIVES.split(hypothesis.strip()) if a.strip()]
    if options.hypothesis_alternatives and len(alternatives) > 1 and not hypothesis.strip().startswith("|"):
        results = [_judge_single(a, index, options) for a in alternatives]
        best = max(results, key=lambda r: r.score)
        return HypothesisResult(hypothesis=hypothesis, statements=best.statements, score=best.score)
    return _judge_single(hypothesis, index, options)


def _whole(hypothesis: str, tag: str, reason: str) -> HypothesisResult:
    statement = StatementVerdict(
        statement=hypothesis.strip(), verdict="entailed", score=1.0, tag=tag, reason=reason
    )
    return HypothesisResult(hypothesis=hypothesis, statements=[statement], score=1.0)


def _judge_single(hypothesis: str, index: PremiseIndex, options: LexicalOptions) -> HypothesisResult:
    written = tokens_of(hypothesis, options)
    tokens = index.content(written)
    gold = index.contains_alternative(written) if index.alternatives else None
    if gold is not None:
        return _whole(hypothesis, "claim", f"contains the gold answer {gold!r}")
    if options.whole_hypothesis and tokens and all(index.credit(t) == 1.0 for t in tokens):
        return _whole(hypothesis, _tag(tokens), "every content token is in the premise")
    if options.clauses:
        parts = split_statements(hypothesis, options.min_clause_tokens) or [hypothesis]
    else:
        parts = [hypothesis]
    statements = [judge_statement(p, index, options) for p in parts]
    score = sum(s.score for s in statements) / len(statements)
    return HypothesisResult(hypothesis=hypothesis, statements=statements, score=round(score, 6))


def supporting_passages(
    results: Sequence[HypothesisResult], premise: Premise, options: LexicalOptions
) -> list[HypothesisResult]:
    """Each statement with the position (in ``premise.passages``) of the passage that alone scores it
    highest, the earlier on ties (None when none scores it above 0), and its supporting passages
    (``supported_by``): those that alone entail it; when none does but the whole premise does, the fewest
    passages, taken by their own score, that entail it together (asked only when the answer cites,
    ``premise.ask_support``). Verdicts and scores are unchanged."""
    if not premise.passages:
        return list(results)
    indexes: list[PremiseIndex] = []

    def located(statement: StatementVerdict) -> StatementVerdict:
        if len(premise.passages) == 1:
            entailed = statement.verdict == "entailed"
            passage = 0 if statement.score > 0 else None
            return statement.model_copy(update={"passage": passage, "supported_by": [0] if entailed else []})
        if not indexes:
            indexes.extend(PremiseIndex(p.text, options) for p in premise.passages)
        verdicts = [judge_statement(statement.statement, index, options) for index in indexes]
        scores = [v.score for v in verdicts]
        top = max(scores)
        alone = [i for i, v in enumerate(verdicts) if v.verdict == "entailed"]
        if not alone and statement.verdict == "entailed" and premise.ask_support:
            # only for an answer that cites: the joins cost a premise index each
            alone = _together(statement.statement, scores, premise, options)
        return statement.model_copy(
            update={"passage": scores.index(top) if top > 0 else None, "supported_by": alone}
        )

    return [r.model_copy(update={"statements": [located(s) for s in r.statements]}) for r in results]


def _together(
    statement: str, scores: Sequence[float], premise: Premise, options: LexicalOptions
) -> list[int]:
    """The fewest passages, best-scoring first, whose joined text entails the statement ([] if none do)."""
    order = sorted((i for i, score in enumerate(scores) if score > 0), key=lambda i: (-scores[i], i))
    for n in range(2, len(order) + 1):
        chosen = sorted(order[:n])
        joined = PremiseIndex("\n\n".join(premise.passages[i].text for i in chosen), options)
        if judge_statement(statement, joined, options).verdict == "entailed":
            return chosen
    return []


class LexicalJudge:
    """Deterministic judge from normalised tokens, numbers, names and refusal phrases (no LLM)."""

    name = "lexical"
    model = LEXICAL_MODEL

    def __init__(self, options: LexicalOptions | None = None) -> None:
        self.options = options or LexicalOptions()

    def _call(self, stage: Stage, watch: Stopwatch, items: int) -> JudgeCall:
        return JudgeCall(
            stage=stage,
            judge=self.name,
            model=self.model,
            latency_ms=watch.seconds() * 1000.0,
            items=items,
        )

    async def replace_pronouns(
        self, sentences: Sequence[str], history: Sequence[PronounTurn] = ()
    ) -> JudgeOutput[list[str]]:
        """Return the sentences unchanged: a lexical judge cannot resolve pronouns, from earlier
        sentences or from a conversation's ``history`` (see the class docstring)."""
        watch = Stopwatch()
        return JudgeOutput(list(sentences), [self._call("pronouns", watch, len(sentences))])

    async def entail(
        self, premise: Premise, hypotheses: Sequence[str], *, ask_refusal: bool = False
    ) -> JudgeOutput[NliOutput]:
        watch = Stopwatch()
        index = PremiseIndex(premise.text, self.options, premise.question)
        results = [judge_hypothesis(h, index, self.options) for h in hypotheses]
        results = supporting_passages(results, premise, self.options)
        refusal = self.is_refusal(" ".join(hypotheses)) if ask_refusal else None
        return JudgeOutput(NliOutput(results, refusal), [self._call("nli", watch, len(hypotheses))])

    async def classify_refusals(self, texts: Sequence[str]) -> JudgeOutput[list[bool]]:
        watch = Stopwatch()
        flags = [self.is_refusal(t) for t in texts]
        return JudgeOutput(flags, [self._call("refusal", watch, len(texts))])

    def is_refusal(self, text: str) -> bool:
        options = self.options
        return refusal_match(text, options.refusal_off, negative_reply=options.negative_reply) is not None

    async def aclose(self) -> None:
        return None
