"""The dimensions of an evaluation (what the dashboard, ``report --by`` and alert rules slice by), and the
cardinality guard that bounds how many distinct values each keeps per day. Pure: no storage here (the
ClickHouse store seeds the guard from the rows it already holds, streams/clickhouse/dimensions.py).

A dimension is a configured metadata path (``prompt_version``, ``customer.tier``: a dot reaches into a
nested object; a key that itself holds the dot wins) or a built-in:

- ``answer_length``: the answer's length in characters, bucketed (``<100``, ``100-499``, ``500-1999``,
  ``2000+``);
- ``has_ground_truth``: ``yes`` or ``no``;
- ``custom.<name>.version``: the version a custom evaluator scored the interaction with (only where one
  did; ``evaluator_versions``);
- ``turn``: the question's turn in its conversation (``1``, ``2``, ``3-5``, ``6-10``, ``11+``), counted
  from the user turns of its history; a history cut to the limits (``history_truncated``) counts the
  turns kept, so its bucket is a lower bound;
- ``tool``: the tools the current question called (steps not of earlier turns): the tool's name, or the
  distinct names sorted and joined by ``+`` (``get_order+search_kb``); absent without tool calls.

An interaction without a metadata path has no value for it (queries show ``(none)``). A string value is
kept as sent (an empty one as ``(empty)``), cut to ``max_value_chars``; a number or boolean becomes its
JSON text, an object or list its compact JSON.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from datetime import date
from typing import Any

from schemas.interaction import Interaction
from schemas.settings import DimensionSettings

#: what a value past the guard's limit is stored as
OTHER = "(other)"
#: what queries show for an evaluation without the dimension
NONE = "(none)"
#: what an empty string value is stored as (a missing key reads as '' in a ClickHouse Map)
EMPTY = "(empty)"

_LENGTH_EDGES = ((100, "<100"), (500, "100-499"), (2000, "500-1999"))
_TURN_EDGES = ((1, "1"), (2, "2"), (5, "3-5"), (10, "6-10"))


def answer_length_bucket(chars: int) -> str:
    for edge, label in _LENGTH_EDGES:
        if chars < edge:
            return label
    return "2000+"


def turn_bucket(turn: int) -> str:
    for edge, label in _TURN_EDGES:
        if turn <= edge:
            return label
    return "11+"


def lookup(metadata: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` (the key itself first, then dot by dot into nested objects); None when absent."""
    if path in metadata:
        return metadata[path]
    node: Any = metadata
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def as_value(raw: Any, max_chars: int) -> str | None:
    """A metadata value as a dimension value (module docstring); None for a JSON null."""
    if raw is None:
        return None
    if isinstance(raw, str):
        text = raw
    else:
        text = json.dumps(raw, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    text = text[:max_chars]
    return text if text else EMPTY


def tools_called(interaction: Interaction) -> str | None:
    """The ``tool`` dimension's value (module docstring); None without tool calls."""
    names = sorted({s.name for s in interaction.steps if not s.earlier_turn})
    return "+".join(names) if names else None


def builtins(interaction: Interaction) -> dict[str, str]:
    turn = 1 + sum(1 for t in interaction.history if t.role == "user")
    out = {
        "answer_length": answer_length_bucket(len(interaction.answer)),
        "has_ground_truth": "yes" if interaction.ground_truth else "no",
        "turn": turn_bucket(turn),
    }
    tool = tools_called(interaction)
    if tool is not None:
        out["tool"] = tool
    return out


def extract(interaction: Interaction | None, settings: DimensionSettings) -> dict[str, str]:
    """The dimensions of one interaction, before the cardinality guard."""
    if interaction is None:
        return {}
    out: dict[str, str] = {}
    for path in settings.paths:
        value = as_value(lookup(interaction.metadata, path), settings.max_value_chars)
        if value is not None:
            out[path] = value
    out.update(builtins(interaction))
    return out


#: the built-in dimensions of topics: the topic's id and name, and the version of the model that assigned it
TOPIC, TOPIC_MODEL = "topic", "topic_model"


def topic_dimension(topic: str | None, label: str | None, model: int | None = None) -> dict[str, str]:
    """The ``topic`` dimension: the topic's id and name (``t3: warning, light, message``; ``other``), and
    ``topic_model``: the version of the model that assigned it (``v2``); none where no topic was
    assigned. A refit keeps a topic's id and may rename it: the id leads, so a slice filter or an alert
    rule reads the same topic by it."""
    if topic is None:
        return {}
    named = {TOPIC: topic if not label or label == topic else f"{topic}: {label}"}
    return named | ({TOPIC_MODEL: f"v{model}"} if model is not None else {})


def evaluator_versions(custom: Mapping[str, Any]) -> dict[str, str]:
    """``custom.<name>.version`` -> the version each custom evaluator scored with (schemas.evaluators): a
    dimension, so a breakdown of ``custom.<name>`` by it shows a changed evaluator as a series of its own."""
    return {f"custom.{name}.version": str(score.version) for name, score in custom.items() if score.version}


#: (day, dimension) -> the values already admitted that day, read from storage
Seed = Callable[[date], Mapping[str, Iterable[str]]]


class CardinalityGuard:
    """At most ``limit`` distinct values per dimension and UTC day; the rest become ``(other)``.

    The values admitted on a day are read back from storage (``seed``) the first time the guard meets
    that day, so the guard holds across restarts: what was stored is what was admitted. A value once
    admitted stays admitted (a redelivered or replayed interaction keeps its value). At most ``days``
    days are held in memory; an older one is read again when it comes back.
    """

    def __init__(self, limit: int, seed: Seed, days: int = 8) -> None:
        self.limit = limit
        self.seed = seed
        self.days = days
        self._admitted: OrderedDict[date, dict[str, set[str]]] = OrderedDict()
        self.others = 0  # values turned into (other), for the worker's logs and tests

    def _day(self, day: date) -> dict[str, set[str]]:
        if day in self._admitted:
            self._admitted.move_to_end(day)
            return self._admitted[day]
        stored = {name: set(values) - {OTHER} for name, values in self.seed(day).items()}
        self._admitted[day] = stored
        while len(self._admitted) > self.days:
            self._admitted.popitem(last=False)
        return stored

    def admit(self, day: date, dimensions: Mapping[str, str]) -> dict[str, str]:
        """``dimensions`` with each value past its day's limit replaced by ``(other)``."""
        admitted = self._day(day)
        out = {}
        for name, value in dimensions.items():
            seen = admitted.setdefault(name, set())
            if value not in seen and len(seen) >= self.limit:
                self.others += 1
                value = OTHER
            elif value != OTHER:
                seen.add(value)
            out[name] = value
        return out
