"""A real Prometheus (Debian package `prometheus`) scraping a real worker, both on 127.0.0.1. Without the
binary the tests skip, except under CI=true, where its absence fails the run."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.system_parts import mark_directory, require

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_directory(items, "prometheus", pytest.mark.prometheus)


def require_prometheus() -> None:
    require(PROMETHEUS, package="prometheus")


class Prometheus:
    def __init__(self, workdir: Path, port: int, target: str) -> None:
        self.url = f"http://127.0.0.1:{port}"
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: groundwatch\n    static_configs:\n"
            f"      - targets: ['{target}']\n"
        )
        self.log = (workdir / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def query(self, expr: str) -> float | None:
        """The value of an instant query with one sample (None: no sample yet)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as response:
            import json

            data: Any = json.loads(response.read())
        result = data["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, expr: str, expected: float, timeout_s: float = 90.0) -> float | None:
        """Poll until ``expr`` equals ``expected`` (scrapes are every second); the last value otherwise."""
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.query(expr)
            except OSError:
                last = None
            if last == expected:
                return last
            time.sleep(0.5)
        return last

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture()
def prometheus_factory(tmp_path: Path) -> Iterator[Any]:
    require_prometheus()
    started: list[Prometheus] = []

    def start(port: int, target: str) -> Prometheus:
        p = Prometheus(tmp_path, port, target)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()
