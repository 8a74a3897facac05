"""A small RAG app instrumented with one of the OpenTelemetry instrumentations of the OpenAI client, run
as its own process (each instrumentation patches the client and reads its settings at start):

    python -m tests.contract.rag_app --instrumentation NAME --mode MODE --base-url URL --out DIR

It retrieves two passages (a retrieval span of the instrumentation's convention), asks the model a
follow-up question with the passages in the system message, and writes what the SDK recorded, encoded
by OpenTelemetry's own protobuf encoder and written as OTLP/JSON the way the Collector's file exporter
does (one export request a line; hex trace and span ids, enums as integers, int64 as strings):
DIR/traces.jsonl and DIR/logs.jsonl. Nothing of groundwatch is imported here.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, cast

QUESTION = "How long is its warranty?"
HISTORY = [
    ("user", "Which battery does the X200 use?"),
    ("assistant", "The X200 uses the B7 lithium battery."),
]
PASSAGES = [
    ("warranty.pdf", "The B7 battery is covered for 8 years or 100,000 miles."),
    ("specs.pdf", "The X200 uses the B7 lithium battery."),
]
SYSTEM = "Answer from the manual."
APP = "support-bot"
MODEL = "gpt-4o-mini"
SESSION = "conv-7"

#: instrumentation -> its modes: (environment, instrumentor keyword arguments)
MODES: dict[str, dict[str, tuple[dict[str, str], dict[str, Any]]]] = {
    "openinference": {"spans": ({}, {})},
    "openllmetry": {"attributes": ({}, {}), "events": ({}, {"use_attributes": False})},
    "openllmetry-0.54": {"attributes": ({}, {})},
    "openai-v2": {
        "no-content": ({}, {}),
        "semconv-1.30": ({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, {}),
        **{
            mode.lower(): (
                {
                    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": mode,
                },
                {},
            )
            for mode in ("SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT")
        },
    },
}


def _instrumentor(name: str, kwargs: dict[str, Any]) -> Any:
    if name == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInference

        return OpenInference(**kwargs)
    if name.startswith("openllmetry"):
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry

        return OpenLLMetry(**kwargs)
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as OpenAIv2

    return OpenAIv2(**kwargs)


def _hex_ids(node: Any) -> Any:
    """Proto3 JSON writes bytes as base64; OTLP/JSON writes trace and span ids as hex."""
    if isinstance(node, dict):
        return {
            k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else _hex_ids(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def otlp_json(message: Any) -> str:
    from google.protobuf.json_format import MessageToDict

    return json.dumps(_hex_ids(MessageToDict(message, use_integers_for_enums=True)))


def retrieve(tracer: Any, convention: str) -> None:
    """A retrieval span of the app's own, in the instrumentation's convention."""
    if convention == "openinference":
        with tracer.start_as_current_span("retrieve") as span:
            span.set_attribute("openinference.span.kind", "RETRIEVER")
            span.set_attribute("input.value", QUESTION)
            for n, (doc, text) in enumerate(PASSAGES):
                span.set_attribute(f"retrieval.documents.{n}.document.id", doc)
                span.set_attribute(f"retrieval.documents.{n}.document.content", text)
                span.set_attribute(f"retrieval.documents.{n}.document.score", 0.9 - n / 10)
        return
    with tracer.start_as_current_span("retrieval manuals") as span:
        span.set_attribute("gen_ai.operation.name", "retrieval")
        span.set_attribute("gen_ai.data_source.id", "manuals")
        documents = [
            {"id": doc, "score": 0.9 - n / 10, "content": text} for n, (doc, text) in enumerate(PASSAGES)
        ]
        span.set_attribute("gen_ai.retrieval.documents", json.dumps(documents))


class Recorder:
    """The app's tracer and logger providers (service ``service``), each exporting to memory; ``write``
    writes what they recorded to DIR/traces.jsonl and DIR/logs.jsonl (one export request a line, an empty
    file when nothing was recorded)."""

    def __init__(self, service: str) -> None:
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        resource = Resource.create({"service.name": service})
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.logs = InMemoryLogRecordExporter()
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))

    def write(self, out: Path) -> None:
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        self.tracer_provider.force_flush()
        self.logger_provider.force_flush()
        out.mkdir(parents=True, exist_ok=True)
        finished = self.spans.get_finished_spans()
        (out / "traces.jsonl").write_text(otlp_json(encode_spans(finished)) + "\n" if finished else "")
        records = self.logs.get_finished_logs()
        (out / "logs.jsonl").write_text(otlp_json(encode_logs(records)) + "\n" if records else "")


def session(openinference: bool) -> AbstractContextManager[object]:
    """The conversation's session id, set the way OpenInference's instrumentations read it (the others read
    no session from the context)."""
    if not openinference:
        return nullcontext()
    from openinference.instrumentation import using_session

    return cast("AbstractContextManager[object]", using_session(SESSION))


def run(name: str, mode: str, base_url: str, out: Path, parts: bool) -> None:
    environment, kwargs = MODES[name][mode]
    os.environ.update(environment)
    from openai import OpenAI

    recorder = Recorder(APP)
    _instrumentor(name, kwargs).instrument(
        tracer_provider=recorder.tracer_provider, logger_provider=recorder.logger_provider
    )
    tracer = recorder.tracer_provider.get_tracer("rag-app")
    client = OpenAI(base_url=base_url, api_key="sk-test")
    user: Any = [{"type": "text", "text": QUESTION}] if parts else QUESTION
    chat = [
        {"role": "system", "content": SYSTEM + "\n\n" + "\n".join(text for _, text in PASSAGES)},
        *({"role": role, "content": text} for role, text in HISTORY),
        {"role": "user", "content": user},
    ]
    with session(name == "openinference"), tracer.start_as_current_span("rag"):
        retrieve(tracer, "openinference" if name == "openinference" else "genai")
        client.chat.completions.create(model=MODEL, messages=chat)  # type: ignore[arg-type]
    recorder.write(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instrumentation", required=True, choices=sorted(MODES))
    parser.add_argument("--mode", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--parts", action="store_true", help="the question as an array of content parts")
    args = parser.parse_args()
    run(args.instrumentation, args.mode, args.base_url, args.out, args.parts)


if __name__ == "__main__":
    main()
