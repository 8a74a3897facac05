"""Judging a file's lines for ``groundwatch eval``: in this process, or on every core.

``evaluate_all`` judges lines with the pipeline's Evaluator, at most ``concurrency`` in flight; a failure
becomes the line's ``LineError``. ``JudgingPool`` spreads them over this process and the ``Workers``
(judging processes of a ``concurrent.futures.ProcessPoolExecutor``, each with its own judge and
Evaluator opened once), in chunks of ``CHUNK_LINES`` lines taken from one queue; the results come back in
completion order.

A judging process that dies (a kill, a crash in native code, out of memory) breaks its pool: the chunks
it had go back to the queue, judged by this process or a new pool; no line is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import math
import multiprocessing
import multiprocessing.context
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import AsyncExitStack
from dataclasses import dataclass
from multiprocessing.util import Finalize
from typing import Any

from tqdm import tqdm

from pipeline.custom_evaluators import open_custom
from pipeline.dataset import DatasetLine, LineError
from pipeline.evaluator import Evaluator
from pipeline.judges.factory import open_judge
from pipeline.metrics.relevance import RelevanceScorer
from pipeline.privacy.mask import Masked, PrivacyGuard
from pipeline.topic_assignment import open_topics
from schemas.errors import StageError
from schemas.evaluation import Evaluation
from schemas.settings import Settings
from streams.heap import settle_heap

#: lines a judging process is given at a time: enough that passing them costs little beside judging them,
#: few enough that the progress bar and the evaluations file move along
CHUNK_LINES = 64

log = logging.getLogger(__name__)

Judged = tuple[list[tuple[DatasetLine, Evaluation]], list[LineError]]
#: called with each Evaluation as it is done, and its JSON (made where it was judged)
OnDone = Callable[[Evaluation, str], None]


async def evaluate_all(
    lines: Sequence[DatasetLine],
    evaluator: Evaluator,
    concurrency: int,
    progress: tqdm | None = None,
    on_done: OnDone | None = None,
    privacy: PrivacyGuard | None = None,
) -> Judged:
    """Evaluate every line with at most ``concurrency`` in flight; failures become LineErrors.
    ``privacy`` masks each interaction first (``privacy.mode``; a detector failure: stage privacy).

    ``on_done`` is called with each Evaluation and its JSON as soon as it is finished (completion order).
    """
    semaphore = asyncio.Semaphore(concurrency)
    results: list[tuple[DatasetLine, Evaluation] | LineError | None] = [None] * len(lines)

    async def one(index: int, line: DatasetLine) -> None:
        async with semaphore:
            try:
                stored = privacy.for_storage(line.interaction) if privacy else line.interaction
                judged = privacy.for_judge(stored) if privacy else Masked(stored)
                evaluation = await evaluator.evaluate(judged.interaction, judged.originals)
                if line.interaction.labels is not None and evaluation.labels is None:
                    evaluation = evaluation.model_copy(update={"labels": line.interaction.labels})
                results[index] = (line, evaluation)
                if on_done is not None:
                    on_done(evaluation, evaluation.model_dump_json())
            except Exception as exc:  # every failure is reported with its line, nothing is lost
                stage = exc.stage if isinstance(exc, StageError) else "evaluate"
                results[index] = LineError(
                    line=line.line,
                    interaction_id=line.interaction.interaction_id,
                    stage=stage,
                    reason=f"{type(exc).__name__}: {exc}",
                )
            finally:
                if progress is not None:
                    progress.update(1)

    await asyncio.gather(*(one(i, line) for i, line in enumerate(lines)))
    done = [r for r in results if isinstance(r, tuple)]
    failed = [r for r in results if isinstance(r, LineError)]
    return done, failed


def relevance_scorer(settings: Settings) -> RelevanceScorer | None:
    """The relevance scorer when ``pipeline.relevance`` is on (its extra checked before any judging)."""
    if not settings.pipeline.relevance:
        return None
    scorer = RelevanceScorer()
    scorer.require()  # a missing extra: one line before any judging
    return scorer


def processes_for(lines: int, processes: int) -> int:
    """The judging processes worth starting for ``lines``: at most one per chunk (a small file is judged
    in this process, without the start-up of another)."""
    return max(1, min(processes, math.ceil(lines / CHUNK_LINES)))


# ---- a judging process ----------------------------------------------------------------------------


@dataclass
class _Judging:
    """What a judging process opened once: its loop, judge, Evaluator and privacy guard."""

    loop: asyncio.AbstractEventLoop
    stack: AsyncExitStack
    evaluator: Evaluator
    privacy: PrivacyGuard
    concurrency: int


_judging: _Judging | None = None


def _start(settings: Settings, concurrency: int) -> None:
    """A judging process's start (the pool's initializer): open the judge and the Evaluator once."""
    global _judging
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    stack = AsyncExitStack()
    judge = loop.run_until_complete(stack.enter_async_context(open_judge(settings)))
    custom = open_custom(settings.evaluators, judge)
    if custom is not None:
        stack.callback(custom.close)
    topics = open_topics(settings.topics)
    evaluator = Evaluator(
        judge, settings, relevance_scorer=relevance_scorer(settings), custom=custom, topics=topics
    )
    stack.push_async_callback(evaluator.aclose)
    _judging = _Judging(loop, stack, evaluator, PrivacyGuard(settings.privacy), concurrency)
    Finalize(_judging, _close, exitpriority=10)  # when the pool stops this process
    settle_heap()


def _close() -> None:
    if _judging is not None:
        _judging.loop.run_until_complete(_judging.stack.aclose())
        _judging.loop.close()


Result = tuple[Evaluation, str] | LineError  # a line's Evaluation and its JSON, or why it has none


def _judge_chunk(lines: list[DatasetLine]) -> list[Result]:
    """One chunk, judged in a judging process: each line's Evaluation with its JSON (made here, beside the
    judging, not in the process that collects them), or its LineError, in the chunk's order."""
    assert _judging is not None, "the pool's initializer opens the judging"
    j = _judging
    done, failed = j.loop.run_until_complete(
        evaluate_all(lines, j.evaluator, j.concurrency, privacy=j.privacy)
    )
    by_line: dict[int, Result] = {line.line: (e, e.model_dump_json()) for line, e in done}
    by_line.update((e.line, e) for e in failed)
    return [by_line[line.line] for line in lines]


# ---- the pool ---------------------------------------------------------------------------------------


def chunks(lines: Sequence[DatasetLine], size: int = CHUNK_LINES) -> Iterator[list[DatasetLine]]:
    for start in range(0, len(lines), size):
        yield list(lines[start : start + size])


def _context() -> multiprocessing.context.BaseContext:
    """How judging processes start. Forked, when this process has one thread and no running event loop
    (Linux): they have the pipeline imported already (importing it costs seconds a process) and nothing
    else of this process can be half-way. Else from a fork server that imports the pipeline once
    (macOS, or a pool started again from inside the run)."""
    if sys.platform == "linux" and threading.active_count() == 1 and not _loop_running():
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _ready() -> int:
    return os.getpid()


class Workers:
    """``count`` judging processes with ``concurrency`` interactions in flight each, started now (before
    the run's loop and threads: see ``_context``) from ``settings`` and opening their judges while this
    process reads its input. ``with Workers(...)`` stops them."""

    def __init__(self, settings: Settings, count: int, concurrency: int) -> None:
        self.settings, self.count, self.concurrency = settings, count, concurrency
        self.executor = self.start()
        self.first_ready = self.executor.submit(_ready)  # the processes start (and open their judges) now

    def start(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            self.count, mp_context=_context(), initializer=_start, initargs=(self.settings, self.concurrency)
        )

    def restart(self) -> None:
        """A new pool in place of a broken one (a judging process died)."""
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.executor = self.start()
        self.first_ready = self.executor.submit(_ready)

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *_: object) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class Here:
    """This process's own Evaluator, privacy guard and interactions in flight: it judges too."""

    evaluator: Evaluator
    privacy: PrivacyGuard
    concurrency: int


Take = Callable[[list[DatasetLine], list[Result]], None]


class JudgingPool:
    """This process and the ``workers`` take chunks of the lines from one queue. The workers are given
    chunks once the first of them is ready, so a file done before they are up is judged here alone. A
    judging process that dies breaks its pool: the chunks it had go back to the queue and a new pool
    starts, at most ``MAX_RESTARTS`` times."""

    MAX_RESTARTS = 3

    def __init__(self, workers: Workers, here: Here) -> None:
        self.workers = workers
        self.here = here
        self.restarts = 0  # pools started again after a judging process died
        self._drained = asyncio.Event()  # this process found the queue empty

    async def judge(
        self, lines: Sequence[DatasetLine], progress: tqdm | None = None, on_done: OnDone | None = None
    ) -> Judged:
        """Every line judged: ``(line, Evaluation)`` rows and LineErrors, as ``evaluate_all`` returns them."""
        rows: list[tuple[DatasetLine, Evaluation]] = []
        errors: list[LineError] = []

        def take(chunk: list[DatasetLine], results: list[Result]) -> None:
            for line, result in zip(chunk, results, strict=True):
                if isinstance(result, LineError):
                    errors.append(result)
                else:
                    rows.append((line, result[0]))
                    if on_done is not None:
                        on_done(*result)
            if progress is not None:
                progress.update(len(chunk))

        queue = deque(chunks(lines))
        await asyncio.gather(self._judge_here(queue, take), self._judge_elsewhere(queue, take))
        await self._judge_here(queue, take)  # what a dead judging process left once this one was done
        return rows, errors

    async def _judge_here(self, queue: deque[list[DatasetLine]], take: Take) -> None:
        h = self.here
        while queue:
            chunk = queue.popleft()
            done, failed = await evaluate_all(chunk, h.evaluator, h.concurrency, privacy=h.privacy)
            by_line: dict[int, Result] = {line.line: (e, e.model_dump_json()) for line, e in done}
            by_line.update((e.line, e) for e in failed)
            take(chunk, [by_line[line.line] for line in chunk])
        self._drained.set()

    async def _judge_elsewhere(self, queue: deque[list[DatasetLine]], take: Take) -> None:
        while queue:
            if not await self._round(queue, take):
                return
            if self.restarts >= self.MAX_RESTARTS:  # this process judges what is left
                log.warning("a judging process died again; this process judges the rest")
                return
            self.restarts += 1
            log.warning(
                "a judging process died; its chunks are judged again (pool restart %d)", self.restarts
            )
            self.workers.restart()

    async def _round(self, queue: deque[list[DatasetLine]], take: Take) -> bool:
        """Feed the workers from ``queue``, a chunk a process in flight, until the queue is empty; whether
        a judging process died (its chunks back at the queue's front)."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Any] = asyncio.wrap_future(self.workers.first_ready)
        drained: asyncio.Future[Any] = asyncio.ensure_future(self._drained.wait())
        await asyncio.wait([ready, drained], return_when=asyncio.FIRST_COMPLETED)
        drained.cancel()
        if not ready.done():  # this process took the last chunk before a judging process was up
            return False
        if isinstance(ready.exception(), BrokenProcessPool):
            return True  # a judging process could not start
        running: dict[asyncio.Future[list[Result]], list[DatasetLine]] = {}
        broken = False
        while (queue or running) and not broken:
            while queue and len(running) < self.workers.count and not broken:
                chunk = queue.popleft()
                try:
                    running[loop.run_in_executor(self.workers.executor, _judge_chunk, chunk)] = chunk
                except BrokenProcessPool:  # a judging process died since the last chunk came back
                    queue.appendleft(chunk)
                    broken = True
            if not running:
                break
            finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for future in finished:
                broken |= self._settle(running.pop(future), future, queue, take)
        if running:  # the pool is broken: each fails
            await asyncio.wait(running)
            for future, chunk in running.items():
                self._settle(chunk, future, queue, take)
        return broken

    def _settle(
        self,
        chunk: list[DatasetLine],
        future: asyncio.Future[list[Result]],
        queue: deque[list[DatasetLine]],
        take: Take,
    ) -> bool:
        """A chunk's outcome: taken, or back at the queue's front when its process died (True)."""
        error = future.exception()
        if isinstance(error, BrokenProcessPool):
            queue.appendleft(chunk)
            return True
        if error is not None:  # the chunk could not be passed or returned (a bug): each line says so
            take(chunk, [_failed(line, f"{type(error).__name__}: {error}") for line in chunk])
        else:
            take(chunk, future.result())
        return False


def _failed(line: DatasetLine, reason: str) -> LineError:
    return LineError(
        line=line.line, interaction_id=line.interaction.interaction_id, stage="evaluate", reason=reason
    )
