"""A whole local groundwatch: Tansu broker + worker subprocess (embedded chDB) in one object.

For the demo and for trying groundwatch on one machine::

    with LocalStack(workdir, env={"GROUNDWATCH_JUDGE__KIND": "lexical"}) as stack:
        stack.replay(lines)
        stack.wait_for_evaluations(len(lines), on_progress=print)
        report = stack.finish()          # stops the worker, then reads ClickHouse

Everything binds 127.0.0.1. The worker inherits the caller's GROUNDWATCH_* settings (judge, limits...)
except the broker (with its tuning, ``tansu.worker_env``), the ClickHouse URL, the status file and the topic
prefix, which the stack owns.
The calling process never opens the chDB path (one process per path): it follows the worker through its
status file, and ``finish()`` reads the report in a child process.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType

from groundwatch.local.supervise import WorkerProcess, spawn_worker
from groundwatch.local.tansu import TansuBroker, worker_env
from groundwatch.replay import ReplayResult, replay
from groundwatch.trend_report import Report
from schemas.settings import Settings, settings_from_env


class LocalStack:
    def __init__(
        self,
        workdir: Path,
        env: Mapping[str, str] | None = None,
        *,
        partitions: int = 4,
        window_seconds: int = 10,
        loglevel: str = "info",
        ready_timeout_s: float = 300.0,  # the local judge loads its model before the worker is ready
    ) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.extra_env = dict(env or {})
        self.partitions = partitions
        self.window_seconds = window_seconds
        self.loglevel = loglevel
        self.ready_timeout_s = ready_timeout_s
        self.prefix = f"gw{uuid.uuid4().hex[:6]}."
        self.broker = TansuBroker(log_path=workdir / "tansu.log")
        self.worker: WorkerProcess | None = None

    @property
    def status_file(self) -> Path:
        return self.workdir / "status.json"

    @property
    def clickhouse_url(self) -> str:
        return f"chdb://{self.workdir / 'chdb'}"

    @property
    def worker_log(self) -> Path:
        return self.workdir / "worker.log"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "GROUNDWATCH_KAFKA__PARTITIONS": str(self.partitions),
                "GROUNDWATCH_WINDOW__SIZE_SECONDS": str(self.window_seconds),
                "GROUNDWATCH_WINDOW__GRACE_SECONDS": "1",
                "GROUNDWATCH_WINDOW__IDLE_CLOSE_SECONDS": "2",
            }
        )
        env.update(self.extra_env)
        env.update(worker_env(self.broker.url))
        env.update(
            {
                "GROUNDWATCH_KAFKA__TOPIC_PREFIX": self.prefix,
                "GROUNDWATCH_KAFKA__CONSUMER_GROUP": f"{self.prefix}worker",
                "GROUNDWATCH_KAFKA__DATADIR": str(self.workdir / "faust"),
                "GROUNDWATCH_CLICKHOUSE__URL": self.clickhouse_url,
                "GROUNDWATCH_CLICKHOUSE__STATUS_FILE": str(self.status_file),
            }
        )
        return env

    def settings(self) -> Settings:
        """The stack's settings, as the worker sees them (read from ``env()``; os.environ untouched)."""
        return settings_from_env(self.env())

    def start(self, timeout_s: float | None = None) -> LocalStack:
        self.broker.start()
        self.worker = spawn_worker(
            self.env(), self.worker_log, self.status_file, cwd=self.workdir, loglevel=self.loglevel
        )
        self.worker.wait_ready(timeout_s or self.ready_timeout_s)
        return self

    def replay(self, lines: Iterable[str], *, rate: float | None = None) -> ReplayResult:
        return asyncio.run(replay(self.settings(), lines, rate=rate))

    def evaluations(self) -> int:
        """Rows in ClickHouse ``evaluations`` (from the worker's status file)."""
        return self.worker.evaluations() if self.worker else 0

    def wait_for_evaluations(
        self, n: int, timeout_s: float = 600.0, on_progress: Callable[[int], None] | None = None
    ) -> int:
        deadline = time.monotonic() + timeout_s
        last = -1
        while time.monotonic() < deadline:
            if self.worker is not None and not self.worker.alive():
                raise RuntimeError(f"the worker stopped:\n{self.worker.tail()}")
            count = self.evaluations()
            if count != last and on_progress is not None:
                on_progress(count)
            last = count
            if count >= n:
                return count
            time.sleep(0.5)
        raise TimeoutError(f"{last} of {n} interactions in ClickHouse after {timeout_s}s")

    def wait_for_windows(self, n: int, timeout_s: float = 600.0) -> int:
        """Wait until ClickHouse holds ``n`` window rows (the worker's status file says)."""
        return self._wait_for_rows("window_aggregates", n, timeout_s)

    def wait_for_conversations(self, n: int, timeout_s: float = 600.0) -> int:
        """Wait until ClickHouse holds ``n`` conversation rows (the worker's status file says)."""
        return self._wait_for_rows("conversations", n, timeout_s)

    def _wait_for_rows(self, table: str, n: int, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        count = 0
        while time.monotonic() < deadline:
            if self.worker is not None and not self.worker.alive():
                raise RuntimeError(f"the worker stopped:\n{self.worker.tail()}")
            status = self.worker.status() if self.worker else None
            count = status.counts.get(table, 0) if status else 0
            if count >= n:
                return count
            time.sleep(0.5)
        raise TimeoutError(f"{count} of {n} {table} rows in ClickHouse after {timeout_s}s")

    def stop_worker(self) -> int:
        if self.worker is None:
            return 0
        code = self.worker.stop()
        return code

    def finish(self) -> Report:
        """Stop the worker (it flushes and writes the open windows), then read the report with
        `groundwatch report --json` in a child process, so this process never opens the chDB path."""
        self.stop_worker()
        return report_in_child(self.env(), self.workdir)

    def stop(self) -> None:
        try:
            self.stop_worker()
        finally:
            self.broker.stop()

    def __enter__(self) -> LocalStack:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def report_in_child(env: Mapping[str, str], cwd: Path, timeout_s: float = 300.0) -> Report:
    """`groundwatch report --json` in a child process with ``env`` (an embedded chDB path may be opened by
    one process only: the caller never opens it)."""
    out = subprocess.run(
        [sys.executable, "-m", "groundwatch.commands.report_cmd", "--json"],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if out.returncode != 0:
        raise RuntimeError(f"groundwatch report failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return Report.model_validate_json(out.stdout)
