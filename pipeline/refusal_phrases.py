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


def refusal_match(text: str, off: frozenset[str] = frozenset()) -> str | None:
    """The first refusal phrase found in the text (lower-cased, accents folded), or None; the patterns
    named in ``off`` are not tried."""
    lowered = fold(text).lower()
    lowered = re.sub(r"\s+", " ", lowered)
    for name, pattern in REFUSAL_PATTERNS.items():
        if name in off:
            continue
        m = pattern.search(lowered)
        if m:
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
