"""`groundwatch` command line: one sub-command a module under groundwatch/commands/."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# sub-command name -> module under groundwatch.commands; each module has add_arguments(parser) and run(args)
COMMANDS: dict[str, str] = {
    "schema": "Print the JSON Schema of every message.",
    "eval": "Evaluate a JSONL file of interactions offline and write a report.",
    "worker": "Run the stream processors against the configured Kafka and ClickHouse.",
    "replay": "Produce interactions from a JSONL file onto the interactions topic.",
    "report": "Print trend tables per app/model from ClickHouse.",
    "demo": "Start a local broker, worker and judge, replay sample traffic, print figures.",
    "dashboard": "Serve the built-in dashboard over a ClickHouse server or a chDB path.",
    "settings": "Print every GROUNDWATCH_* setting with its type, default and meaning (markdown).",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="groundwatch", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"groundwatch.commands.{name}_cmd")
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p)
        p.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result = args._module.run(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
