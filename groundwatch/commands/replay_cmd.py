"""`groundwatch replay FILE.jsonl`: produce interactions onto the interactions topic."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from schemas.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="JSONL, one interaction a line")
    parser.add_argument(
        "--rate", type=float, help="at most N interactions a second (default: as fast as it can)"
    )
    parser.add_argument("--app", help="set every interaction's app")
    parser.add_argument("--model", help="set every interaction's model")
    parser.add_argument("--limit", type=int, help="send only the first N lines")
    parser.add_argument("--broker", help="override GROUNDWATCH_KAFKA__BROKER (kafka://host:port)")


def run(args: argparse.Namespace) -> int:
    from groundwatch.replay import read_lines, replay

    settings = Settings()
    if args.broker:
        settings = settings.with_changes(kafka={"broker": args.broker})
    if not args.file.is_file():
        print(f"no such file: {args.file}")
        return 2
    result = asyncio.run(
        replay(
            settings, read_lines(args.file), rate=args.rate, app=args.app, model=args.model, limit=args.limit
        )
    )
    print(
        f"sent {result.sent} interactions in {result.seconds:.2f}s"
        f" to {settings.kafka.topic_prefix}interactions"
    )
    return 0


if __name__ == "__main__":  # `python -m groundwatch.commands.replay_cmd`: this command alone
    import sys

    _parser = argparse.ArgumentParser(prog="groundwatch replay", description=__doc__)
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
