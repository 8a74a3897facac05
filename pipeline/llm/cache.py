"""Content-hash cache of judge verdicts.

A key is the sha256 of (prompt name, prompt version, model, the inputs: premise, hypothesis or
texts); a value is the verdict as JSON text. In memory (LRU) by default, or on disk in a sqlite3
file (``settings.judge.cache_path``) so a replay of the same traffic costs no call. The interface is
async: the sqlite statements run on a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, TypeVar

from schemas.settings import JudgeSettings

T = TypeVar("T")
_SQL_VARS = 500  # keys per SELECT ... IN (...), under sqlite's variable limit


def cache_key(prompt: str, version: str, model: str, *inputs: str | None) -> str:
    """sha256 over the prompt identity, the model and the inputs (unambiguous: JSON-encoded list)."""
    payload = json.dumps([prompt, version, model, *inputs], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class VerdictCache(Protocol):
    """Async, so that a cache on disk never blocks the event loop; batch methods save round trips."""

    async def get_many(self, keys: Sequence[str]) -> list[str | None]: ...

    async def put_many(self, items: Sequence[tuple[str, str]]) -> None: ...

    async def aclose(self) -> None: ...


class MemoryCache:
    """LRU in memory, bounded by entry count. The async methods never suspend (no thread hop)."""

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

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        return [self.get(k) for k in keys]

    async def put_many(self, items: Sequence[tuple[str, str]]) -> None:
        for key, value in items:
            self.put(key, value)

    async def aclose(self) -> None:
        self._data.clear()


class SqliteCache:
    """On-disk cache in one sqlite3 file, with an in-memory LRU in front of it for hot keys.

    Hits of the front LRU are answered on the event loop; every sqlite statement runs on the cache's
    own single worker thread (one connection, statements serialised), awaited by the caller, so a
    slow disk or a locked database file never blocks the loop. Writes are written through (a put has
    reached the file when it returns), several in one transaction.
    """

    def __init__(self, path: Path, memory_entries: int = 10_000) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verdict-cache")
        # opened here, once, before any loop work (the constructor runs when the judge is built)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._front = MemoryCache(memory_entries)
        self._closed = False

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._io, fn)

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        out = [self._front.get(k) for k in keys]
        missing = list(dict.fromkeys(k for k, v in zip(keys, out, strict=True) if v is None))
        if not missing:
            return out
        found = await self._run(lambda: self._select(missing))
        for key, value in found.items():
            self._front.put(key, value)
        return [v if v is not None else found.get(k) for k, v in zip(keys, out, strict=True)]

    async def get(self, key: str) -> str | None:
        return (await self.get_many([key]))[0]

    async def put_many(self, items: Sequence[tuple[str, str]]) -> None:
        if not items:
            return
        for key, value in items:
            self._front.put(key, value)
        rows = list(items)
        await self._run(lambda: self._insert(rows))

    async def put(self, key: str, value: str) -> None:
        await self.put_many([(key, value)])

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._run(self._db.close)
        self._io.shutdown(wait=True)

    # ------------------------------------------------------------------ on the worker thread
    def _select(self, keys: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for i in range(0, len(keys), _SQL_VARS):
            chunk = keys[i : i + _SQL_VARS]
            marks = ",".join("?" * len(chunk))
            for key, value in self._db.execute(
                f"SELECT key, value FROM verdicts WHERE key IN ({marks})", chunk
            ).fetchall():
                found[str(key)] = str(value)
        return found

    def _insert(self, rows: list[tuple[str, str]]) -> None:
        self._db.execute("BEGIN")
        try:
            self._db.executemany("INSERT OR REPLACE INTO verdicts (key, value) VALUES (?, ?)", rows)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")


def open_cache(settings: JudgeSettings) -> VerdictCache | None:
    """The cache the settings ask for: None when disabled, sqlite when a path is set, else memory."""
    if not settings.cache_enabled:
        return None
    if settings.cache_path is not None:
        return SqliteCache(Path(settings.cache_path))
    return MemoryCache(settings.cache_max_entries)
