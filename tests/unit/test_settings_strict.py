"""Settings are strict: a GROUNDWATCH_* variable that names no setting, a number out of its range or two
settings that contradict each other stop the load with one line naming the variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from groundwatch import cli
from schemas.errors import SettingError
from schemas.safe_text import uninstall_safe_logging
from schemas.settings import (
    NOT_SETTINGS,
    JudgeSettings,
    ModelPrice,
    Settings,
    describe_settings_error,
    setting_variables,
    settings_from_env,
    unknown_variables,
)
from tests.settings_factory import make_settings

REPO = Path(__file__).resolve().parents[2]
MISSPELLING_TESTS = {"test_settings_strict.py", "test_cli_errors.py"}  # misspell settings on purpose


@pytest.fixture(autouse=True)
def no_groundwatch_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("GROUNDWATCH_"):
            monkeypatch.delenv(name)


def invalid(env: dict[str, str]) -> str:
    """The one line a command prints for settings loaded from ``env``."""
    with pytest.raises((SettingError, ValidationError)) as err:
        settings_from_env(env)
    what, why = cli.describe_error(err.value)
    assert what == "invalid setting"
    return why


def test_every_section_forbids_unknown_keys() -> None:
    models: list[type[BaseModel]] = [ModelPrice]
    for info in Settings.model_fields.values():
        assert isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
        models.append(info.annotation)
    for model in models:
        assert model.model_config.get("extra") == "forbid", model.__name__
        assert model.model_config.get("frozen") is True, model.__name__
    assert Settings.model_config.get("extra") == "forbid"


def test_misspelt_variables_are_named_with_the_closest_setting() -> None:
    env = {
        "GROUNDWATCH_JUDGE__MODLE": "x",
        "GROUNDWATCH_WINDOW__SIZE_SECOND": "5",
        "GROUNDWATCH_SAMPLING__DEFAULT_RATES": "0.1",
    }
    assert invalid(env) == (
        "GROUNDWATCH_JUDGE__MODLE is not a setting (did you mean GROUNDWATCH_JUDGE__MODEL?); "
        "GROUNDWATCH_SAMPLING__DEFAULT_RATES is not a setting (did you mean "
        "GROUNDWATCH_SAMPLING__DEFAULT_RATE?); "
        "GROUNDWATCH_WINDOW__SIZE_SECOND is not a setting (did you mean GROUNDWATCH_WINDOW__SIZE_SECONDS?)"
    )


@pytest.mark.parametrize(
    ("name", "closest"),
    [
        ("GROUNDWATCH_JUGDE__MODEL", "GROUNDWATCH_JUDGE__MODEL"),  # a misspelt section
        ("GROUNDWATCH_JUDGE_MODEL", "GROUNDWATCH_JUDGE__MODEL"),  # one underscore for two
        ("GROUNDWATCH_JUGDE", "GROUNDWATCH_JUDGE"),  # a section as one JSON object
        ("groundwatch_judge__modle", "GROUNDWATCH_JUDGE__MODEL"),  # names are case-insensitive
        ("GROUNDWATCH_JUDGE__MODEL__NAME", "GROUNDWATCH_JUDGE__MODEL"),  # a plain value has no keys
        ("GROUNDWATCH_KAFKA__SESSION_TIMEOUT", "GROUNDWATCH_KAFKA__SESSION_TIMEOUT_S"),
    ],
)
def test_each_kind_of_misspelling(name: str, closest: str) -> None:
    assert invalid({name: "1"}) == f"{name.upper()} is not a setting (did you mean {closest}?)"


def test_a_name_far_from_every_setting_has_no_suggestion() -> None:
    assert invalid({"GROUNDWATCH_ZZZ__QQQQQQQQ": "1"}) == "GROUNDWATCH_ZZZ__QQQQQQQQ is not a setting"


def test_the_process_environment_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDWATCH_JUDGE__MODLE", "x")
    with pytest.raises(SettingError, match="GROUNDWATCH_JUDGE__MODLE is not a setting"):
        Settings()


def test_variables_that_are_not_settings_stay_allowed() -> None:
    env = {
        **dict.fromkeys(NOT_SETTINGS, "1"),
        "GROUNDWATCH_HOOK_SECRET": "s",  # a rules file's secret_env: any name will do
        "GROUNDWATCH_GRAFANA_CLICKHOUSE_USER": "reader",
        "GROUNDWATCH_JUDGE__PRICES__MY-MODEL__INPUT_PER_1K": "0.5",  # a mapping's keys are free
        "GROUNDWATCH_JUDGE": '{"model": "m"}',  # a whole section as JSON
    }
    settings = settings_from_env(env)
    assert settings.judge.model == "m"
    assert settings.judge.prices["my-model"].input_per_1k == 0.5


def test_every_groundwatch_variable_the_project_names_is_a_setting_or_allowed() -> None:
    """The docs, deploy files, tests and code never name a GROUNDWATCH_* variable a worker would refuse."""
    pattern = re.compile(r"GROUNDWATCH_[A-Z0-9_]*[A-Z0-9]")
    names: set[str] = set()
    for path in REPO.rglob("*"):
        parts = set(path.relative_to(REPO).parts)
        if parts & {".git", ".venv", "build", "node_modules", ".groundwatch"} or not path.is_file():
            continue
        if path.name in MISSPELLING_TESTS:
            continue
        if (
            path.suffix not in {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".json"}
            and path.name != "Makefile"
        ):
            continue
        names |= set(pattern.findall(path.read_text(encoding="utf-8", errors="replace")))
    # the misspellings the docs and comments show as examples of the error
    names -= {
        "GROUNDWATCH_JUDGE__MODLE",
        "GROUNDWATCH_JUDGE_MODEL",
        "GROUNDWATCH_JUGDE__MODEL",
        "GROUNDWATCH_JUGDE",
    }
    assert len(names) > 50
    assert unknown_variables(names) == []


def test_a_section_given_as_json_with_an_unknown_key_is_named() -> None:
    assert invalid({"GROUNDWATCH_JUDGE": '{"modle": "m"}'}) == (
        "GROUNDWATCH_JUDGE__MODLE: Extra inputs are not permitted"
    )


def test_a_list_or_mapping_that_is_not_json_is_named() -> None:
    why = invalid({"GROUNDWATCH_JUDGE__PRICES": "{gpt: 1}"})
    assert why.startswith("GROUNDWATCH_JUDGE__PRICES is not JSON: ")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("GROUNDWATCH_KAFKA__WEB_PORT", "99999"),
        ("GROUNDWATCH_KAFKA__WEB_PORT", "0"),
        ("GROUNDWATCH_KAFKA__TOPIC_PREFIX", "my prefix."),  # Kafka refuses the topic names
        ("GROUNDWATCH_JUDGE__LOCAL_PORT", "65536"),
        ("GROUNDWATCH_JUDGE__TIMEOUT_S", "0"),
        ("GROUNDWATCH_JUDGE__LOCAL_TIMEOUT_S", "-1"),
        ("GROUNDWATCH_JUDGE__MAX_RETRIES", "-1"),
        ("GROUNDWATCH_JUDGE__MAX_IN_FLIGHT", "0"),
        ("GROUNDWATCH_JUDGE__LOCAL_THREADS", "0"),
        ("GROUNDWATCH_JUDGE__MAX_OUTPUT_TOKENS", "0"),
        ("GROUNDWATCH_JUDGE__CASCADE_UNSURE_HIGH", "1.5"),
        ("GROUNDWATCH_KAFKA__STAGE_CONCURRENCY", "0"),
        ("GROUNDWATCH_KAFKA__DEADLETTER_ATTEMPTS", "0"),
        ("GROUNDWATCH_KAFKA__SESSION_TIMEOUT_S", "0"),
        ("GROUNDWATCH_KAFKA__JOIN_TIMEOUT_S", "0"),
        ("GROUNDWATCH_KAFKA__START_OFFSET", "beginning"),
        ("GROUNDWATCH_LIMITS__MAX_CONTEXTS", "0"),
        ("GROUNDWATCH_LIMITS__MAX_QUESTION_CHARS", "0"),
        ("GROUNDWATCH_ALERTS__WEBHOOK_TIMEOUT_S", "0"),
        ("GROUNDWATCH_ALERTS__WEBHOOK_RETRIES", "-1"),
        ("GROUNDWATCH_PIPELINE__HALLUCINATION_THRESHOLD", "2"),
    ],
)
def test_numbers_out_of_range_fail_at_load_naming_the_variable(variable: str, value: str) -> None:
    why = invalid({variable: value})
    assert why.startswith(f"{variable}: "), why
    assert ";" not in why  # the one problem, once


@pytest.mark.parametrize(
    ("variable", "value", "where"),
    [
        ("GROUNDWATCH_JUDGE__CONTEXT_WINDOWS", '{"m": 0}', "GROUNDWATCH_JUDGE__CONTEXT_WINDOWS (m)"),
        (
            "GROUNDWATCH_PIPELINE__JUDGE_HALLUCINATION_THRESHOLDS",
            '{"lexical": 1.5}',
            "GROUNDWATCH_PIPELINE__JUDGE_HALLUCINATION_THRESHOLDS (lexical)",
        ),
        (
            "GROUNDWATCH_JUDGE__PRICES",
            '{"m": {"input_per_1k": -1}}',
            "GROUNDWATCH_JUDGE__PRICES (m.input_per_1k)",
        ),
    ],
)
def test_values_inside_mappings_are_checked(variable: str, value: str, where: str) -> None:
    assert invalid({variable: value}).startswith(f"{where}: ")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"GROUNDWATCH_JUDGE__CASCADE_UNSURE_LOW": "0.9"},
            "GROUNDWATCH_JUDGE__CASCADE_UNSURE_LOW (0.9) is above "
            "GROUNDWATCH_JUDGE__CASCADE_UNSURE_HIGH (0.8)",
        ),
        (
            {"GROUNDWATCH_JUDGE__CASCADE_GROUND_TRUTH_UNSURE_HIGH": "0",
             "GROUNDWATCH_JUDGE__CASCADE_GROUND_TRUTH_UNSURE_LOW": "0.1"},
            "GROUNDWATCH_JUDGE__CASCADE_GROUND_TRUTH_UNSURE_LOW (0.1) is above "
            "GROUNDWATCH_JUDGE__CASCADE_GROUND_TRUTH_UNSURE_HIGH (0.0)",
        ),
        (
            {"GROUNDWATCH_JUDGE__BACKOFF_BASE_S": "10"},
            "GROUNDWATCH_JUDGE__BACKOFF_BASE_S (10.0) is above GROUNDWATCH_JUDGE__BACKOFF_MAX_S (8.0)",
        ),
        (
            {"GROUNDWATCH_KAFKA__SESSION_TIMEOUT_S": "6"},  # the heartbeat (3 s by default) stays under it
            None,
        ),
        (
            {"GROUNDWATCH_KAFKA__SESSION_TIMEOUT_S": "3"},
            "GROUNDWATCH_KAFKA__HEARTBEAT_INTERVAL_S (3.0) must be under "
            "GROUNDWATCH_KAFKA__SESSION_TIMEOUT_S (3.0)",
        ),
        (
            {"GROUNDWATCH_SPLIT__MIN_SENTENCE_CHARS": "600"},
            "GROUNDWATCH_SPLIT__MIN_SENTENCE_CHARS (600) is above "
            "GROUNDWATCH_SPLIT__MAX_SENTENCE_CHARS (500)",
        ),
    ],
)  # fmt: skip
def test_contradicting_settings_fail_at_load(env: dict[str, str], message: str | None) -> None:
    if message is None:
        settings_from_env(env)
    else:
        assert invalid(env) == message


def test_settings_changed_in_code_are_checked_alike() -> None:
    with pytest.raises(ValidationError) as err:
        make_settings(kafka={"web_port": 70000}, judge={"modle": "x"})
    assert describe_settings_error(err.value) == (
        "GROUNDWATCH_KAFKA__WEB_PORT: Input should be less than or equal to 65535; "
        "GROUNDWATCH_JUDGE__MODLE: Extra inputs are not permitted"
    )
    with pytest.raises(ValidationError, match="is above"):
        JudgeSettings(backoff_base_s=9, backoff_max_s=1)


def test_every_setting_has_its_variable() -> None:
    variables = setting_variables()
    assert "GROUNDWATCH_KAFKA__START_OFFSET" in variables and "GROUNDWATCH_JUDGE__MODEL" in variables
    assert not set(variables) & NOT_SETTINGS


def test_a_worker_with_a_misspelt_setting_stops_with_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDWATCH_JUDGE__MODLE", "x")
    try:
        assert cli.main(["worker"]) == 2
    finally:
        uninstall_safe_logging()
    assert capsys.readouterr().err.splitlines() == [
        "groundwatch worker: invalid setting: GROUNDWATCH_JUDGE__MODLE is not a setting "
        "(did you mean GROUNDWATCH_JUDGE__MODEL?)"
    ]
