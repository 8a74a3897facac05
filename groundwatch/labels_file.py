"""Labels from a JSONL file in the shape ``groundwatch eval`` reads: one object a line with
``interaction_id`` (or ``id``) and ``labels`` (``{"grounded": 1, "correct": 0, ...}``).

Keys of ``labels`` that are not label kinds (``schemas.label.LabelKind``; e.g. ``answerable``) are
counted and left out, except ``custom.<name>``: the label kind of an evaluator of the evaluators file,
and an error when the file (installed by the caller, ``pipeline.custom_evaluators``) has no such
pattern or pass/fail evaluator.
A line that is not JSON, has no id, or a label value other than 0/1 is an error
with its line number; a file with any error imports nothing. ``sample`` keeps a stable-hash share of
the interactions (a draw of its own, independent of the review queue's, ``pipeline.review``) and
records it as each label's inclusion probability, so agreement weighs them as a uniform sample. A
conversation kind's label (``resolved``) is on the line's ``conversation_id`` (an error without one).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline.review import drawn
from schemas.json_input import read_json
from schemas.label import CONVERSATION_KINDS, Label, LabelKind, LabelSource
from schemas.validation import describe_validation_error

KINDS = {k.value for k in LabelKind}
#: the import sample's own draw, independent of the review queue's
IMPORT_SALT = "import"


@dataclass
class LabelsFile:
    labels: list[Label] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # "line N: reason"
    ignored_keys: Counter[str] = field(default_factory=Counter)
    lines: int = 0
    unlabeled: int = 0  # lines without labels of a known kind
    not_drawn: int = 0  # lines the sample left out


def read_labels_file(
    path: Path,
    *,
    reviewer: str,
    source: LabelSource,
    labeled_at: datetime,
    sample: float | None = None,
) -> LabelsFile:
    out = LabelsFile()
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            data = _line_object(number, raw, out)
            if data is None:
                continue
            iid = data.get("interaction_id", data.get("id"))
            if not isinstance(iid, str | int) or isinstance(iid, bool) or not str(iid):
                out.errors.append(f"line {number}: no interaction_id (or id)")
                continue
            known = _known_labels(number, data.get("labels"), out)
            if not known:
                continue
            if sample is not None and not drawn(str(iid), sample, IMPORT_SALT):
                out.not_drawn += 1
                continue
            for kind, value in known.items():
                target = str(iid)
                if kind in CONVERSATION_KINDS:  # a label on the line's conversation
                    target = str(data.get("conversation_id") or "")
                    if not target:
                        out.errors.append(f"line {number}: labels.{kind}: a conversation's label needs the "
                                          "line's conversation_id")  # fmt: skip
                        continue
                fields = {"interaction_id": target, "kind": kind, "value": value, "reviewer": reviewer,
                          "source": source, "labeled_at": labeled_at,
                          "inclusion_probability": sample}  # fmt: skip
                try:
                    out.labels.append(Label.model_validate(fields))
                except ValidationError as exc:
                    out.errors.append(f"line {number}: labels.{kind}: {describe_validation_error(exc)}")
    return out


def _line_object(number: int, raw: bytes, out: LabelsFile) -> dict[str, Any] | None:
    """The line's JSON object, counted in ``out.lines``; None for a blank line or (its error noted in
    ``out.errors``) one that is not UTF-8, not JSON or not an object."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        out.errors.append(f"line {number}: not UTF-8 ({exc.reason} at byte {exc.start})")
        return None
    if not text.strip():
        return None
    out.lines += 1
    try:
        data = read_json(text)
    except json.JSONDecodeError as exc:
        out.errors.append(f"line {number}: not valid JSON: {exc.msg} at column {exc.colno}")
        return None
    except ValueError as exc:  # too deep, NaN, a lone surrogate
        out.errors.append(f"line {number}: not valid JSON: {exc}")
        return None
    if not isinstance(data, dict):
        out.errors.append(f"line {number}: a line must be a JSON object")
        return None
    return data


def _labeled(key: str) -> bool:
    """Whether a key of ``labels`` is read as a label: a fixed kind, or custom.<name> (checked then)."""
    return key in KINDS or key.startswith("custom.")


def _known_labels(number: int, marks: Any, out: LabelsFile) -> dict[str, Any]:
    """The line's labels of a known kind (other keys noted in ``out.ignored_keys``); empty when it has
    none (counted in ``out.unlabeled``) or ``labels`` is not an object (noted in ``out.errors``)."""
    if marks is None:
        out.unlabeled += 1
        return {}
    if not isinstance(marks, dict):
        out.errors.append(f"line {number}: labels must be an object of kind -> 0/1")
        return {}
    known = {k: v for k, v in marks.items() if _labeled(k)}
    out.ignored_keys.update(k for k in marks if not _labeled(k))
    if not known:
        out.unlabeled += 1
    return known
