"""Deterministic text normalisation for the lexical judge: content tokens, numbers, names, stems.

Everything here is pure and rule based (no model, no data files):

- words are lower-cased, punctuation stripped, stopwords dropped and suffix-stemmed (``stem``);
- numbers are turned into one canonical decimal string, so ``"67 million"``, ``"67,000,000"`` and
  ``"67000000"`` are all ``"67000000"``; ``"1.5k"`` is ``"1500"``; ``"15%"``/``"15 percent"`` are ``"15"``;
  number words ("two", "twelve", "forty") and the ordinals up to tenth are numbers too ("one" and
  "second" are not: they are more often a pronoun and a unit of time);
- a number bound to a unit (``UNITS``: time, length, weight, volume, degrees, percent) is marked
  (``Token.bound``): the unit after it, by a hyphen or a space ("two-year", "24-hour", "thirty days",
  "2 yrs"); "one" is a number there ("one-year" = "1 year"), "twenty-four" is 24, and unit
  abbreviations are their unit ("hr"/"hrs"/"h" glued to a number = "hour", "yr" = "year", "min" =
  "minute"), so "two-year", "two years" and "2 years" have the same tokens. Other words after a number
  bind nothing ("six-time champion", "the two doors");
- a capitalised token that is not a stopword is a *name* (the lexical judge weights names higher).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

TokenKind = Literal["number", "name", "word"]

STOPWORDS: frozenset[str] = frozenset(
    """
    a an the and or but nor so yet if then than that this these those there here of in on at to for from by
    with without within into onto over under about above below between among through during before after
    since until upon as is are was were be been being am do does did doing done have has had having
    can could may might must shall should will would it its it's itself he him his himself she her hers
    herself they them their theirs themselves we us our ours ourselves you your yours yourself i me my
    mine myself who whom whose which what when where why how all any both each few more most other some
    such no not only own same too very just also still even however therefore thus hence although though
    while whereas because whether either neither one's s t d ll re ve m o y ain aren couldn didn doesn hadn
    hasn haven isn mightn mustn needn shan shouldn wasn weren won't wouldn don don't can't cannot
    overall additionally furthermore moreover indeed yes ok okay well
    """.split()
)

NUMBER_WORDS: dict[str, int] = {
    "zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "first": 1, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "dozen": 12,
}  # fmt: skip

SCALES: dict[str, int] = {
    "thousand": 10**3, "k": 10**3, "million": 10**6, "mln": 10**6, "m": 10**6, "mn": 10**6,
    "billion": 10**9, "bn": 10**9, "b": 10**9, "trillion": 10**12, "tn": 10**12,
}  # fmt: skip
# single-letter scales only count when glued to the number ("1.5k", "$3m"), never as a separate word
_GLUED_ONLY = {"k", "m", "b"}

#: tens and the digit words that join them into one number ("twenty-four", "thirty one")
_TENS = frozenset({"twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"})
_ORDINALS = frozenset({"first", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"})
_DIGIT_WORDS: dict[str, int] = {"one": 1} | {
    w: v for w, v in NUMBER_WORDS.items() if 1 < v < 10 and w not in _ORDINALS
}

#: abbreviations of units and the unit word they stand for ("2 yrs" = "2 years"); "h" only glued to a
#: number ("24h")
UNIT_ABBREVIATIONS: dict[str, str] = {
    "hr": "hour", "hrs": "hour", "h": "hour", "yr": "year", "yrs": "year", "min": "minute",
    "mins": "minute", "sec": "second", "secs": "second", "wk": "week", "wks": "week",
}  # fmt: skip
_GLUED_UNITS = frozenset({"h"})

#: words that are units after a number ("thirty days", "two years", "five miles"), stemmed
UNITS: frozenset[str] = frozenset(
    """second seconds minute minutes hour hours day days week weeks fortnight fortnights month months
    year years decade decades century centuries mile miles kilometre kilometres kilometer kilometers km
    metre metres meter meters foot feet inch inches yard yards pound pounds lb lbs ounce ounces oz
    kilogram kilograms kilo kilos kg gram grams ton tons tonne tonnes gallon gallons litre litres liter
    liters quart quarts pint pints degree degrees percent volt volts amp amps watt watts psi mph
    """.split()
) | frozenset(UNIT_ABBREVIATIONS)

_TOKEN_RE = re.compile(
    r"""
    (?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?P<glued>[kKmMbB]n?\b|%)?   # 1,234.5  12.5k  15%
    | (?P<word>[^\W\d_]+(?:['’][^\W\d_]+)?)                                       # words, o'clock, don't
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    kind: TokenKind
    norm: str  # canonical form: stem for words and names, decimal string for numbers
    surface: str  # as written (for reasons)
    bound: bool = False  # a number bound to a unit: "two-year", "thirty days", "24-hour"


def _fold_text(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    if not text.isascii():  # (ASCII has no combining marks: skip the per-character pass)
        text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return text.replace("’", "'").replace("‘", "'").replace("–", "-").replace("—", "-")


@functools.lru_cache(maxsize=64)
def fold(text: str) -> str:
    """Unicode-fold: accents removed (Müller -> Muller), curly quotes and dashes made plain.

    Cached (the last 64 texts): a long answer is folded for each ground-truth sentence it is compared
    with (tokens, refusal phrases)."""
    return _fold_text(text)


def canonical_number(value: Decimal) -> str:
    """A decimal as its shortest exact string: 67000000, 1.5, 0.25 (no exponent, no trailing zeros)."""
    normalised = value.normalize()
    exponent = normalised.as_tuple().exponent
    if isinstance(exponent, int) and exponent > 0:
        normalised = normalised.quantize(Decimal(1))
    text = format(normalised, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


def stem(word: str) -> str:
    """A small deterministic suffix stemmer (lower-case input): cities->city, played->play, running->run."""
    w = word.lower().replace("'", "")
    if len(w) <= 3:
        return w
    for suffix, repl, min_len in (
        ("ies", "y", 5),
        ("sses", "ss", 5),
        ("ness", "", 6),
        ("ment", "", 7),
        ("ingly", "", 7),
        ("edly", "", 7),
        ("ing", "", 6),
        ("ed", "", 5),
        ("ly", "", 5),
        ("es", "", 5),
        ("s", "", 4),
    ):
        if w.endswith(suffix) and len(w) >= min_len:
            if suffix == "s" and w.endswith(("ss", "us", "is")):
                return w
            if suffix == "es" and not w.endswith(("ches", "shes", "xes", "sses", "zes", "oes")):
                w = w[:-1]  # "titles" -> "title" (-> "titl" below, like "title")
            else:
                w = w[: len(w) - len(suffix)] + repl
            break
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]  # running -> runn -> run
    if len(w) > 4 and w.endswith("e"):
        w = w[:-1]  # "title" and "titled" meet at "titl"
    return w


def _is_capitalised(surface: str) -> bool:
    return surface[:1].isupper()


def _next(text: str, raw: list[re.Match[str]], i: int) -> tuple[re.Match[str] | None, str]:
    """The match after ``raw[i]`` and what separates them: "" glued, "-" a hyphen, " " white space,
    else "other" (and "other" when there is none)."""
    if i + 1 >= len(raw):
        return None, "other"
    nxt = raw[i + 1]
    between = text[raw[i].end() : nxt.start()]
    if between in ("", "-"):
        return nxt, between
    return nxt, " " if between.isspace() else "other"


def _unit_word(match: re.Match[str], gap: str) -> bool:
    """Whether the match is a unit word after a number separated by ``gap``."""
    word = match.group("word")
    if word is None:
        return False
    lower = word.lower()
    if lower in _GLUED_UNITS:
        return gap == ""
    return lower in UNITS and gap in (" ", "-")


def _binds(nxt: re.Match[str] | None, gap: str) -> bool:
    """Whether a number is bound to the next match: a unit word after it, by a space or a hyphen."""
    return nxt is not None and _unit_word(nxt, gap)


def tokens_of(text: str) -> list[Token]:
    """Content tokens of a text, in order: numbers (scaled, canonical), names, stemmed words.

    Stopwords are dropped; a number word followed by a scale word ("two million") is one number;
    a scale word after a number multiplies it ("67 million" = 67000000); a tens word and a digit word
    are one number ("twenty-four"); a number bound to a unit is marked ``bound`` (module docstring).
    """
    text = fold(text)
    raw = list(_TOKEN_RE.finditer(text))
    out: list[Token] = []
    i = 0
    while i < len(raw):
        m = raw[i]
        value, surface, nxt, gap, i = _number_start(text, raw, i)
        if value is not None:
            i = _append_number(text, raw, i, m, value, surface, nxt, gap, out)
            continue
        token = _word_token(m.group("word"), out)
        if token is not None:
            out.append(token)
        i += 1
    return out


def _number_start(
    text: str, raw: list[re.Match[str]], i: int
) -> tuple[Decimal | None, str, re.Match[str] | None, str, int]:
    """(value, surface, next match, gap to it, index) of the number starting at ``raw[i]`` (digits, a
    number word, "one" bound to a unit, a tens word and a digit word); value None: not a number."""
    m = raw[i]
    surface = m.group(0)
    value: Decimal | None = None
    nxt: re.Match[str] | None = None
    gap = "other"
    if m.group("num") is not None:
        try:
            value = Decimal(m.group("num").replace(",", ""))
        except InvalidOperation:  # pragma: no cover - the regex only admits digits
            value = None
        glued = (m.group("glued") or "").lower()
        if glued and glued != "%":
            value = value * SCALES.get(glued, SCALES.get(glued[:1], 1)) if value is not None else None
        nxt, gap = _next(text, raw, i)
        return value, surface, nxt, gap, i
    lower = m.group("word").lower()
    if lower in NUMBER_WORDS or lower == "one":
        nxt, gap = _next(text, raw, i)
    if lower in NUMBER_WORDS:
        value = Decimal(NUMBER_WORDS[lower])
    elif lower == "one" and _binds(nxt, gap):
        value = Decimal(1)  # "one-year", "one hour": a number, not a pronoun
    if (
        value is not None
        and lower in _TENS
        and nxt is not None
        and gap in ("-", " ")
        and (nxt.group("word") or "").lower() in _DIGIT_WORDS
    ):
        value += _DIGIT_WORDS[nxt.group("word").lower()]  # "twenty-four" = 24
        surface = text[m.start() : nxt.end()]
        i += 1
        nxt, gap = _next(text, raw, i)
    return value, surface, nxt, gap, i


def _append_number(
    text: str,
    raw: list[re.Match[str]],
    i: int,
    m: re.Match[str],
    value: Decimal,
    surface: str,
    nxt: re.Match[str] | None,
    gap: str,
    out: list[Token],
) -> int:
    """Append the number begun at ``m`` (times a following scale word, marked bound to a unit, with a
    glued unit's word after it) to ``out``; the index after it."""
    # a following scale word multiplies ("67 million", "two billion", "1.2 bn")
    if nxt is not None and nxt.group("word"):
        scale = nxt.group("word").lower()
        if scale in SCALES and scale not in _GLUED_ONLY:
            value = value * SCALES[scale]
            surface = f"{surface} {nxt.group(0)}"
            i += 1
            nxt, gap = _next(text, raw, i)
    ordinal = (m.group("word") or "").lower() in _ORDINALS  # "first-aid", "third-party": no unit
    bound = not ordinal and _binds(nxt, gap)
    out.append(Token("number", canonical_number(value), surface, bound))
    if bound and nxt is not None and nxt.group("word").lower() in _GLUED_UNITS:
        out.append(Token("word", stem(UNIT_ABBREVIATIONS["h"]), nxt.group(0)))
        i += 1  # "24h": the glued unit, a single letter dropped below otherwise
    return i + 1


def _word_token(word: str, out: list[Token]) -> Token | None:
    """The token of a word that is not a number (``out``: the tokens before it); None for a stopword,
    a single letter or a percent word."""
    lower = word.lower()
    if lower in STOPWORDS or lower.replace("'", "") in STOPWORDS or len(lower) == 1:
        return None
    if lower in ("percent", "per", "cent", "%"):
        return None
    if lower in UNIT_ABBREVIATIONS and out and out[-1].bound:
        return Token("word", stem(UNIT_ABBREVIATIONS[lower]), word)  # "2 yrs" = "2 years"
    kind: TokenKind = "name" if _is_capitalised(word) else "word"
    return Token(kind, stem(lower), word)


@functools.lru_cache(maxsize=128)
def normalise_text(text: str) -> str:
    """Canonical string of a text's content tokens (for exact/normalised matching of short answers).

    Cached (the last 128 texts): exact match compares every ground-truth sentence with the whole
    answer, and every answer sentence with the whole ground truth, so without the cache a long answer
    was tokenised once per sentence of the other side (quadratic: 50k characters each took ~60 s)."""
    return " ".join(t.norm for t in tokens_of(text))
