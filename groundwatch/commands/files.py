"""The files a command is given, checked before it does anything: one line naming the file (exit 2)."""

from __future__ import annotations

from pathlib import Path

from schemas.errors import ConfigError


def input_file(path: Path) -> Path:
    """``path``, a file that exists; else ConfigError saying it is missing or a directory."""
    if path.is_dir():
        raise ConfigError(f"{path} is a directory, not a file")
    if not path.is_file():
        raise ConfigError(f"no such file: {path}")
    return path


def output_file(path: Path, flag: str, source: Path) -> Path:
    """``path``, a file the command may write (it need not exist yet) that is not its input ``source``;
    else ConfigError naming ``flag``."""
    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a directory, not a file")
    if path.resolve() == source.resolve():
        raise ConfigError(f"{flag} {path} is the input file")
    return path
