from __future__ import annotations

import argparse
import json

from schemas.topics import message_models

ALL_MESSAGES = message_models()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", choices=sorted(ALL_MESSAGES), help="one message (default: all)")


def run(args: argparse.Namespace) -> int:
    names = [args.name] if args.name else sorted(ALL_MESSAGES)
    out = {name: ALL_MESSAGES[name].model_json_schema() for name in names}
    print(json.dumps(out[args.name] if args.name else out, indent=2))
    return 0
