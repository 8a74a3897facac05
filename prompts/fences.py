"""Fences around untrusted text, and the neutraliser that keeps the text from closing them.

A fence tag hidden from a plain regex is still read as a tag by a model, so tags are looked for in a
folded copy of the text, never in the text itself:

- every default-ignorable character is dropped: all format characters (Unicode category Cf: zero-width
  space and joiners, soft hyphen, the bidi marks, embeddings, overrides and isolates U+200E/F,
  U+202A-202E, U+2066-2069, the tag characters U+E0020-E007F, ...), the combining grapheme joiner
  U+034F, the variation selectors (U+FE00-FE0F, U+E0100-E01EF, Mongolian U+180B-180F) and the Hangul
  fillers (U+115F, U+1160, U+3164, U+FFA0);
- each character is NFKC-folded (full-width ``＜／ｐｒｅｍｉｓｅ`` is ``</premise``);
- ``<``, ``/`` and each letter of a tag name also match every character Unicode's confusables data
  (UTS #39 ``confusables.txt``, as shipped by the ``confusable-homoglyphs`` package) lists as looking
  like them: Cyrillic ``о`` for ``o``, ``˂`` U+02C2, ``ᐸ`` U+1438 and ``❮`` U+276E for ``<``; the left
  angle brackets (``〈`` U+2329, ``〈`` U+3008, ``⟨`` U+27E8, ``❬`` U+276C), which that data groups
  with one another rather than with ``<``, match ``<`` too. ``‹`` (U+2039) does not: it is what a
  neutralised tag starts with.

Only the tag's opening character is replaced (with ``‹``); the rest of the text is left as written.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

#: tag names used as fences; any of them inside untrusted text is neutralised
FENCE_TAGS = (
    "case",
    "conversation",
    "turn",
    "premise",
    "passage",
    "document",
    "hypotheses",
    "hypothesis",
    "sentences",
    "sentence",
    "texts",
    "text",
    "refusal_question",
    "question",
    "answer",
    "ground_truth",
)
MARK = "‹"  # what a neutralised tag starts with instead of "<"

_ASCII_RE = re.compile(r"<(\s*/?\s*)(" + "|".join(FENCE_TAGS) + r")\b", re.IGNORECASE)

#: default-ignorable code points outside category Cf (Unicode's DerivedCoreProperties.txt)
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul choseong and jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian free variation selectors (U+180E is Cf)
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFFA0, 0xFFA0),  # half-width Hangul filler
    (0xE0000, 0xE0FFF),  # tag characters (Cf) and variation selectors supplement
)


def ignorable(ch: str) -> bool:
    """A character that renders as nothing (Unicode's Default_Ignorable_Code_Point, and every Cf)."""
    if unicodedata.category(ch) == "Cf":
        return True
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _IGNORABLE_RANGES)


def _fold_char(ch: str) -> str:
    if ignorable(ch):
        return ""
    return "".join(c for c in unicodedata.normalize("NFKC", ch) if not ignorable(c))


def folded(text: str) -> tuple[str, list[int]]:
    """``text`` folded character by character (NFKC, ignorables dropped), and for each folded character
    the index of the original character it came from."""
    table: dict[str, str] = {}
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        f = table.get(ch)
        if f is None:
            f = table[ch] = _fold_char(ch)
        out.append(f)
        origin.extend([i] * len(f))
    return "".join(out), origin


@functools.cache
def _lookalikes() -> dict[str, list[dict[str, str]]]:
    from confusable_homoglyphs.confusables import confusables_data  # ~9,600 characters, read once

    data: dict[str, list[dict[str, str]]] = confusables_data
    return data


def _like(*chars: str) -> set[str]:
    """The single characters Unicode's confusables data lists as looking like any of ``chars`` (each
    also as NFKC folds it, since the text is matched folded)."""
    out: set[str] = set()
    data = _lookalikes()
    for ch in chars:
        for glyph in data.get(ch, ()):
            c = glyph["c"]
            if len(c) == 1 and not ignorable(c):
                out |= {c, _fold_char(c)}
    return {c for c in out if len(c) == 1}


def _class(chars: Iterable[str]) -> str:
    return "[" + "".join(re.escape(c) for c in sorted(set(chars))) + "]"


@functools.cache
def _lookalike_re() -> re.Pattern[str]:
    """The fence tags with ``<``, ``/`` and every letter matching its look-alikes (module docstring)."""
    angle = {"❬"} | _like("❬")
    opening = ({"<"} | _like("<") | {c for c in angle if "LEFT" in unicodedata.name(c, "")}) - {MARK}
    slash = {"/"} | _like("/")
    letters = {
        ch: _class({ch.lower(), ch.upper()} | _like(ch.lower(), ch.upper()))
        for ch in set("".join(FENCE_TAGS))
    }
    names = "|".join("".join(letters[ch] for ch in tag) for tag in FENCE_TAGS)
    return re.compile(_class(opening) + r"(\s*" + _class(slash) + r"?\s*)(" + names + r")\b", re.IGNORECASE)


#: characters seen, and whether folding leaves each as it is (at most ``_SELF_FOLDING_MAX`` kept)
_SELF_FOLDING: dict[str, bool] = {}
_SELF_FOLDING_MAX = 20_000


def folds_to_itself(text: str) -> bool:
    """``folded(text)`` is ``text`` itself: no character of it folds to anything else. Most non-ASCII
    text (accents, typographic quotes and dashes) is so, and then needs no walk character by character."""
    for ch in set(text):
        same = _SELF_FOLDING.get(ch)
        if same is None:
            same = _fold_char(ch) == ch
            if len(_SELF_FOLDING) < _SELF_FOLDING_MAX:
                _SELF_FOLDING[ch] = same
        if not same:
            return False
    return True


def neutralise(text: str) -> str:
    """Make any fence tag inside untrusted text inert: ``</premise>`` -> ``‹/premise>``.

    Tags are found in the folded text (module docstring), so ``<\u200b/premise>``, ``＜/premise>`` and
    ``</hypo\u200ethesis>`` are neutralised too; only the tag's ``<`` (or its look-alike) is replaced."""
    if text.isascii():
        return _ASCII_RE.sub(lambda m: MARK + m.group(1) + m.group(2), text)
    if folds_to_itself(text):  # the folded text is the text: its positions are the original ones
        starts = [m.start() for m in _lookalike_re().finditer(text)]
    else:
        fold, origin = folded(text)
        starts = [origin[m.start()] for m in _lookalike_re().finditer(fold)]
    if not starts:
        return text
    pieces: list[str] = []
    last = 0
    for start in starts:
        if start < last:  # one original character folded into two tag openings
            continue
        pieces += [text[last:start], MARK]
        last = start + 1
    pieces.append(text[last:])
    return "".join(pieces)


def fence(tag: str, text: str, item_id: int | None = None) -> str:
    """``<tag id="N">text</tag>`` with the text neutralised."""
    attr = f' id="{item_id}"' if item_id is not None else ""
    return f"<{tag}{attr}>{neutralise(text)}</{tag}>"
