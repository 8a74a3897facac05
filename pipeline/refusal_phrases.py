"""Phrase patterns that mark an answer refusal (the lexical judge's refusal detector).

A refusal (docs/method.md) explicitly says that information is missing or insufficient, or declines to answer.
The patterns were written from the refusal definition and checked on the DelucionQA dev file
(``groundwatch eval ../shared/data/refusal_delucionqa.jsonl --judge lexical``); they look only at
the text given (the pipeline passes the first sentences of an answer).
"""

from __future__ import annotations

import re

from pipeline.text_normalise import fold

_SOURCE = r"(?:given |provided |above |available |following |this |that |the |your |specific )*(?:context|passage|text|information|document|documents|documentation|manual|paragraph|excerpt|article|source|sources|data|snippet|content)s?"  # noqa: E501
_NEG = r"(?:does not|doesn't|do not|don't|did not|didn't|is not|isn't|are not|aren't|was not|wasn't|cannot|can't|could not|couldn't|fails to|lacks|has no|have no)"  # noqa: E501

_PATTERNS: tuple[tuple[str, str], ...] = (
    # "I don't know", "I cannot answer", "we couldn't find", "I am unable to determine"
    (
        "i_cannot",
        r"\b(?:i|we)(?: really| simply)? (?:do not|don't|cannot|can't|could not|couldn't|am unable to|'m unable to|am not able to|'m not able to|was unable to|was not able to|have no way to) (?:know|find|answer|provide|determine|say|tell|locate|see|confirm|verify|give|offer|assist|help|access|be certain)",  # noqa: E501
    ),
    (
        "i_have_no_information",
        r"\b(?:i|we) (?:do not|don't) have (?:any |enough |sufficient |specific |the |access to )*(?:information|details|data|context|knowledge|answer)",  # noqa: E501
    ),
    ("i_am_not_sure", r"\bi (?:am|'m) not (?:sure|certain|aware)\b"),
    ("unable_to", r"\bunable to (?:answer|find|provide|determine|locate|identify|confirm|say)"),
    ("not_possible_to", r"\bnot (?:possible|able) to (?:answer|determine|say|tell|know|provide|identify)"),
    # "the given context does not provide/mention ..."
    (
        "source_does_not",
        _SOURCE
        + r" (?:\w+ ){0,4}?"
        + _NEG
        + r" (?:\w+ )?(?:provide|mention|contain|include|specify|say|state|have|give|cover|address|discuss|describe|explain|offer|refer|relate|talk|answer|indicate|clarify|list|detail|tell|show)",  # noqa: E501
    ),
    # "... is not mentioned in the given context", "not specified in the passage"
    (
        "is_not_mentioned",
        r"\b(?:is|are|was|were) not (?:explicitly |specifically |directly |clearly )?(?:mentioned|specified|provided|stated|included|covered|addressed|given|listed|described|discussed|defined|found|explained|clear)",  # noqa: E501
    ),
    (
        "not_mentioned_in",
        r"\bnot (?:mentioned|specified|provided|stated|included|covered|addressed|described|discussed|found|given) (?:in|by|within) (?:the |this |your )",  # noqa: E501
    ),
    # "there is no information about ...", "no mention of"
    (
        "there_is_no",
        r"\b(?:there is|there's|there are|there was|with|contains|has|have|provides|gives|includes) no (?:specific |explicit |relevant |direct |further |additional |such |clear |mention|information|details|data|reference|context|indication|answer)",  # noqa: E501
    ),
    (
        "no_information_about",
        r"\bno (?:specific |relevant |further |additional |explicit )?(?:information|mention|details|data|reference) (?:is |was |are )?(?:provided|given|available|about|on|regarding|related|of|in|that)",  # noqa: E501
    ),
    # apologies and requests to rephrase
    (
        "apology",
        r"\b(?:i'm sorry|i am sorry|i apologize|i apologise|sorry|unfortunately)\b,? (?:but )?(?:i |the |this |that |there |it |your |without |based )",  # noqa: E501
    ),
    (
        "please_rephrase",
        r"\bcould you (?:please )?(?:rephrase|clarify|provide more|provide additional|specify|be more specific)",  # noqa: E501
    ),
    (
        "please_provide_more",
        r"\b(?:please|can you|could you) (?:please )?(?:provide|give|share) (?:me )?(?:more|additional|further) (?:context|information|details)",  # noqa: E501
    ),
    (
        "it_is_unclear",
        r"\b(?:it is|it's|it remains) (?:not clear|unclear|not possible|impossible|difficult) (?:to (?:determine|say|tell|know|answer)|what|whether|which|how|if)",  # noqa: E501
    ),
    (
        "without_more_information",
        r"\bwithout (?:further|additional|more|any|specific|the) (?:\w+ )?(?:context|information|details|data)",  # noqa: E501
    ),
    (
        "unrelated_to",
        r"\b(?:is|are|was|seems) (?:not|un)related to (?:the |this |your )?(?:context|topic|passage|question|information)",  # noqa: E501
    ),
    ("does_not_relate", r"\b(?:does not|doesn't) (?:seem to )?(?:relate|pertain) to"),
    ("beyond_scope", r"\bbeyond (?:the scope|my knowledge)"),
    ("insufficient_information", r"\binsufficient (?:information|context|details|data)"),
    ("cannot_be_determined", r"\bcannot be (?:determined|answered|found|inferred|confirmed)"),
)

#: name -> compiled pattern, in the order they are tried (``LexicalOptions.refusal_off`` names some off)
REFUSAL_PATTERNS: dict[str, re.Pattern[str]] = {name: re.compile(p) for name, p in _PATTERNS}


#: refusal patterns off by default: none of them helped out-of-fold on the labeled refusal set (most never
#: fired there, ``there_is_no`` only raised false refusals), so none is known to be worth its risk
REFUSAL_OFF: frozenset[str] = frozenset(
    """i_have_no_information i_am_not_sure unable_to not_possible_to not_mentioned_in there_is_no
    please_provide_more it_is_unclear unrelated_to does_not_relate beyond_scope insufficient_information
    cannot_be_determined""".split()
)


#: a negative reply opening the text: "No, ...", "No. ...", "Nope, ...", "Not really: ...", "**No**, ..."
#: (a word of negation and then punctuation, so "No information is available" is no reply)
_NEGATIVE_REPLY = re.compile(
    r"^\W*(?:no|nope|nah|not really|not at all|certainly not|of course not)[*_\"')\]]*\s*[,.;:!-]"
)

#: patterns whose words also state a fact about the thing asked: "X is not covered/included/found",
#: "not covered by the warranty", "there is no spare tyre", "unfortunately the car does not have it"
_FACT_LIKE = frozenset({"is_not_mentioned", "not_mentioned_in", "there_is_no", "apology"})

#: what makes such a match a refusal after a negative reply: a verb only a text does ("is not
#: mentioned/specified/stated"), the source named ("not covered in the manual", "the information is not
#: provided", "no details in the given context"), or an apology for the speaker ("sorry, I ...")
_ABOUT_SOURCE = re.compile(
    r"\b(?:mentioned|specified|stated|described|discussed|explained)\b"
    r"|\b(?:in|by|within|from|according to|of|about) (?:the |this |that |your |these |those |any )?"
    + _SOURCE
    + r"\b|\b(?:information|details|data|context|passage|text|documentation|manual)(?: \w+){0,2}"
    r" (?:is|are|was|were) not\b"
    r"|\b(?:sorry|apologi[sz]e),? (?:but )?(?:i|we|without|based)\b"
)


def _sentence_at(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` that holds ``text[start:end]`` (split at ". ", "! ", "? ", "; ")."""
    left = max(text.rfind(mark, 0, start) for mark in (". ", "! ", "? ", "; "))
    right = [i for i in (text.find(mark, end) for mark in (". ", "! ", "? ", "; ")) if i >= 0]
    return text[left + 1 if left >= 0 else 0 : min(right) if right else len(text)]


def refusal_match(text: str, off: frozenset[str] = frozenset(), *, negative_reply: bool = True) -> str | None:
    """The first refusal phrase found in the text (lower-cased, accents folded), or None; the patterns
    named in ``off`` are not tried.

    With ``negative_reply``, a text that opens with a negative reply ("No, X is not covered by the
    warranty.") answers the question: there a fact-like match (``_FACT_LIKE``) is a refusal only when its
    sentence is about the source or the speaker (``_ABOUT_SOURCE``: "No, that is not mentioned in the
    manual", "No, sorry, I ..."). The other patterns ("I can't help", "the context does not say", "no
    information is available") are refusals after a "No," too."""
    lowered = fold(text).lower()
    lowered = re.sub(r"\s+", " ", lowered)
    replied = negative_reply and _NEGATIVE_REPLY.match(lowered) is not None
    for name, pattern in REFUSAL_PATTERNS.items():
        if name in off:
            continue
        for m in pattern.finditer(lowered):
            if replied and name in _FACT_LIKE:
                if not _ABOUT_SOURCE.search(_sentence_at(lowered, m.start(), m.end())):
                    continue
            return m.group(0)
    return None


def is_refusal(text: str) -> bool:
    return refusal_match(text) is not None


#: what every refusal has and a plain answer (a name, a number, a date) never has: a word of negation,
#: inability, lack or uncertainty. Only texts with one are worth asking a judge about.
_CUE = re.compile(
    r"\b(?:not|no|none|nothing|nobody|never|neither|nor|without|cannot|unable|unknown|unclear|uncertain|"
    r"unsure|unavailable|impossible|insufficient|lack\w*|missing|sorry|apolog\w*|unfortunately|"
    r"declin\w*|refus\w*)\b|n't\b"
)


def may_refuse(text: str) -> bool:
    """Whether the text holds a refusal cue (``_CUE``): a text without one is not a refusal, whatever a
    judge would say (``pipeline.refusal_prefilter``)."""
    return _CUE.search(fold(text).lower().replace("’", "'")) is not None
