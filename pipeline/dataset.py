"""Reading a JSONL file of interactions for offline evaluation (``groundwatch eval``).

One JSON object a line, in the ``Interaction`` shape (``id`` for ``interaction_id`` and plain-string
contexts are accepted; unknown fields such as ``peers`` or ``gold_answers`` are kept in ``metadata``).
A line that is not valid JSON, not an object, fails validation or repeats an earlier id is reported as a
``LineError`` with its 1-based line number and the reason; it is never dropped silently. Blank lines are
counted, not errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from schemas.interaction import Interaction
from schemas.json_input import read_json
from schemas.settings import Limits
from schemas.validation import describe_validation_error


class LineError(BaseModel):
    line: int  # 1-based line number in the input file
    interaction_id: str | None = None
    stage: str = "validate"  # "validate" for bad input; a pipeline stage when evaluation failed
    reason: str


@dataclass
class DatasetLine:
    line: int
    interaction: Interaction


@dataclass
class Dataset:
    lines: list[DatasetLine] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)
    blank_lines: int = 0
    read_lines: int = 0  # non-blank lines read (valid or not)


def parse_line(text: str, line: int, limits: Limits) -> DatasetLine | LineError:
    try:
        data: Any = read_json(text, limits.max_json_depth)
    except json.JSONDecodeError as exc:
        return LineError(line=line, reason=f"not valid JSON: {exc.msg} at column {exc.colno}")
    except ValueError as exc:  # too deep, NaN, a lone surrogate
        return LineError(line=line, reason=f"not valid JSON: {exc}")
    if not isinstance(data, dict):
        return LineError(line=line, reason=f"a line must be a JSON object, not {type(data).__name__}")
    raw_id = data.get("interaction_id", data.get("id"))
    interaction_id = str(raw_id) if isinstance(raw_id, str | int) else None
    try:
        interaction = Interaction.model_validate(data, context={"limits": limits})
    except ValidationError as exc:
        reason = describe_validation_error(exc, whole="line")
        return LineError(line=line, interaction_id=interaction_id, reason=reason)
    return DatasetLine(line=line, interaction=interaction)


def iter_lines(lines: Iterable[str | bytes], limits: Limits) -> Iterator[DatasetLine | LineError | None]:
    """Parse each line; None for a blank line. A line of bytes that is not UTF-8 is an error, never
    silently repaired."""
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield LineError(line=number, reason=f"not UTF-8: {exc}")
                continue
        else:
            text = raw
        if not text.strip():
            yield None
            continue
        yield parse_line(text, number, limits)


def read_dataset(path: Path, limits: Limits | None = None, limit: int | None = None) -> Dataset:
    """Read up to ``limit`` non-blank lines of a JSONL file (every line when None)."""
    limits = limits or Limits()
    dataset = Dataset()
    seen: dict[str, int] = {}
    with path.open("rb") as handle:
        for item in iter_lines(handle, limits):
            if item is None:
                dataset.blank_lines += 1
                continue
            if limit is not None and dataset.read_lines >= limit:
                break
            dataset.read_lines += 1
            if isinstance(item, LineError):
                dataset.errors.append(item)
                continue
            iid = item.interaction.interaction_id
            if iid in seen:
                dataset.errors.append(
                    LineError(
                        line=item.line,
                        interaction_id=iid,
                        reason=f"duplicate interaction_id {iid!r} (first on line {seen[iid]})",
                    )
                )
                continue
            seen[iid] = item.line
            dataset.lines.append(item)
    return dataset
