"""The one chDB path this test process may open (chDB: one engine path per process, one process per path).

Unit and integration tests that use chDB in-process share it, each in its own database.
"""

from __future__ import annotations

import functools
import tempfile
import uuid
from pathlib import Path


@functools.cache
def shared_chdb_path() -> Path:
    return Path(tempfile.mkdtemp(prefix="groundwatch-test-chdb-"))


def fresh_chdb_url() -> str:
    """A chdb URL on the shared path with a database of its own."""
    return f"chdb://{shared_chdb_path()}?database=t_{uuid.uuid4().hex[:12]}"
