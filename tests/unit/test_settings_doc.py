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
