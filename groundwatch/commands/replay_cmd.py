"""`groundwatch replay FILE.jsonl`: produce interactions onto the interactions topic."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from groundwatch.commands.arg_types import non_negative_int, positive_float
from groundwatch.commands.files import input_file
from schemas.errors import ConfigError
from schemas.settings import Settings


def check_lines(path: Path) -> None:
    """ConfigError naming the first line that is not UTF-8, or saying that no line holds anything
    (checked before anything is sent)."""
    blank = True
    with path.open("rb") as fh:
        for number, line in enumerate(fh, 1):
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"{path} line {number} is not UTF-8 (byte 0x{line[exc.start]:02x} at column "
                    f"{exc.start + 1}); nothing was sent"
                ) from None
            blank = blank and not text.strip()
    if blank:
        raise ConfigError(f"{path} holds no interaction (no line that is not blank); nothing was sent")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="JSONL, one interaction a line")
    parser.add_argument(
        "--rate", type=positive_float, help="at most N interactions a second (default: as fast as it can)"
    )
    parser.add_argument("--app", help="set every interaction's app")
    parser.add_argument("--model", help="set every interaction's model")
    parser.add_argument("--limit", type=non_negative_int, help="send only the first N lines")
    parser.add_argument("--broker", help="override GROUNDWATCH_KAFKA__BROKER (kafka://host:port)")


def run(args: argparse.Namespace) -> int:
    from groundwatch.replay import read_lines, replay

    settings = Settings()
    if args.broker:
        settings = settings.with_changes(kafka={"broker": args.broker})
    input_file(args.file)
    check_lines(args.file)
    from streams.topics import broker_errors

    with broker_errors(settings.kafka, "send to"):
        result = asyncio.run(
            replay(
                settings,
                read_lines(args.file),
                rate=args.rate,
                app=args.app,
                model=args.model,
                limit=args.limit,
            )
        )
    print(
        f"sent {result.sent} interactions in {result.seconds:.2f}s"
        f" to {settings.kafka.topic_prefix}interactions"
    )
    return 0


if __name__ == "__main__":  # `python -m groundwatch.commands.replay_cmd`: this command alone
    import sys

    from groundwatch.cli import main

    sys.exit(main(["replay", *sys.argv[1:]]))  # errors end in one line, as with `groundwatch replay`
