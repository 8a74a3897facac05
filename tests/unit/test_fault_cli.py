"""Every CLI command ends an expected failure with ONE line, `groundwatch <cmd>: <what>: <why>`, exit 2;
no password is ever echoed; the chDB directory is private; a held chDB path is named as such."""

from __future__ import annotations

import fcntl
import stat
import sys
from pathlib import Path

import pytest

from groundwatch import cli
from schemas.errors import ConfigError
from schemas.safe_text import uninstall_safe_logging
from streams.clickhouse import client as ch


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = cli.main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


@pytest.fixture(autouse=True)
def no_groundwatch_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("GROUNDWATCH_"):
            monkeypatch.delenv(name)


def test_report_since_garbage(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(capsys, "report", "--since", "garbage")
    assert code == 2 and len(err) == 1
    assert err[0].startswith("groundwatch report: ConfigError: --since: expected e.g. 30m")


def test_an_invalid_setting_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GROUNDWATCH_KAFKA__PARTITIONS", "zero")
    (tmp_path / "in.jsonl").write_text("{}\n")
    code, err = run(capsys, "replay", str(tmp_path / "in.jsonl"))
    assert code == 2 and len(err) == 1
    assert err[0].startswith(
        "groundwatch replay: invalid setting: GROUNDWATCH_KAFKA__PARTITIONS: Input should be"
    )


def test_replay_of_a_file_that_is_not_utf8(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"id": "a", "question": "q", "answer": "a"}\n{"id": "\xff"}\n')
    code, err = run(capsys, "replay", str(path), "--broker", "kafka://127.0.0.1:9")
    assert code == 2 and err == [
        f"groundwatch replay: ConfigError: {path} line 2 is not UTF-8 (byte 0xff at column 9); "
        "nothing was sent"
    ]
    path.write_bytes(b"\n \n")  # nothing to send: said before the broker is tried
    code, err = run(capsys, "replay", str(path), "--broker", "kafka://127.0.0.1:9")
    assert code == 2 and err == [
        f"groundwatch replay: ConfigError: {path} holds no interaction (no line that is not blank); "
        "nothing was sent"
    ]
    code, err = run(capsys, "replay", str(tmp_path / "missing.jsonl"))
    assert code == 2 and err == [
        f"groundwatch replay: ConfigError: no such file: {tmp_path / 'missing.jsonl'}"
    ]


@pytest.mark.parametrize(("flag", "value"), [("--rate", "-5"), ("--rate", "0"), ("--rate", "nan"),
                                              ("--limit", "-1"), ("--limit", "x")])  # fmt: skip
def test_replay_rejects_bad_numbers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str, value: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["replay", str(tmp_path / "in.jsonl"), flag, value])
    assert exit_.value.code == 2 and f"argument {flag}:" in capsys.readouterr().err


def test_replay_without_a_broker(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from aiokafka.errors import KafkaConnectionError

    import groundwatch.replay

    async def unreachable(*args: object, **kwargs: object) -> None:
        raise KafkaConnectionError("Unable to bootstrap from [('127.0.0.1', 9)]")

    monkeypatch.setattr(groundwatch.replay, "replay", unreachable)
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "question": "q", "answer": "a"}\n')
    code, err = run(capsys, "replay", str(path), "--broker", "kafka://127.0.0.1:9")
    assert code == 2 and len(err) == 1
    assert err[0].startswith(
        "groundwatch replay: BrokerUnavailable: cannot send to the broker at kafka://127.0.0.1:9: "
    )


def test_worker_with_a_missing_rules_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GROUNDWATCH_ALERTS__RULES_FILE", str(tmp_path / "rules.yaml"))
    try:
        code, err = run(capsys, "worker")
    finally:
        uninstall_safe_logging()
    assert code == 2 and err == [
        f"groundwatch worker: ConfigError: alert rules file {tmp_path / 'rules.yaml'} does not exist "
        "(GROUNDWATCH_ALERTS__RULES_FILE)"
    ]


def test_an_unreachable_clickhouse_never_shows_the_password(capsys: pytest.CaptureFixture[str]) -> None:
    """report's ClickHouse failures are one line on stderr (stdout stays for the report), exit 2."""
    code = cli.main(["report", "--clickhouse", "http://bob:hunter2@127.0.0.1:9/db"])
    captured = capsys.readouterr()
    out, first = captured.out, captured.err.strip().splitlines()
    assert code == 2 and len(first) == 1 and out == ""
    assert first[0].startswith(
        "groundwatch report: ClickHouseUnavailable: cannot open ClickHouse at http://bob@127.0.0.1:9/db: "
        "cannot connect to ClickHouse at http://bob@127.0.0.1:9/db: "
    )
    code, err = run(capsys, "report", "--clickhouse", "http://bob:hunter2@127.0.0.1:port/db")
    assert code == 2 and "bob:***@127.0.0.1:port" in err[0]
    assert "hunter2" not in " ".join(first + err)


def test_urls_are_redacted_in_every_error() -> None:
    for url in ("chdb://bob:hunter2@host/x", "ftp://bob:hunter2@h/db", "http://bob:hunter2@h:nope/db",
                "chdb:relative?password=hunter2"):  # fmt: skip
        with pytest.raises(ConfigError) as err:
            ch.parse_url(url)
        assert "hunter2" not in str(err.value), url
    assert (
        ch.redact_url("https://u:p%40ss@h:8443/db?token=abc&x=1") == "https://u:***@h:8443/db?token=***&x=1"
    )


def test_a_bug_is_one_line_with_exit_1_and_debug_shows_the_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from groundwatch.commands import schema_cmd

    def broken(args: object) -> int:
        raise KeyError("oops")

    monkeypatch.setattr(schema_cmd, "run", broken)
    code, err = run(capsys, "schema")
    assert code == 1 and len(err) == 1 and err[0].startswith("groundwatch schema: internal error (KeyError)")
    with pytest.raises(KeyError):
        cli.main(["schema", "--debug"])
    monkeypatch.setenv("GROUNDWATCH_DEBUG", "1")
    with pytest.raises(KeyError):
        cli.main(["schema"])


def test_the_chdb_directory_is_created_private(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "chdb"
    ch._private_dir(str(path))
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_a_chdb_path_another_process_holds_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "chdb"
    path.mkdir()
    (path / "status").write_text("")

    def refused(**kwargs: object) -> object:
        raise RuntimeError("Unable to open the chdb engine: Code: 36. DB::Exception: Error initializing")

    monkeypatch.setattr(ch.clickhouse_connect, "get_client", refused)
    target = ch.parse_url(f"chdb://{path}")
    with (path / "status").open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as the engine of another worker does
        with pytest.raises(ConfigError) as err:
            ch.connect(target)
    assert str(err.value).startswith(f"cannot open the embedded chDB at {path}: another process holds it")
    with pytest.raises(ConfigError, match="Error initializing"):  # not held: chDB's own reason
        ch.connect(target)


def test_worker_refuses_an_open_bind_before_it_touches_the_broker(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The bind check comes before anything is created on the broker: with a broker that would be
    reached (here a recorder of the attempt), the worker ends with the credentials line and never
    tried it."""
    import groundwatch.commands.worker_cmd as worker_cmd

    reached: list[object] = []

    async def prepare(kafka: object) -> None:
        reached.append(kafka)

    monkeypatch.setattr(worker_cmd, "prepare_broker", prepare)
    monkeypatch.setenv("GROUNDWATCH_CLICKHOUSE__URL", f"chdb://{tmp_path / 'chdb'}")
    monkeypatch.setenv("GROUNDWATCH_DASHBOARD__HOST", "0.0.0.0")
    try:
        code, err = run(capsys, "worker", "--web-port", "8099", "--broker", "kafka://127.0.0.1:9")
    finally:
        uninstall_safe_logging()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("groundwatch worker: DashboardConfigError: refusing to serve the dashboard")
    assert reached == []


def test_worker_names_a_web_port_in_use_before_it_touches_the_broker(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Another process listens on the worker's web port: one line naming the port and its setting, exit
    2, before anything is created on the broker (not a bind traceback once the worker has started)."""
    import socket

    import groundwatch.commands.worker_cmd as worker_cmd

    reached: list[object] = []

    async def prepare(kafka: object) -> None:
        reached.append(kafka)

    monkeypatch.setattr(worker_cmd, "prepare_broker", prepare)
    monkeypatch.setenv("GROUNDWATCH_CLICKHOUSE__URL", f"chdb://{tmp_path / 'chdb'}")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        try:
            code, err = run(capsys, "worker", "--web-port", str(port), "--broker", "kafka://127.0.0.1:9")
        finally:
            uninstall_safe_logging()
    assert code == 2 and len(err) == 1, err
    assert f"127.0.0.1:{port}" in err[0] and "GROUNDWATCH_KAFKA__WEB_PORT" in err[0], err
    assert reached == []


def test_a_reader_that_stops_reading_ends_the_command_quietly() -> None:
    """``groundwatch schema | head -1``: the pipe closed before the output was written ends the command
    without an error line (the reader wanted no more), with the shell's code for it (128 + SIGPIPE)."""
    import os
    import signal
    import subprocess

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "groundwatch.cli", "schema", "Evaluation"],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (128 + signal.SIGPIPE, "")


def test_a_broken_pipe_that_is_not_stdout_is_an_error_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from groundwatch.commands import schema_cmd

    def broken(args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")  # a socket to a service, say: stdout is still read

    monkeypatch.setattr(schema_cmd, "run", broken)
    code, err = run(capsys, "schema")
    assert (code, err) == (2, ["groundwatch schema: BrokenPipeError: Broken pipe"])
