from __future__ import annotations

import argparse
import json

from schemas import ALL_MESSAGES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", choices=sorted(ALL_MESSAGES), help="one message (default: all)")


def run(args: argparse.Namespace) -> int:
    names = [args.name] if args.name else sorted(ALL_MESSAGES)
    out = {name: ALL_MESSAGES[name].model_json_schema() for name in names}
    print(json.dumps(out[args.name] if args.name else out, indent=2))
    return 0
