"""A whole local groundwatch: Tansu broker + worker subprocess (embedded chDB) in one object.

For the demo and for trying groundwatch on one machine::

    with LocalStack(workdir, env={"GROUNDWATCH_JUDGE__KIND": "lexical"}) as stack:
        stack.replay(lines)
        stack.wait_for_evaluations(len(lines), on_progress=print)
        report = stack.finish()          # stops the worker, then reads ClickHouse

Everything binds 127.0.0.1. The worker inherits the caller's GROUNDWATCH_* settings (judge, limits...;
``inherit_settings=False``: none) except the broker (with its tuning, ``tansu.worker_env``), the ClickHouse
URL, the status file and the topic prefix, which the stack owns. Given ``broker_url``, the stack runs on a
broker already running (its own topics, consumer group and chDB path beside other stacks'), and neither
starts nor stops it; ``start_worker`` starts more workers of the same deployment.
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
from pipeline.net import free_port
from schemas.errors import LocalStackError
from schemas.settings import Settings, settings_from_env
from streams.status import WorkerStatus, read_status


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
        broker_url: str | None = None,
        clickhouse_url: str | None = None,
        inherit_settings: bool = True,
        processes: int | None = 1,
    ) -> None:
        """``processes``: the worker's judging processes (``kafka.processes``); 1 by default here, where
        tests and scripts start workers side by side on one machine; None: the setting's own (every
        core), as the demo runs. A ``GROUNDWATCH_KAFKA__PROCESSES`` in ``env`` wins."""
        self.workdir = workdir
        self.processes = processes
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.extra_env = dict(env or {})
        self.partitions = partitions
        self.window_seconds = window_seconds
        self.loglevel = loglevel
        self.ready_timeout_s = ready_timeout_s
        self.prefix = f"gw{uuid.uuid4().hex[:6]}."
        self.broker = None if broker_url else TansuBroker(log_path=workdir / "tansu.log")
        self._broker_url = broker_url
        self._clickhouse_url = clickhouse_url
        self.inherit_settings = inherit_settings
        self.worker: WorkerProcess | None = None

    @property
    def broker_url(self) -> str:
        return self.broker.url if self.broker is not None else str(self._broker_url)

    @property
    def status_file(self) -> Path:
        return self.workdir / "status.json"

    @property
    def clickhouse_url(self) -> str:
        return self._clickhouse_url or f"chdb://{self.workdir / 'chdb'}"

    @property
    def worker_log(self) -> Path:
        return self.workdir / "worker.log"

    def env(self) -> dict[str, str]:
        inherited = os.environ.items()
        env = {k: v for k, v in inherited if self.inherit_settings or not k.startswith("GROUNDWATCH_")}
        env.update(
            {
                "GROUNDWATCH_KAFKA__PARTITIONS": str(self.partitions),
                "GROUNDWATCH_WINDOW__SIZE_SECONDS": str(self.window_seconds),
                "GROUNDWATCH_WINDOW__GRACE_SECONDS": "1",
                "GROUNDWATCH_WINDOW__IDLE_CLOSE_SECONDS": "2",
            }
        )
        if self.processes is not None:
            env["GROUNDWATCH_KAFKA__PROCESSES"] = str(self.processes)
        env.update(self.extra_env)
        env.update(worker_env(self.broker_url))
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
        if self.broker is not None:
            self.broker.start()
        self.worker = spawn_worker(
            self.env(), self.worker_log, self.status_file, cwd=self.workdir, loglevel=self.loglevel
        )
        self.worker.wait_ready(timeout_s or self.ready_timeout_s)
        return self

    def start_worker(self, name: str = "worker") -> WorkerProcess:
        """One more worker of this deployment (its own web port and log ``<name>.log``), not waited for."""
        env = {**self.env(), "GROUNDWATCH_KAFKA__WEB_PORT": str(free_port())}
        return spawn_worker(env, self.workdir / f"{name}.log", self.status_file, cwd=self.workdir)

    def status(self) -> WorkerStatus | None:
        """The last status a worker of this deployment wrote (its ClickHouse table counts)."""
        return read_status(self.status_file)

    def replay(self, lines: Iterable[str], *, rate: float | None = None) -> ReplayResult:
        return asyncio.run(replay(self.settings(), lines, rate=rate))

    def evaluations(self) -> int:
        """Rows in ClickHouse ``evaluations`` (from the workers' status file)."""
        status = self.status()
        return status.counts.get("evaluations", 0) if status else 0

    def wait_for_evaluations(
        self, n: int, timeout_s: float = 600.0, on_progress: Callable[[int], None] | None = None
    ) -> int:
        deadline = time.monotonic() + timeout_s
        last = -1
        while time.monotonic() < deadline:
            if self.worker is not None and not self.worker.alive():
                raise LocalStackError(f"the worker stopped:\n{self.worker.tail()}")
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
                raise LocalStackError(f"the worker stopped:\n{self.worker.tail()}")
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
        return self.report()

    def report(self, timeout_s: float = 300.0) -> Report:
        """`groundwatch report --json` in a child process (once the workers stopped: an embedded chDB is
        one process's)."""
        return report_in_child(self.env(), self.workdir, timeout_s)

    def stop(self) -> None:
        try:
            self.stop_worker()
        finally:
            if self.broker is not None:
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
        raise LocalStackError(f"groundwatch report failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return Report.model_validate_json(out.stdout)
