"""`groundwatch otlp FILE [FILE ...]`: OpenTelemetry traces and logs (OTLP/JSON export requests, one a
line or one document, as the Collector's file exporter writes them) -> interactions JSONL, ready for
`groundwatch replay` or `groundwatch eval`. The files are read together: a trace's model calls (span and
log records), tool spans and retrieved passages are joined by trace and span id, in whichever file they
are (``pipeline.otlp_join``), and each trace gives one interaction per final answer, its tool calls and
results as steps (``pipeline.otlp.convert_trace``). Calls that cannot be mapped are listed on stderr with
the reason. Files that hold no span and no log record at all, and files whose model calls give no
interaction, are an error (exit 2): the reasons say why."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from groundwatch.commands.files import input_file
from pipeline.otlp import CallError, convert_trace, read_batch
from pipeline.otlp_join import OtlpBuffer
from schemas.errors import ConfigError
from schemas.json_input import read_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        type=Path,
        nargs="+",
        help="OTLP/JSON export requests of traces and/or logs: JSON lines or one document a file",
    )
    parser.add_argument("--out", type=Path, help="write the interactions here (default: stdout)")


def requests(path: Path) -> Iterator[dict[str, Any]]:
    """Each export request (traces or logs) of the file (one JSON object, or one a line); ConfigError
    naming the file and line for anything else."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8: {exc}") from None
    try:
        whole = read_json(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        yield whole
        return
    if whole is not None:
        raise ConfigError(
            f"{path} holds a JSON {type(whole).__name__}: give one OTLP/JSON export request "
            "object, or one a line"
        )
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                request = read_json(line)
            except ValueError as exc:
                raise ConfigError(f"{path} line {n} is not JSON: {exc}") from None
            if not isinstance(request, dict):
                raise ConfigError(
                    f"{path} line {n} is a JSON {type(request).__name__}, not an OTLP/JSON "
                    "export request object"
                )
            yield request


def run(args: argparse.Namespace) -> int:
    for path in args.file:
        input_file(path)
    buffer = OtlpBuffer(hold_s=float("inf"), traces=True, logs=True, at_once=False)
    read = 0
    unjoinable: list[CallError] = []
    for path in args.file:
        for number, request in enumerate(requests(path), 1):
            try:
                batch = read_batch(request)
            except ValueError as exc:
                raise ConfigError(f"{path}: export request {number}: {exc}") from None
            read += batch.read
            unjoinable += batch.unjoinable
            buffer.add(batch, None, 0.0)
    if not read:
        names = ", ".join(str(p) for p in args.file)
        raise ConfigError(f"{names}: no spans and no log records (resourceSpans / resourceLogs) to read")
    out = args.out.open("w", encoding="utf-8") if args.out else sys.stdout
    written, failed, steps, calls = 0, len(unjoinable), 0, len(unjoinable)
    for piece in unjoinable:
        print(f"model call {piece.trace_id}:{piece.span_id} ({piece.name}): {piece.reason}", file=sys.stderr)
    try:
        for ready in buffer.drain():
            calls += len(ready.trace.calls)
            result = convert_trace(ready.trace)
            steps += result.steps
            for error in result.errors:
                failed += 1
                print(
                    f"model call {error.trace_id}:{error.span_id} ({error.name}): {error.reason}",
                    file=sys.stderr,
                )
            for found in result.interactions:
                out.write(found.model_dump_json() + "\n")
                written += 1
    finally:
        if args.out:
            out.close()
    print(
        f"{written} interactions, {steps} model calls read as steps, {failed} model calls not mapped",
        file=sys.stderr,
    )
    if calls and not written:
        print(
            f"error: {calls} model calls read and no interaction: "
            + ("the reasons are above" if failed else "no model call answered in text (only tool calls)"),
            file=sys.stderr,
        )
        return 2
    return 0
