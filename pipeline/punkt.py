"""Where nltk finds its punkt sentence data: inside an installed registry package, never downloaded.

The ``llama-index-core`` wheel ships the real ``punkt_tab`` tables under
``llama_index/core/_static/nltk_cache``. groundwatch installs that wheel with ``--no-deps`` and only
reads those data files: the package is located through its distribution metadata, so llama_index is
never imported. ``ensure_punkt()`` appends that directory to ``nltk.data.path`` once (calling it again
changes nothing) and checks that the English tables are there; nothing is ever downloaded.
"""

from __future__ import annotations

import functools
import importlib.metadata
from pathlib import Path

import nltk

from schemas.errors import PunktMissingError

PUNKT_DISTRIBUTION = "llama-index-core"
PUNKT_PIN = "llama-index-core==0.14.25"
PUNKT_RELATIVE_DIR = "llama_index/core/_static/nltk_cache"
_INSTALL_HINT = f"install it with: pip install {PUNKT_PIN} --no-deps"


def punkt_data_dir() -> Path:
    """The nltk data directory inside the installed ``llama-index-core`` distribution."""
    try:
        dist = importlib.metadata.distribution(PUNKT_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise PunktMissingError(
            f"punkt sentence data not found: package {PUNKT_DISTRIBUTION!r} is not installed; {_INSTALL_HINT}"
        ) from exc
    path = Path(str(dist.locate_file(PUNKT_RELATIVE_DIR)))
    if not (path / "tokenizers" / "punkt_tab" / "english").is_dir():
        raise PunktMissingError(
            f"punkt sentence data not found under {path} (expected tokenizers/punkt_tab/english); "
            f"{_INSTALL_HINT}"
        )
    return path


@functools.cache
def ensure_punkt() -> Path:
    """Make ``nltk.sent_tokenize`` find punkt_tab; idempotent, returns the data directory."""
    path = punkt_data_dir()
    entry = str(path)
    if entry not in nltk.data.path:
        nltk.data.path.append(entry)
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError as exc:  # pragma: no cover - only with a broken install
        raise PunktMissingError(f"nltk cannot load punkt_tab from {path}; {_INSTALL_HINT}") from exc
    return path
