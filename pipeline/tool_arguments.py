"""Ungrounded tool arguments, lexically: argument values the conversation never gave the model.

A tool call of the current question whose argument holds an identifier, a number or a name that appears
nowhere in the conversation (the question, the history) nor in the results of the steps before it is
the usual sign of a fabricated order id, date or amount. Checked values (``checked_values``): numbers
(not booleans); strings holding a digit (ids, dates, amounts); strings of one word without spaces that
mix letters with ``_``, ``-``, ``.``, ``@`` or ``/`` (identifiers, e-mail addresses); and names of one to
four capitalised words. Free text (a search query written by the model) is not checked: the model is
expected to phrase it. Values shorter than ``tools.argument_min_chars`` are not checked.

A value is found when its text, lower-cased, occurs in the haystack, or does with spaces, commas,
dots, dashes, underscores and slashes taken out of both (``4,471`` is ``4471``, ``2026-11-26`` is
``2026/11/26``). A history cut to the limits (``history_truncated``) may have lost the turn a value came
from; such a value is reported as ungrounded. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from schemas.interaction import Interaction
from schemas.tools import ToolStep

_DIGIT = re.compile(r"\d")
_IDENTIFIER = re.compile(r"^[\w.@/-]+$")
_NAME = re.compile(r"^[A-Z][\w'&.-]*( [A-Z][\w'&.-]*){0,3}$")
_SEPARATORS = re.compile(r"[\s,._/\-]+")


def _number(value: float | int) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def checked_values(arguments: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(argument path, value text) of each value of ``arguments`` the check looks at (module docstring)."""
    if isinstance(arguments, dict):
        for key, value in arguments.items():
            yield from checked_values(value, f"{path}.{key}" if path else str(key))
    elif isinstance(arguments, list):
        for i, value in enumerate(arguments):
            yield from checked_values(value, f"{path}[{i}]")
    elif isinstance(arguments, bool) or arguments is None:
        return
    elif isinstance(arguments, int | float):
        yield path, _number(arguments)
    elif isinstance(arguments, str):
        text = arguments.strip()
        if _DIGIT.search(text) or _NAME.match(text):
            yield path, text
        elif _IDENTIFIER.match(text) and re.search(r"[_.@/-]", text):
            yield path, text


def _compact(text: str) -> str:
    return _SEPARATORS.sub("", text.lower())


class _Haystack:
    def __init__(self, texts: list[str]) -> None:
        self.plain = "\n".join(t.lower() for t in texts)
        self.compact = "|".join(_compact(t) for t in texts)

    def add(self, text: str) -> None:
        self.plain += "\n" + text.lower()
        self.compact += "|" + _compact(text)

    def holds(self, value: str) -> bool:
        low = value.lower()
        if low in self.plain:
            return True
        compact = _compact(low)
        return bool(compact) and compact in self.compact


def ungrounded_arguments(interaction: Interaction, min_chars: int = 3) -> list[str] | None:
    """``"<tool>.<argument>=<value>"`` for each checked argument value of the current question's calls
    found nowhere before it; None when no call of the current question has a value to check."""
    found = unsupported_values(interaction, min_chars)
    return [value.label for value in found] if found is not None else None


@dataclass(frozen=True)
class UnsupportedValue:
    """An argument value the lexical check did not find: its label ``<tool>.<argument>=<value>`` and how
    many tool results (of ``interaction.steps``, in order) the model had received before the call."""

    label: str
    results_before: int


def unsupported_values(interaction: Interaction, min_chars: int = 3) -> list[UnsupportedValue] | None:
    """``ungrounded_arguments`` with, for each value, the tool results the call came after (what a second
    opinion, ``pipeline.argument_judge``, shows the judge); None when nothing was checked."""
    haystack = _Haystack([interaction.question, *(t.content for t in interaction.history)])
    found: list[UnsupportedValue] = []
    checked = False
    results = 0
    for step in interaction.steps:
        if not step.earlier_turn:
            for path, value in _values(step, min_chars):
                checked = True
                if not haystack.holds(value):
                    label = f"{step.name}.{path}={value}" if path else f"{step.name}={value}"
                    found.append(UnsupportedValue(label, results))
        if step.result is not None:
            haystack.add(step.result)
            results += 1
    return found if checked else None


def _values(step: ToolStep, min_chars: int) -> Iterator[tuple[str, str]]:
    if isinstance(step.arguments, dict):
        args: Any = step.arguments
    else:
        return  # no arguments, or a string that is not a JSON object: nothing to read values from
    for path, value in checked_values(args):
        if len(value) >= min_chars:
            yield path, value
