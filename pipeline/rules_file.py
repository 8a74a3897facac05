"""Reading a rules file (alert rules, sampling rules): YAML or JSON into its pydantic model, every problem a
``ConfigError`` naming the file and saying why in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from schemas.errors import ConfigError
from schemas.json_input import read_json
from schemas.validation import describe_validation_error

M = TypeVar("M", bound=BaseModel)


def read_rules_file(path: Path, model: type[M], what: str, *, key: str = "rules") -> M:
    """``what`` (e.g. "alert rules file") at ``path``: JSON when it ends in .json, else YAML; a bare list is
    its ``rules``, an empty file none. Raises ConfigError naming the file when it is missing or unreadable,
    is not YAML/JSON (with the line), holds neither a mapping nor a list, or does not validate (the rule's
    index, the field and the reason). ``key``: what a bare list is (``rules``, ``evaluators``)."""
    where = f"{what} {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{where} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where} cannot be read: {exc}") from None
    try:
        data = read_json(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where} is not JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except ValueError as exc:  # too deep, NaN, a lone surrogate
        raise ConfigError(f"{where} is not JSON: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where} is not YAML: {at}{' '.join(str(problem).split())}") from None
    if isinstance(data, list):
        data = {key: data}
    if data is None:
        data = {key: []}
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must hold a mapping ({key}: ...) or a list of {key}, not {data!r:.80}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {describe_validation_error(exc)}") from None
