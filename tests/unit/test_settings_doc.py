"""docs/settings.md is what `groundwatch settings` prints; every setting is described and frozen."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from groundwatch.commands.settings_cmd import settings_markdown
from schemas.settings import Settings, settings_from_env
from tests.settings_factory import make_settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def test_docs_settings_md_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == settings_markdown(), (
        "run: groundwatch settings > docs/settings.md"
    )


def test_every_setting_has_a_description() -> None:
    for section, info in Settings.model_fields.items():
        assert info.description, section
        model = info.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        for name, field in model.model_fields.items():
            assert field.description, f"{section}.{name}"


def test_settings_are_frozen_and_changed_by_copy() -> None:
    settings = make_settings()
    with pytest.raises(ValidationError, match="frozen"):
        settings.judge.kind = "local"  # type: ignore[misc]
    changed = settings.with_changes(judge={"kind": "local"}, pipeline={"hallucination_threshold": 0.3})
    assert (settings.judge.kind, changed.judge.kind) == ("lexical", "local")
    # an explicitly set threshold applies to every judge; the default one is per judge kind
    assert changed.pipeline.threshold_for("context_entailment", "lexical") == 0.3
    assert settings.pipeline.threshold_for("context_entailment", "lexical") == 0.81
    with pytest.raises(ValidationError):
        settings.with_changes(kafka={"partitions": 0})


def test_the_factory_ignores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDWATCH_JUDGE__KIND", "openai")
    assert Settings().judge.kind == "openai"  # what a process with that environment reads
    assert make_settings().judge.kind == "lexical"
    assert settings_from_env({"GROUNDWATCH_KAFKA__PARTITIONS": "7"}).kafka.partitions == 7


CONFIGURATION = DOC.parent / "configuration.md"


def _configuration_section() -> str:
    return CONFIGURATION.read_text(encoding="utf-8")


def _expand(names: list[str], section: str) -> list[str]:
    """``GROUNDWATCH_KAFKA__WEB_ENABLED``, ``__WEB_PORT`` -> full names (an abbreviation is of the section
    named last)."""
    out = []
    for name in names:
        if name.startswith("GROUNDWATCH_"):
            section = name.split("__")[0]
        out.append(name if name.startswith("GROUNDWATCH_") else section + name)
    return out


def _stated_defaults() -> list[tuple[str, str]]:
    """(variable, default as docs/configuration.md states it) of every row of its table and every
    ``VARIABLE=value`` of the section (there, that form states a default); descriptive defaults
    ("derived", "all three") are left out."""
    import re

    token = re.compile(r"`((?:GROUNDWATCH_|__)[A-Z0-9_]+)(?:`?=([^`,;)\s]+))?")
    stated: list[tuple[str, str]] = []
    section = ""
    for line in _configuration_section().splitlines():
        if line.startswith("| `"):  # a row: its variables and their defaults
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            names = _expand([m.group(1) for m in token.finditer(cells[0])], section)
            parts = [p.strip() for p in cells[1].split(" / ")]
            if len(parts) == 1:
                parts *= len(names)
            assert len(parts) == len(names), line
            for name, part in zip(names, parts, strict=True):
                if part == "none":
                    stated.append((name, "none"))
                elif part.startswith("`"):
                    stated.append((name, part[1:].split("`")[0]))
        for match in token.finditer(line):  # NAME=value anywhere, abbreviations of the last full name
            name = _expand([match.group(1)], section)[0]
            section = name.split("__")[0]
            if match.group(2):
                stated.append((name, match.group(2)))
    return stated


def test_the_configuration_table_matches_the_settings() -> None:
    from groundwatch.commands.settings_cmd import default_text
    from schemas.settings import setting_variables

    variables = setting_variables()
    stated = _stated_defaults()
    assert len(stated) > 30
    assert "GROUNDWATCH_KAFKA__START_OFFSET" in dict(stated)
    for name, default in stated:
        assert name in variables, f"docs/configuration.md names {name}, which is not a setting"
        actual = default_text(variables[name]).strip("`")
        assert _same(default, actual), (
            f"docs/configuration.md says {name} defaults to {default}; schemas/settings.py: {actual}"
        )


def _same(stated: str, actual: str) -> bool:
    """Equal as text, or as numbers (300 and 300.0)."""
    try:
        return stated == actual or float(stated) == float(actual)
    except ValueError:
        return False
