"""A python evaluator for groundwatch: does the answer speak the question's language?

``same_language(interaction)`` guesses each text's language with a small dependency-free heuristic and
returns ``{"score": True/False, "reason": ...}``. The guess: the writing system first (Cyrillic, Greek,
Arabic, Hebrew, Devanagari, Thai, Hangul, kana, Han ideographs), then, for Latin script, which of eight
languages' most common short words the text holds most of (en, fr, de, es, it, pt, nl, sv). A text it
cannot place (too short, no common word) counts as matching: the evaluator flags only a clear mismatch.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

_COMMON = {
    "en": "the and is are of to in it that for you with this not be on have what how can",
    "fr": "le la les est et des une un du que pour pas vous dans ce qui sur avec sont",
    "de": "der die das und ist nicht ein eine zu den mit sie ich es sich auf für von",
    "es": "el la los las es y de que en un una por para no con se del su al",
    "it": "il lo la gli le è e di che un una per non con si del della sono al",
    "pt": "o a os as é e de que em um uma para não com se do da no na",
    "nl": "de het een en is van dat niet zijn op te met voor ik je er wat",
    "sv": "och är det att en ett som inte på med för till av jag du har",
}
_WORDS = {lang: set(words.split()) for lang, words in _COMMON.items()}
_WORD = re.compile(r"[^\W\d_]+")
_SCRIPTS = (
    ("CYRILLIC", "cyrillic"), ("GREEK", "greek"), ("ARABIC", "arabic"), ("HEBREW", "hebrew"),
    ("DEVANAGARI", "devanagari"), ("THAI", "thai"), ("HANGUL", "korean"), ("HIRAGANA", "japanese"),
    ("KATAKANA", "japanese"), ("CJK", "chinese"), ("LATIN", "latin"),
)  # fmt: skip


def script(text: str) -> str | None:
    """The writing system most of the text's first 200 letters are in (kana among them makes it Japanese)."""
    counts: dict[str, int] = {}
    seen = 0
    for ch in text:
        if not ch.isalpha():
            continue
        seen += 1
        if seen > 200:
            break
        if ch.isascii():
            counts["latin"] = counts.get("latin", 0) + 1
            continue
        name = unicodedata.name(ch, "")
        for prefix, label in _SCRIPTS:
            if name.startswith(prefix):
                counts[label] = counts.get(label, 0) + 1
                break
    if not counts:
        return None
    if counts.get("japanese"):
        return "japanese"
    return max(counts, key=lambda k: counts[k])


def language(text: str) -> str | None:
    """A guess at the text's language (a code for Latin script, the script's name otherwise); None."""
    found = script(text)
    if found != "latin":
        return found
    words = [w.casefold() for w in _WORD.findall(text[:2000])]
    scores = {lang: sum(w in common for w in words) for lang, common in _WORDS.items()}
    best = max(scores, key=lambda k: scores[k])
    ranked = sorted(scores.values(), reverse=True)
    if ranked[0] < 2 or ranked[0] == ranked[1]:
        return None
    return best


def same_language(interaction: Any) -> dict[str, Any]:
    asked, answered = language(interaction.question), language(interaction.answer)
    if asked is None or answered is None:
        return {"score": True, "reason": f"cannot tell (question {asked}, answer {answered})"}
    return {"score": asked == answered, "reason": f"question {asked}, answer {answered}"}
