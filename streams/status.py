"""The worker's status file: table counts after each flush, for followers that cannot open chDB."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field


class WorkerStatus(BaseModel):
    pid: int = Field(default_factory=os.getpid)
    updated_at: datetime  # on the worker's clock
    counts: dict[str, int] = Field(default_factory=dict)  # table -> deduplicated rows
    windows_written: int = 0
    alerts_fired: int = 0


def write_status(path: Path, status: WorkerStatus) -> None:
    """Atomic: write beside, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # readable by its owner only
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(status.model_dump_json())
    os.replace(tmp, path)


def read_status(path: Path) -> WorkerStatus | None:
    try:
        return WorkerStatus.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (FileNotFoundError, ValueError):
        return None
