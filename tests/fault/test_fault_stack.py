"""The probe's faults against a real worker: bad messages are dead-lettered (topic and table) while every
good interaction is stored and windowed, no log line is forged, and a second worker on the same chDB
path ends with a one-line hint."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from aiokafka import AIOKafkaProducer

from groundwatch.local.stack import LocalStack
from streams.topics import bootstrap_servers
from tests.integration.helpers import read_topic

SAMPLE = Path(__file__).resolve().parents[2] / "groundwatch" / "data" / "sample_interactions.jsonl"
FORGED = "shop\n2026-01-01 00:00:00,000 [1] [CRITICAL] FORGED LOG LINE\x1b[2J"
ENV = {"GROUNDWATCH_JUDGE__KIND": "lexical", "GROUNDWATCH_CLICKHOUSE__BATCH_SECONDS": "0.5",
       "GROUNDWATCH_WINDOW__TICK_SECONDS": "0.5"}  # fmt: skip


def good_lines(n: int) -> list[str]:
    lines = [json.loads(x) for x in SAMPLE.read_text().splitlines() if x.strip()][:n]
    return [json.dumps(r) for r in lines]


def bad_lines() -> dict[str, str]:
    base = {"question": "What is the capital of France?", "answer": "Paris.", "contexts": ["Paris."]}
    return {
        "bad-9999": json.dumps({**base, "id": "bad-9999", "timestamp": "9999-12-31T23:59:59Z"}),
        "bad-0001": json.dumps({**base, "id": "bad-0001", "timestamp": "0001-01-01T00:00:00Z"}),
        "bad-doc": json.dumps(
            {**base, "id": "bad-doc", "contexts": [{"text": "Paris.", "document": "d" * 800_000}]}
        ),
    }


async def send_raw(broker_url: str, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers(broker_url), max_request_size=4_000_000)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


def test_bad_input_is_dead_lettered_and_never_blocks_good_input_or_forges_a_log_line(tmp_path: Path) -> None:
    good = good_lines(12)
    hostile = json.dumps({
        "id": "forged-app", "app": FORGED, "model": "m\u202eevil", "question": "Q?",
        "answer": "Paris is the capital.", "contexts": ["Paris is the capital."],
    })  # fmt: skip
    bad = bad_lines()
    with LocalStack(tmp_path, ENV, partitions=2, window_seconds=3600) as stack:
        stack.replay([*bad.values(), *good[:6], hostile, *good[6:]])
        # sent as bytes: not text at all, and too deep for groundwatch.replay's own json.loads
        deep_raw = b'{"id": "bad-deep", "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        raw = [b'{"id": "bad-utf8", "q": "\xff\xfe"}', deep_raw]
        asyncio.run(send_raw(stack.broker.url, f"{stack.prefix}interactions", raw))
        stack.wait_for_evaluations(len(good) + 1, timeout_s=60)
        letters = asyncio.run(read_topic(stack.broker.url, f"{stack.prefix}deadletter", expect=5, idle_s=2.0))
        report = stack.finish()
    # every bad one is dead-lettered (stage validate) with its reason; the good ones are all stored
    by_id = {d.get("interaction_id"): d for d in letters}
    assert len(letters) == 5 and all(d["stage"] == "validate" for d in letters)
    assert "max_event_future_seconds" in by_id["bad-9999"]["error"]
    assert "max_event_age_days" in by_id["bad-0001"]["error"]
    assert "contexts[0].document has 800000 characters" in by_id["bad-doc"]["error"]
    assert by_id["bad-doc"]["truncated"] and by_id["bad-doc"]["payload_sha256"]
    deep = [d for d in letters if "nested deeper than 64" in d["error"]]
    utf8 = [d for d in letters if "not valid UTF-8" in d["error"]]
    assert len(deep) == 1 and deep[0]["payload"].encode() == deep_raw and len(utf8) == 1
    assert utf8[0]["payload"].startswith("base64:")
    assert report.counts["evaluations"] == len(good) + 1
    assert report.counts["dead_letters"] == 5
    # windows for every good app/model (none blocked), the hostile app's stored as sent
    expected = {(json.loads(x).get("app", "default"), json.loads(x).get("model", "unknown")) for x in good}
    assert {(w.app, w.model) for w in report.windows} == expected | {(FORGED, "m\u202eevil")}
    assert sum(w.count for w in report.windows) == len(good) + 1
    # the worker log shows the hostile name escaped, on the line of its own record
    log = stack.worker_log.read_text(encoding="utf-8", errors="replace")
    assert "FORGED LOG LINE" in log and "shop\\n2026-01-01" in log
    assert not any(line.lstrip().startswith(("2026-01-01 00:00:00,000 [1] [CRITICAL]", "[CRITICAL] FORGED"))
                   for line in log.splitlines())  # fmt: skip
    assert "\x1b" not in log and "Traceback" not in log


def test_a_second_worker_on_the_same_chdb_path_ends_with_a_one_line_hint(tmp_path: Path) -> None:
    with LocalStack(tmp_path, ENV, partitions=1) as stack:
        second = subprocess.run(
            [sys.executable, "-m", "groundwatch.commands.worker_cmd", "--loglevel", "info"],
            env=stack.env(), cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert stack.worker is not None and stack.worker.alive()  # the first one is unharmed
    ours = [line for line in second.stderr.splitlines() if line.startswith("groundwatch worker:")]
    assert second.returncode == 2 and len(ours) == 1, second.stderr
    assert ours[0] == (
        f"groundwatch worker: ConfigError: cannot open the embedded chDB at {tmp_path / 'chdb'}: another "
        "process holds it (an embedded chDB path can be opened by one process at a time: stop the other "
        "worker, or give this one its own GROUNDWATCH_CLICKHOUSE__URL)"
    )
    assert "Traceback" not in second.stderr and len(second.stderr.splitlines()) <= 3
