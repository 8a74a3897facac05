"""The real programs and packages some tests run (Debian packages `make test` installs when it can, the
`otel-contract` extra `make dev` installs): a test that needs one skips without it, except under
CI=true, where its absence fails the run."""

from __future__ import annotations

import os

import pytest


def mark_directory(items: list[pytest.Item], directory: str, marker: pytest.MarkDecorator) -> None:
    """Give every test under ``tests/<directory>/`` the marker."""
    for item in items:
        if f"tests/{directory}/" in str(item.fspath):
            item.add_marker(marker)


def require(*programs: str, package: str) -> None:
    """Skip (or fail under CI=true) unless every program is installed and executable."""
    missing = [p for p in programs if not os.access(p, os.X_OK)]
    if not missing:
        return
    missing_part(f"{', '.join(missing)} not installed (apt-get install {package})")


def missing_part(message: str) -> None:
    """A part the test needs is absent: skip, or fail under CI=true (where everything must run)."""
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
