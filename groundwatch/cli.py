"""groundwatch watches a RAG chatbot's answers as they stream: it judges whether each answer is grounded
in the retrieved passages, agrees with the ground truth or refuses, windows those metrics per app and
model, alerts on drift, and serves a dashboard. Start with `groundwatch demo`; `groundwatch eval FILE`
judges a JSONL file offline; `groundwatch worker` runs against your Kafka and ClickHouse.
"""

# one sub-command a module under groundwatch/commands/

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import select
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from pydantic import ValidationError

from schemas.errors import GroundwatchError, SettingError
from schemas.safe_text import safe_text
from schemas.settings import Settings, describe_settings_error
from schemas.validation import describe_validation_error

# sub-command name -> module under groundwatch.commands; each module has add_arguments(parser) and run(args)
COMMANDS: dict[str, str] = {
    "schema": "Print the JSON Schema of every message.",
    "eval": "Evaluate a JSONL file of interactions offline and write a report.",
    "worker": "Run the stream processors against the configured Kafka and ClickHouse.",
    "replay": "Produce interactions from a JSONL file onto the interactions topic.",
    "otlp": "Turn OpenTelemetry traces and logs (OTLP/JSON) into interactions JSONL.",
    "report": "Print trend tables per app/model from ClickHouse.",
    "demo": "Replay two weeks of sample traffic through a local broker and worker, then serve the dashboard.",
    "dashboard": "Serve the built-in dashboard over a ClickHouse server or a chDB path.",
    "settings": "Print every GROUNDWATCH_* setting with its type, default and meaning (markdown).",
    "labels": "Import people's labels (the eval JSONL format) into ClickHouse.",
    "agreement": "Print the judge's agreement with people's labels and the corrected rates.",
    "export": "Write stored interactions with their labels and this judge's verdicts as eval JSONL.",
    "calibrate": "Choose decision thresholds from people's labels by grouped cross-validation.",
    "erase": "Delete one interaction's, conversation's or pseudonym's rows from every ClickHouse table.",
    "topics": "Find the topics of the questions of a JSONL file or of ClickHouse, and write the topic model.",
}


class OneLineParser(argparse.ArgumentParser):
    """A usage error (a missing argument, a bad number) is one line, ``groundwatch <cmd>: <what>``, and
    exit code 2, as every other error of a command (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="groundwatch", description=__doc__)
    debug = OneLineParser(add_help=False)
    debug.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the traceback of any error (also GROUNDWATCH_DEBUG=1)",
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of any error")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"groundwatch.commands.{name}_cmd")
        p = sub.add_parser(name, help=help_text, description=help_text, parents=[debug])
        module.add_arguments(p)
        p.set_defaults(_module=module, _parser=p)
    return parser


def refuse_unknown(parser: argparse.ArgumentParser, unknown: list[str]) -> NoReturn:
    """The command's usage error for arguments it does not take, with the closest option to a misspelt
    one (``--otu``: did you mean ``--out``?)."""
    options = [o for o in parser._option_string_actions if o.startswith("--")]
    guesses = [
        close[0]
        for arg in unknown
        if arg.startswith("--") and (close := difflib.get_close_matches(arg.split("=", 1)[0], options, n=1))
    ]
    hint = f" (did you mean {', '.join(guesses)}?)" if guesses else ""
    parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")


def describe_error(exc: BaseException) -> tuple[str, str]:
    """(what, why) of an error for one line: which setting, file or service, and the reason."""
    if isinstance(exc, ValidationError) and exc.title == Settings.__name__:
        return "invalid setting", describe_settings_error(exc)
    if isinstance(exc, SettingError):
        return "invalid setting", str(exc)
    if isinstance(exc, ValidationError):
        return f"invalid {exc.title}", describe_validation_error(exc)
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else type(exc).__name__
        return str(where), exc.strerror or str(exc) or type(exc).__name__
    if isinstance(exc, GroundwatchError):
        return type(exc).__name__, str(exc) or type(exc).__name__
    return f"internal error ({type(exc).__name__})", (
        f"{exc} (run with --debug or GROUNDWATCH_DEBUG=1 for the traceback)"
    )


def stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader closed it (poll reports an error on its write end); a
    broken pipe or socket elsewhere (a broker, a webhook) is an error of the command."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # stdout closed, replaced, or no poll on this platform
        return False


def reader_gone() -> int:
    """The end of a command whose output's reader went away (``groundwatch schema | head -1``): no error
    line, since the reader wanted no more, and the shell's exit code for it (128 + SIGPIPE). What is
    still buffered for stdout goes nowhere, so the interpreter's last flush does not fail too."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command. An error it raises on purpose (GroundwatchError), an invalid setting
    (pydantic ValidationError) or an OS error ends it with ONE line on stderr,
    ``groundwatch <cmd>: <what>: <why>``, and exit code 2; any other exception (a bug) with one line and
    exit code 1. ``--debug`` or GROUNDWATCH_DEBUG=1 shows the traceback instead."""
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:
        refuse_unknown(args._parser, unknown)
    debug = bool(getattr(args, "debug", False)) or os.environ.get("GROUNDWATCH_DEBUG", "") not in ("", "0")
    try:
        result = args._module.run(args)
        sys.stdout.flush()  # a closed pipe fails here, not in the interpreter's last flush
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and stdout_reader_gone():
            return reader_gone()
        if debug:
            raise
        what, why = describe_error(exc)
        print(f"groundwatch {args.command}: {safe_text(what)}: {safe_text(why, 2000)}", file=sys.stderr)
        expected = isinstance(exc, GroundwatchError | ValidationError | OSError)
        return 2 if expected else 1
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
