"""OTLP/HTTP on a real worker's web server (real Tansu broker, chDB): an SDK exporter's protobuf body
(gzip) and an OTLP/JSON body are produced to the otlp topic and evaluated, one interaction per final
answer; bodies that cannot be read are answered 400 / 413 / 415 with the reason and produce nothing."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import httpx
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from groundwatch.local.stack import LocalStack
from groundwatch.local.tansu import free_port

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "otlp_agents"


def base64_ids(node: Any) -> Any:
    """OTLP/JSON's hex ids as proto3 JSON's base64 (to build the protobuf an SDK exporter sends)."""
    if isinstance(node, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode() if k in ("traceId", "spanId", "parentSpanId")
            else base64_ids(v)
            for k, v in node.items()
        }  # fmt: skip
    if isinstance(node, list):
        return [base64_ids(v) for v in node]
    return node


def protobuf(name: str) -> bytes:
    [line] = (AGENTS / f"{name}.jsonl").read_text().splitlines()
    return ParseDict(base64_ids(json.loads(line)), ExportTraceServiceRequest()).SerializeToString()


def test_otlp_http_bodies_are_produced_and_evaluated_and_bad_ones_refused(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "GROUNDWATCH_JUDGE__KIND": "lexical",
        "GROUNDWATCH_KAFKA__OTLP_INPUT": "true",
        "GROUNDWATCH_KAFKA__WEB_ENABLED": "true",
        "GROUNDWATCH_KAFKA__WEB_PORT": str(port),
        "GROUNDWATCH_KAFKA__OTLP_HTTP_MAX_BYTES": "200000",
    }
    url = f"http://127.0.0.1:{port}/v1/traces"
    with LocalStack(tmp_path, env, partitions=2, window_seconds=2) as stack:
        with httpx.Client(timeout=30) as http:
            packed = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
            sent = http.post(url, content=gzip.compress(protobuf("pydantic-ai")), headers=packed)
            assert (sent.status_code, sent.headers["Content-Type"]) == (200, "application/x-protobuf")
            body = (AGENTS / "openinference-openai.jsonl").read_bytes()
            sent = http.post(url, content=body, headers={"Content-Type": "application/json"})
            assert (sent.status_code, sent.json()) == (200, {})

            def refused(content: bytes, headers: dict[str, str]) -> tuple[int, str]:
                answer = http.post(url, content=content, headers=headers)
                return answer.status_code, answer.json()["error"]

            proto = {"Content-Type": "application/x-protobuf"}
            assert refused(b"\xff\xfe not protobuf", proto)[0] == 400
            assert refused(b"[1, 2]", {"Content-Type": "application/json"}) == (
                400, "the body is a JSON list, not an export request object"
            )  # fmt: skip
            assert refused(b"{}", {"Content-Type": "text/plain"})[0] == 415
            bomb = gzip.compress(b" " * 5_000_000)  # small as sent, over the limit unpacked
            status, why = refused(bomb, {**proto, "Content-Encoding": "gzip"})
            assert status == 413 and "unpacked" in why
            assert refused(b"x" * 300_000, proto)[0] == 413
            assert refused(b"\x1f\x8b broken", {**proto, "Content-Encoding": "gzip"})[0] == 400
        stack.wait_for_evaluations(4, timeout_s=120)
        report = stack.finish()
    assert report.counts["evaluations"] == 4  # two turns each: one a final answer
    assert report.counts.get("dead_letters", 0) == 0  # refused bodies never reached the topic
