"""`groundwatch otlp FILE`: OpenTelemetry traces (OTLP/JSON export requests, one a line or one document)
-> interactions JSONL, ready for `groundwatch replay` or `groundwatch eval`. Spans that look like a model
call but cannot be mapped are listed on stderr with the reason."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.otlp import convert_request
from schemas.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", type=Path, help="OTLP/JSON ExportTraceServiceRequest(s): JSON lines or one document"
    )
    parser.add_argument("--out", type=Path, help="write the interactions here (default: stdout)")


def requests(path: Path) -> Iterator[dict[str, Any]]:
    """Each ExportTraceServiceRequest of the file (one JSON object, or one a line); ConfigError naming the
    file and line for anything else."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8: {exc}") from None
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        yield whole
        return
    if whole is not None:
        raise ConfigError(
            f"{path} holds a JSON {type(whole).__name__}: give one OTLP/JSON ExportTraceServiceRequest "
            "object, or one a line"
        )
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                request = json.loads(line)
            except ValueError as exc:
                raise ConfigError(f"{path} line {n} is not JSON: {exc}") from None
            if not isinstance(request, dict):
                raise ConfigError(
                    f"{path} line {n} is a JSON {type(request).__name__}, not an OTLP/JSON "
                    "ExportTraceServiceRequest object"
                )
            yield request


def run(args: argparse.Namespace) -> int:
    if not args.file.is_file():
        raise ConfigError(f"no such file: {args.file}")
    out = args.out.open("w", encoding="utf-8") if args.out else sys.stdout
    written = failed = 0
    try:
        for number, request in enumerate(requests(args.file), 1):
            try:
                converted = convert_request(request)
            except ValueError as exc:
                raise ConfigError(f"{args.file}: export request {number}: {exc}") from None
            for interaction in converted.interactions:
                out.write(interaction.model_dump_json() + "\n")
                written += 1
            for error in converted.errors:
                failed += 1
                print(
                    f"span {error.trace_id}:{error.span_id} ({error.name}): {error.reason}", file=sys.stderr
                )
    finally:
        if args.out:
            out.close()
    print(f"{written} interactions, {failed} spans not mapped", file=sys.stderr)
    return 0
