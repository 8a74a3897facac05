"""What an answer is judged against: the retrieved contexts, then the tool results the model received.

A tool step's result is evidence when ``tools.evidence`` is on, the tool passes ``tools.evidence_allow``
and ``tools.evidence_deny``, and the step is of the current question (or ``tools.evidence_earlier_turns``).
Its result is split into passages (``split_result``): a JSON list of documents (objects with a string
``content`` or ``text``; also such a list under ``documents``, ``results``, ``data``, ``items``, ``hits``
or ``matches`` of an object) gives one passage each, named by the document's ``id`` or ``source``; other
JSON is rendered readably (``key: value`` lines, ``- item`` lists); plain text is one passage, as a context
is. An empty list, an empty object or a blank text gives none. Each passage names its tool, call id and
step (``schemas.interaction.Passage``); a passage without a document name of its own is named
``tool:<name>``.

The context pair's premise is ``evidence`` (contexts first, then the tool passages), so a statement's
``passage`` is an index into that list; an Evaluation keeps the tool passages it was judged with
(``Evaluation.evidence``) to name them later.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from schemas.document_names import document_name
from schemas.interaction import Interaction, Passage
from schemas.json_input import json_value
from schemas.settings import ToolSettings
from schemas.tools import ToolStep

#: keys of a JSON object under which tools commonly return their list of documents
DOCUMENT_LIST_KEYS = ("documents", "results", "data", "items", "hits", "matches")
_TEXT_KEYS = ("content", "text", "page_content", "snippet")


def counts_as_evidence(step: ToolStep, tools: ToolSettings) -> bool:
    """Whether the step's result is evidence under the settings (module docstring)."""
    if not tools.evidence or step.result is None:
        return False
    if tools.evidence_allow and step.name not in tools.evidence_allow:
        return False
    if step.name in tools.evidence_deny:
        return False
    return tools.evidence_earlier_turns or not step.earlier_turn


def _document_text(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    for key in _TEXT_KEYS:
        value = item.get(key)
        if isinstance(value, str):
            return value
    return None


def _documents(value: Any) -> list[Any] | None:
    """The list of documents a JSON result is, or holds under one of DOCUMENT_LIST_KEYS; None when it is
    no such list. An empty list is a list of no documents."""
    if isinstance(value, dict):
        for key in DOCUMENT_LIST_KEYS:
            inner = value.get(key)
            if isinstance(inner, list):
                value = inner
                break
        else:
            return None
    if not isinstance(value, list):
        return None
    if value and not all(_document_text(item) is not None for item in value):
        return None
    return value


def _scalar(value: Any) -> str:
    """A leaf as text: null, true/false, an empty object or list as {} or [], else its str."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return "{}" if isinstance(value, dict) else "[]"
    return str(value)


def render(value: Any, indent: int = 0) -> str:
    """JSON as readable text: ``key: value`` lines, ``- item`` for list entries, nested by indentation."""
    pad = "  " * indent
    if isinstance(value, dict | list) and value:
        items = value.items() if isinstance(value, dict) else (("-", v) for v in value)
        lines = []
        for key, inner in items:
            head = f"{pad}{key}" if isinstance(value, list) else f"{pad}{key}:"
            if isinstance(inner, dict | list) and inner:
                lines.append(f"{head}\n{render(inner, indent + 1)}")
            else:
                lines.append(f"{head} {_scalar(inner)}")
        return "\n".join(lines)
    return f"{pad}{_scalar(value)}"


def split_result(result: str, max_passages: int) -> list[tuple[str, str | None]]:
    """A tool result as (text, document name) passages (module docstring); at most ``max_passages``, the
    last holding the rest of the documents."""
    if not result.strip():
        return []
    ok, value = json_value(result) if result.lstrip()[:1] in "[{" else (False, None)
    if not ok:
        return [(result, None)]
    documents = _documents(value)
    if documents is None:
        try:
            text = render(value)
        except RecursionError:  # nested deeper than Python renders: kept as the JSON text
            text = result
        return [(text, None)] if text.strip() and value not in ({}, []) else []
    out: list[tuple[str, str | None]] = []
    for item in documents:
        text = _document_text(item) or ""
        if text.strip():
            out.append((text, document_name(item)))
    if len(out) > max_passages:
        rest = "\n\n".join(t for t, _ in out[max_passages - 1 :])
        out = [*out[: max_passages - 1], (rest, None)]
    return out


def tool_passages(interaction: Interaction, tools: ToolSettings) -> list[Passage]:
    """The passages of the steps whose results are evidence, in step order."""
    out: list[Passage] = []
    for index, step in enumerate(interaction.steps):
        if not counts_as_evidence(step, tools) or step.result is None:
            continue
        for text, name in split_result(step.result, tools.max_evidence_passages):
            out.append(
                Passage(
                    text=text,
                    document=name or f"tool:{step.name}",
                    tool=step.name,
                    call_id=step.call_id,
                    step=index,
                )
            )
    return out


def evidence(
    interaction: Interaction, tools: ToolSettings, passages: Sequence[Passage] | None = None
) -> list[Passage]:
    """The contexts, then the tool passages (``passages`` when already computed, e.g. an Evaluation's)."""
    return [*interaction.contexts, *(tool_passages(interaction, tools) if passages is None else passages)]


# --------------------------------------------------------------------------------------------------
# Answers that state something

_COURTESY = re.compile(
    r"^\s*(hi|hello|hey|thanks?|thank you|you'?re welcome|glad|happy to help|sure|of course|ok(ay)?|"
    r"let me know|is there anything else|anything else|have a (nice|great|good))\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+")


def is_factual(sentence: str) -> bool:
    """Whether a sentence states something evidence could support: it has a word, and it is neither a
    question nor a courtesy (a greeting, thanks, an offer of more help). A short answer counts: "Paris"
    answers the question it follows."""
    text = sentence.strip()
    if not _WORD.search(text) or text.endswith("?") or _COURTESY.match(text):
        return False
    return True


def has_factual_statement(sentences: Iterable[str]) -> bool:
    return any(is_factual(s) for s in sentences)
