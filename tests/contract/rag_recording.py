"""``record``: the RAG app (tests/contract/rag_app.py, a process of its own) instrumented with one of the
OpenAI client's instrumentations (``PACKAGES``) in one of its modes, run against a fake OpenAI server;
the directory of the traces and logs it recorded (OTLP/JSON lines). ``ANSWER``: what the tests' fake
server answers the chat."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from tests.contract.conftest import need, openllmetry_054
from tests.fakes.openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
ANSWER = "The B7 battery is covered for 8 years or 100,000 miles."
PACKAGES = {
    "openinference": "openinference.instrumentation.openai",
    "openllmetry": "opentelemetry.instrumentation.openai",
    "openai-v2": "opentelemetry.instrumentation.openai_v2",
}


def record(server: FakeOpenAIServer, out: Path, name: str, mode: str, parts: bool = False) -> Path:
    """Run the app instrumented with ``name`` in ``mode``; the directory of its traces and logs."""
    package = PACKAGES.get(name.removesuffix("-0.54"))
    path = [str(ROOT)]
    if name == "openllmetry-0.54":
        need("OpenLLMetry 0.54", (openllmetry_054() / "opentelemetry").is_dir())
        path.insert(0, str(openllmetry_054()))
    need(f"the {name} instrumentation", package is not None and importlib.util.find_spec(package) is not None)
    need("the OpenTelemetry SDK", importlib.util.find_spec("opentelemetry.sdk") is not None)
    argv = [sys.executable, "-m", "tests.contract.rag_app", "--instrumentation", name, "--mode", mode,
            "--base-url", server.base_url, "--out", str(out)] + (["--parts"] if parts else [])  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return out
