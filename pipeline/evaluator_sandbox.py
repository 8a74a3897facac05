"""Python evaluators run in a pool of worker subprocesses, so nothing a function does stops the caller.

``EvaluatorSandbox.score`` calls a ``module:function`` of the evaluators file on a copy of the interaction
in one of ``evaluators.python_processes`` subprocesses (pebble's ``ProcessPool``, started with ``spawn``:
a child never inherits the worker's threads, sockets or event loop) and returns ``SandboxResult``: a score
and reason, or why there is none. What a function does costs only that call's score:

- an exception, ``SystemExit`` or ``KeyboardInterrupt`` is caught in the child (reason ``raised``), which
  goes on serving;
- a call still running at its timeout (time queued for a process included) has its process killed and
  replaced (reason ``timeout``): a spinning loop or a backtracking ``re`` holds a core of the child, never
  the caller's event loop or interpreter exit;
- a child that dies (a segfault, ``os._exit``, the kernel's OOM killer) is replaced (reason ``crashed``);
- memory past ``evaluators.python_memory_mb`` (the child's address-space limit) is a ``MemoryError`` in
  the child (reason ``raised``) or its death (``crashed``);
- a return value that is not a score is read in the child (reason ``bad result``), so nothing but two
  plain values ever crosses back.

The children ignore SIGINT (a Ctrl-C on the terminal is the parent's to handle) and are killed by
``close``, which never waits on a running call. The module imports nothing but the interaction model, so a
child starts in about a second.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import multiprocessing
import signal
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Literal

import pebble
from pydantic import BaseModel, ConfigDict, Field

from pipeline.child_process import die_with_parent
from schemas.errors import GroundwatchError
from schemas.interaction import Interaction

#: why a call has no score: the first word of its reason, a label of the failure counters
FailureKind = Literal["raised", "timeout", "crashed", "bad result", "stopped"]


class SandboxResult(BaseModel):
    """One call's outcome: a score with its reason, or no score and why (``failure`` names the kind)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    score: float | None = Field(description="in [0, 1]; None when the call gave none")
    reason: str = Field(description="the function's reason with a score; why not without one")
    failure: FailureKind | None = Field(None, description="the kind of failure when score is None")


def read_result(value: Any, pass_fail: bool) -> tuple[float, str]:
    """A python evaluator's return value as (score, reason); ValueError saying what is wrong with it."""
    reason = ""
    if isinstance(value, Mapping):
        if "score" not in value:
            raise ValueError(f"returned a mapping without 'score': keys {sorted(map(str, value))[:5]}")
        reason = str(value.get("reason") or "")
        value = value["score"]
    if isinstance(value, bool):
        return float(value), reason
    if pass_fail:
        raise ValueError(f"output pass_fail: returned {type(value).__name__} {value!r:.40}, not a bool")
    if isinstance(value, int | float) and not math.isnan(float(value)) and 0.0 <= float(value) <= 1.0:
        return float(value), reason
    raise ValueError(f"returned {type(value).__name__} {value!r:.40}, not a score in [0, 1]")


# ---- the child's side --------------------------------------------------------------------------------

_FUNCTIONS: dict[str, Callable[[Interaction], Any]] = {}


def _start_child(folder: str, memory_mb: int) -> None:
    """A child's set-up: killed with its parent (a worker killed with ``kill -9`` leaves no evaluator
    spinning), the evaluators file's folder importable, SIGINT ignored, its memory capped."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    if memory_mb > 0:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _function(spec: str) -> Callable[[Interaction], Any]:
    fn = _FUNCTIONS.get(spec)
    if fn is None:
        module_name, _, attr = spec.partition(":")
        fn = getattr(importlib.import_module(module_name), attr)
        _FUNCTIONS[spec] = fn
    return fn


def _named(exc: BaseException) -> str:
    """``ValueError: why``, or the bare name of an exception without a message."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _ready() -> None:
    """A child's first task, so the pool starts its processes."""


def _call(spec: str, interaction: Interaction, pass_fail: bool) -> tuple[float | None, str, str | None]:
    """Runs in a child: the function on the interaction (a copy: it came through a pipe), its result read
    there. Every exception, ``SystemExit`` and ``KeyboardInterrupt`` included, is a reason."""
    try:
        value = _function(spec)(interaction)
    except BaseException as exc:  # the function's own failures are its missing score
        return None, f"raised {_named(exc)}", "raised"
    try:
        score, reason = read_result(value, pass_fail)
    except ValueError as exc:
        return None, f"bad result: {exc}", "bad result"
    except BaseException as exc:  # a result whose __eq__ or __str__ misbehaves
        return None, f"bad result: {_named(exc)}", "bad result"
    return score, reason, None


# ---- the parent's side -------------------------------------------------------------------------------


class EvaluatorSandbox:
    """A pool of ``processes`` children that call python evaluators (``folder``: where the evaluators
    file is, put on the children's import path); started on the first call, killed by ``close``."""

    def __init__(self, folder: str, processes: int, memory_mb: int) -> None:
        self.folder, self.processes, self.memory_mb = folder, processes, memory_mb
        self._pool: pebble.ProcessPool | None = None
        self._running: set[Future[Any]] = set()  # calls not done yet (``close`` ends them)
        self._closed = False

    def _started(self) -> pebble.ProcessPool:
        if self._pool is None:
            self._pool = pebble.ProcessPool(
                max_workers=self.processes,
                initializer=_start_child,
                initargs=(self.folder, self.memory_mb),
                context=multiprocessing.get_context("spawn"),
            )
        return self._pool

    def start(self) -> None:
        """Start the children now (each takes about a second to import), not at the first call."""
        self._started().schedule(_ready)

    async def score(
        self, function: str, interaction: Interaction, pass_fail: bool, timeout_s: float
    ) -> SandboxResult:
        """``function`` (``module:function``) on ``interaction`` in a child, killed (with its process,
        which is replaced) once it has run ``timeout_s``; the time a call waits for a free process is
        not counted (the caller bounds it: the stream's ``wait_after_core_s``). A cancellation kills the
        call's process if it runs, and goes through."""
        if self._closed:
            return SandboxResult(score=None, reason="stopped: the evaluators were closed", failure="stopped")
        future = self._started().schedule(_call, args=(function, interaction, pass_fail), timeout=timeout_s)
        self._running.add(future)
        future.add_done_callback(self._running.discard)
        try:
            score, reason, failure = await asyncio.wrap_future(future)
        except (_Closed, BrokenProcessPool) as exc:
            if not self._closed:
                return SandboxResult(score=None, reason=f"crashed: the evaluator pool broke ({exc!r})",
                                     failure="crashed")  # fmt: skip
            return SandboxResult(score=None, reason="stopped: the evaluators were closed", failure="stopped")
        except TimeoutError:  # pebble killed the process running it and starts another
            return SandboxResult(score=None, reason=f"timeout: still running after {timeout_s:g} s",
                                 failure="timeout")  # fmt: skip
        except asyncio.CancelledError:
            future.cancel()
            raise
        except pebble.ProcessExpired as exc:
            return SandboxResult(score=None, reason=f"crashed: its process died ({_death(exc.exitcode)})",
                                 failure="crashed")  # fmt: skip
        if score is None:
            kind: FailureKind = "bad result" if failure == "bad result" else "raised"
            return SandboxResult(score=None, reason=reason, failure=kind)
        return SandboxResult(score=score, reason=reason)

    def close(self) -> None:
        """Kill the children (a call still running gets no score); never waits on an evaluator."""
        self._closed = True
        if self._pool is not None:
            self._pool.stop()
            self._pool.join(timeout=5)
            self._pool = None
        for future in list(self._running):
            if not future.done():
                future.set_exception(_Closed())


class _Closed(GroundwatchError):
    """A call's end when the sandbox is closed under it."""


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"
