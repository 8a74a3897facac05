"""pipeline/llm/cache.py, and the judge's use of it: a hit costs no HTTP request."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from pipeline.judges.base import Premise
from pipeline.judges.llm_judge import LLMJudge
from pipeline.llm.cache import MemoryCache, SqliteCache, cache_key, open_cache
from schemas.settings import JudgeSettings
from tests.fakes.openai_server import FakeOpenAIServer


def test_cache_key_is_content_hash() -> None:
    k = cache_key("nli", "1+abc", "m", "premise", None, "hyp")
    assert len(k) == 64
    assert k == cache_key("nli", "1+abc", "m", "premise", None, "hyp")
    assert k != cache_key("nli", "2+abc", "m", "premise", None, "hyp")
    assert k != cache_key("nli", "1+abc", "m2", "premise", None, "hyp")
    assert k != cache_key("nli", "1+abc", "m", "premise", "", "hyp")
    # no ambiguity from concatenation
    assert cache_key("p", "v", "m", "ab", "c") != cache_key("p", "v", "m", "a", "bc")


def test_memory_lru_evicts_oldest() -> None:
    c = MemoryCache(max_entries=2)
    c.put("a", "1")
    c.put("b", "2")
    assert c.get("a") == "1"  # a is now the most recent
    c.put("c", "3")
    assert c.get("b") is None and c.get("a") == "1" and c.get("c") == "3"
    assert len(c) == 2


async def test_sqlite_cache_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "cache.sqlite"
    c = SqliteCache(path)
    await c.put("k", '{"x": 1}')
    await c.put_many([("a", "1"), ("b", "2")])
    await c.aclose()
    c2 = SqliteCache(path)
    assert await c2.get("k") == '{"x": 1}'
    assert await c2.get("missing") is None
    assert await c2.get_many(["b", "missing", "a", "b"]) == ["2", None, "1", "2"]
    await c2.aclose()


async def test_sqlite_cache_runs_sqlite_off_the_event_loop(tmp_path: Path) -> None:
    """Every sqlite statement of a get or put runs on another thread than the loop's; front hits run none."""
    c = SqliteCache(tmp_path / "c.sqlite")
    threads: list[int] = []
    c._db.set_trace_callback(lambda _stmt: threads.append(threading.get_ident()))
    loop_thread = threading.get_ident()
    try:
        await c.put("k", "v")
        assert await c.get_many(["missing", "other"]) == [None, None]
        assert threads and loop_thread not in threads
        n = len(threads)
        assert await c.get("k") == "v"  # in the front LRU: no statement at all
        assert len(threads) == n
    finally:
        await c.aclose()


async def test_locked_sqlite_file_does_not_block_the_loop(tmp_path: Path) -> None:
    """Another connection holds the file's write lock; a put waits for it without blocking the loop, so
    a task on the loop can release the lock and the put then completes. (A put running sqlite on the
    loop would hold the loop until sqlite's busy timeout and fail with "database is locked".)"""
    path = tmp_path / "c.sqlite"
    c = SqliteCache(path)
    holder = sqlite3.connect(str(path), isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        loop = asyncio.get_running_loop()
        started = asyncio.Event()
        # the cache's connection reports each statement it runs (from its worker thread)
        c._db.set_trace_callback(lambda _sql: loop.call_soon_threadsafe(started.set))
        put = asyncio.create_task(c.put("k", "v"))
        await asyncio.wait_for(started.wait(), timeout=5)  # the put runs and waits for the lock
        assert not put.done()
        holder.execute("COMMIT")  # runs because the loop is free
        await put
        assert holder.execute("SELECT value FROM verdicts WHERE key = 'k'").fetchone() == ("v",)
    finally:
        holder.close()
        await c.aclose()


async def test_open_cache_follows_settings(tmp_path: Path) -> None:
    assert open_cache(JudgeSettings(cache_enabled=False)) is None
    assert isinstance(open_cache(JudgeSettings()), MemoryCache)
    disk = open_cache(JudgeSettings(cache_path=tmp_path / "c.sqlite"))
    assert isinstance(disk, SqliteCache)
    await disk.aclose()


PREMISE = Premise("Paris is the capital of France. Paris has about two million inhabitants.")


async def test_second_call_costs_no_request(fake_openai: FakeOpenAIServer) -> None:
    judge = LLMJudge(JudgeSettings(base_url=fake_openai.base_url, model="gpt-4o-mini"))
    try:
        first = await judge.entail(PREMISE, ["Paris is the capital of France.", "Berlin is in Spain."])
        assert fake_openai.stats.requests == 1
        second = await judge.entail(PREMISE, ["Paris is the capital of France.", "Berlin is in Spain."])
        assert fake_openai.stats.requests == 1  # no HTTP request
        assert (
            [h.score for h in second.value.hypotheses]
            == [h.score for h in first.value.hypotheses]
            == [1.0, 0.0]
        )
        (call,) = second.calls
        assert call.cached and call.input_tokens == 0 and call.output_tokens == 0 and call.items == 2
    finally:
        await judge.aclose()


async def test_batched_prompt_sends_only_misses(fake_openai: FakeOpenAIServer) -> None:
    judge = LLMJudge(JudgeSettings(base_url=fake_openai.base_url, model="gpt-4o-mini"))
    try:
        await judge.entail(PREMISE, ["Paris is the capital of France."])
        out = await judge.entail(
            PREMISE, ["Paris is the capital of France.", "Paris has two million inhabitants."]
        )
        assert fake_openai.stats.requests == 2
        last_user = fake_openai.stats.bodies[-1]["messages"][-1]["content"]
        assert "Paris has two million inhabitants." in last_user
        assert '<hypothesis id="1">Paris is the capital' not in last_user
        assert last_user.count("<hypothesis id=") == 1
        assert [h.hypothesis for h in out.value.hypotheses] == [
            "Paris is the capital of France.",
            "Paris has two million inhabitants.",
        ]
        assert [c.cached for c in out.calls] == [True, False]
        # refusals are cached per text
        await judge.classify_refusals(["I don't know.", "Paris."])
        flags = await judge.classify_refusals(["Paris.", "I don't know.", "Lyon."])
        assert flags.value == [False, True, False]
        assert fake_openai.stats.bodies[-1]["messages"][-1]["content"].count("<text id=") == 1
    finally:
        await judge.aclose()


async def test_disk_cache_serves_a_new_judge(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    settings = JudgeSettings(base_url=fake_openai.base_url, model="m", cache_path=tmp_path / "v.sqlite")
    for _ in range(2):
        judge = LLMJudge(settings)
        try:
            out = await judge.replace_pronouns(
                ["Marie Curie was born in Warsaw.", "She won two Nobel prizes."]
            )
            assert len(out.value) == 2
        finally:
            await judge.aclose()
    assert fake_openai.stats.requests == 1
