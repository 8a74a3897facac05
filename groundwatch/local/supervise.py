"""Run `groundwatch worker` as a child process and follow it (for the demo, tests and benchmarks).

The worker is configured through GROUNDWATCH_* variables in ``env``. Readiness: the worker has opened
its resources (it writes ``clickhouse.status_file``) and faust reports the worker ready (partitions
assigned). The status file is also how a parent follows an embedded chDB that only the worker may open.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from schemas.errors import LocalStackError
from streams.status import WorkerStatus, read_status

READY_MARK = "[^Worker]: Ready"


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


@dataclass
class WorkerProcess:
    proc: subprocess.Popen[bytes]
    log: Path
    status_file: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def status(self) -> WorkerStatus | None:
        return read_status(self.status_file)

    def ready(self) -> bool:
        if not self.alive():
            raise LocalStackError(f"worker exited with code {self.proc.returncode}:\n{self.tail()}")
        status = self.status()
        if status is None or status.pid != self.pid:  # not yet written by this worker
            return False
        return READY_MARK in self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 90.0) -> None:
        wait_for(self.ready, timeout, "the worker to start")

    def evaluations(self) -> int:
        status = self.status()
        return status.counts.get("evaluations", 0) if status else 0

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (graceful: flushes the sink and closes the open windows), then wait."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)

    def tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""


def spawn_worker(
    env: Mapping[str, str], log: Path, status_file: Path, *, cwd: Path | None = None, loglevel: str = "info"
) -> WorkerProcess:
    """Start ``python -m groundwatch.commands.worker_cmd`` with ``env`` (which must set
    GROUNDWATCH_CLICKHOUSE__STATUS_FILE to ``status_file``); its output goes to ``log``."""
    if env.get("GROUNDWATCH_CLICKHOUSE__STATUS_FILE") != str(status_file):
        raise ValueError("env must set GROUNDWATCH_CLICKHOUSE__STATUS_FILE to status_file")
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "groundwatch.commands.worker_cmd", "--loglevel", loglevel],
            env=dict(env),
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return WorkerProcess(proc, log, status_file)
