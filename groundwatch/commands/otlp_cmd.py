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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", type=Path, help="OTLP/JSON ExportTraceServiceRequest(s): JSON lines or one document"
    )
    parser.add_argument("--out", type=Path, help="write the interactions here (default: stdout)")


def requests(path: Path) -> Iterator[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        yield whole
        return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not JSON: {exc}") from None


def run(args: argparse.Namespace) -> int:
    if not args.file.is_file():
        print(f"groundwatch otlp: no such file: {args.file}", file=sys.stderr)
        return 2
    out = args.out.open("w", encoding="utf-8") if args.out else sys.stdout
    written = failed = 0
    try:
        for request in requests(args.file):
            converted = convert_request(request)
            for interaction in converted.interactions:
                out.write(interaction.model_dump_json() + "\n")
                written += 1
            for error in converted.errors:
                failed += 1
                print(
                    f"span {error.trace_id}:{error.span_id} ({error.name}): {error.reason}", file=sys.stderr
                )
    except ValueError as exc:
        print(f"groundwatch otlp: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.out:
            out.close()
    print(f"{written} interactions, {failed} spans not mapped", file=sys.stderr)
    return 0
