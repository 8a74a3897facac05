"""A real Prometheus Alertmanager (Debian's prometheus-alertmanager) on 127.0.0.1 with a temporary
storage path. Without it the tests skip, except under CI=true, where a missing Alertmanager fails the run.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from groundwatch.local.supervise import wait_for
from pipeline.net import free_port
from tests.system_parts import mark_directory, require

ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
CONFIG = """
route:
  receiver: nowhere
  group_by: [alertname, app, model]
receivers:
  - name: nowhere
"""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_directory(items, "alertmanager", pytest.mark.alertmanager)


def _require_alertmanager() -> None:
    require(ALERTMANAGER, package="prometheus-alertmanager")


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/-/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture()
def alertmanager() -> Iterator[str]:
    """The base URL of a fresh Alertmanager (its own storage, no peers)."""
    _require_alertmanager()
    with tempfile.TemporaryDirectory(prefix="groundwatch-am-") as tmp:
        config = Path(tmp) / "alertmanager.yml"
        config.write_text(CONFIG, encoding="utf-8")
        port = free_port(0)
        log = (Path(tmp) / "alertmanager.log").open("w")
        proc = subprocess.Popen(
            [ALERTMANAGER, f"--config.file={config}", f"--storage.path={tmp}/data",
             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for(lambda: _ready(url) or proc.poll() is not None, timeout=60, what="alertmanager ready")
            if proc.poll() is not None:
                pytest.fail("alertmanager exited: " + (Path(tmp) / "alertmanager.log").read_text())
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
