"""Content-hash cache of judge verdicts.

A key is the sha256 of (prompt name, prompt version, model, the inputs: premise, hypothesis or
texts); a value is the verdict as JSON text. In memory (LRU) by default, or on disk in a sqlite3
file (``settings.judge.cache_path``) so a replay of the same traffic costs no call.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

from schemas.settings import JudgeSettings


def cache_key(prompt: str, version: str, model: str, *inputs: str | None) -> str:
    """sha256 over the prompt identity, the model and the inputs (unambiguous: JSON-encoded list)."""
    payload = json.dumps([prompt, version, model, *inputs], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class VerdictCache(Protocol):
    def get(self, key: str) -> str | None: ...

    def put(self, key: str, value: str) -> None: ...

    def close(self) -> None: ...


class MemoryCache:
    """LRU in memory, bounded by entry count."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[str, str] = OrderedDict()

    def get(self, key: str) -> str | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: str, value: str) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def close(self) -> None:
        self._data.clear()


class SqliteCache:
    """On-disk cache in one sqlite3 file; an in-memory LRU in front of it for hot keys."""

    def __init__(self, path: Path, memory_entries: int = 10_000) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._front = MemoryCache(memory_entries)

    def get(self, key: str) -> str | None:
        value = self._front.get(key)
        if value is not None:
            return value
        with self._lock:
            row = self._db.execute("SELECT value FROM verdicts WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        self._front.put(key, row[0])
        return str(row[0])

    def put(self, key: str, value: str) -> None:
        self._front.put(key, value)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO verdicts (key, value) VALUES (?, ?)", (key, value))

    def close(self) -> None:
        with self._lock:
            self._db.close()


def open_cache(settings: JudgeSettings) -> VerdictCache | None:
    """The cache the settings ask for: None when disabled, sqlite when a path is set, else memory."""
    if not settings.cache_enabled:
        return None
    if settings.cache_path is not None:
        return SqliteCache(Path(settings.cache_path))
    return MemoryCache(settings.cache_max_entries)
