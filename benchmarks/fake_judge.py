"""The fake OpenAI-compatible judge (tests/fakes/openai_server.py) as a process for long benchmarks.

    python benchmarks/fake_judge.py --port P [--latency-ms 300] [--stats-file F]

Same answers as ``python -m tests.fakes.openai_server``, but it drops the request bodies it keeps for
tests (a 10-minute run would otherwise hold millions of them) and writes its counters to
``--stats-file`` (JSON) every second and on SIGTERM. Binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.fakes.openai_server import FakeConfig, FakeOpenAIServer  # noqa: E402


def _write(path: Path | None, server: FakeOpenAIServer) -> None:
    if path is None:
        return
    s = server.stats
    data = {
        "requests": s.requests,
        "ok": s.ok,
        "errors": s.errors,
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.completion_tokens,
        "max_in_flight": s.max_in_flight,
        "in_flight": s.in_flight,
        "by_prompt": dict(s.by_prompt),
        "time": time.time(),
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--stats-file", type=Path)
    args = ap.parse_args(argv)
    server = FakeOpenAIServer(FakeConfig(latency_ms=args.latency_ms), port=args.port).start()
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    print(f"fake judge on {server.base_url} latency {args.latency_ms} ms", flush=True)
    try:
        while not stop:
            time.sleep(1.0)
            with server._lock:  # the test double keeps every body; a benchmark must not
                server.stats.bodies.clear()
                server.stats.auth.clear()
            _write(args.stats_file, server)
    finally:
        _write(args.stats_file, server)
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
