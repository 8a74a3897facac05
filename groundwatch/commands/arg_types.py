"""argparse types of the numbers commands take: a bad value ends the command with one line and exit code 2
(``groundwatch.cli.OneLineParser``) before anything runs."""

from __future__ import annotations

import argparse
import math


def _number(text: str, kind: type[int] | type[float]) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {'a whole number' if kind is int else 'a number'}, got {text!r}"
        ) from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """A whole number, 1 or more."""
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """A whole number, 0 or more."""
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number over 0."""
    value = float(_number(text, float))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number over 0, got {text!r}")
    return value


def port_number(text: str) -> int:
    """A TCP port, 1-65535."""
    value = int(_number(text, int))
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"must be a port 1-65535, got {text!r}")
    return value
