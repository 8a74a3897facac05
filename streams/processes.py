"""A worker's judging processes (``kafka.processes``): the other cores judge.

A worker's process is one event loop, so it uses one core. With the fused topology and
``kafka.processes`` over 1, ``JudgingProcesses`` starts ``kafka.processes - 1`` processes
(``groundwatch worker --judging-for PID``): each is a member of the worker's consumer group that reads
the interactions topic alone, judges and sends the Evaluations. The worker's own process then does not
judge: it reads the evaluations, touches, labels and dead letters, writes ClickHouse, closes the windows
and conversations and serves the web server. Kafka spreads the interactions' partitions over the judging
processes (faust's assignor groups the topics by the members that read them). Nothing is shared but the
broker: an Evaluation reaches ClickHouse through the evaluations topic, acked once written.

- A judging process that ends while the worker runs (a crash, the OOM killer) is named in one line with
  its exit code and started again, after 1 s, doubling to 30 s while it keeps ending within a minute;
  its partitions go to the other judging processes meanwhile (the group's session timeout); with a
  single one, the interactions wait for it.
- They run in their own session (a Ctrl-C reaches the worker alone) and stop when the worker stops
  (SIGTERM, then SIGKILL after ``kafka.shutdown_timeout_s``); each also watches its parent and stops
  when the worker is gone (a SIGKILL of the worker leaves nothing behind).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence

log = logging.getLogger(__name__)

FIRST_RESTART_S = 1.0
LAST_RESTART_S = 30.0
STEADY_S = 60.0  # a process that ran this long is healthy again: its next restart waits FIRST_RESTART_S


class JudgingProcesses:
    def __init__(
        self, count: int, loglevel: str, env: Mapping[str, str] | None = None, stop_timeout_s: float = 30.0
    ) -> None:
        """``count`` processes judging beside this one, started with this process's environment (and
        ``env`` over it)."""
        self.count = count
        self.loglevel = loglevel
        # the web server and faust's data directory stay this process's: create_app(judging_only=True)
        self.env = {**os.environ, **(env or {})}
        self.stop_timeout_s = stop_timeout_s
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * count
        self.restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watch: threading.Thread | None = None

    def command(self) -> Sequence[str]:
        return [
            sys.executable, "-m", "groundwatch.commands.worker_cmd",
            "--judging-for", str(os.getpid()), "--loglevel", self.loglevel,
        ]  # fmt: skip

    def _spawn(self, index: int) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(self.command(), env=self.env, start_new_session=True)
        log.info("judging process %d started (pid %d)", index + 1, proc.pid)
        return proc

    def start(self) -> None:
        with self._lock:
            for i in range(self.count):
                self.procs[i] = self._spawn(i)
        self._watch = threading.Thread(target=self._supervise, name="judging-processes", daemon=True)
        self._watch.start()

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p is not None]

    def _supervise(self) -> None:
        """Start again a process that ended while the worker runs, with a growing pause."""
        pauses = [FIRST_RESTART_S] * self.count
        started = [0.0] * self.count
        clock = threading.Event()  # waited on for its timeout: this thread's sleep, cut short by a stop
        elapsed = 0.0
        while not self._stopping.is_set():
            for i, proc in enumerate(list(self.procs)):
                code = None if proc is None else proc.poll()
                if code is None or self._stopping.is_set():
                    continue
                lived = elapsed - started[i]
                pauses[i] = FIRST_RESTART_S if lived >= STEADY_S else pauses[i]
                log.warning(
                    "judging process %d (pid %d) ended with exit code %s; starting it again in %g s",
                    i + 1, proc.pid if proc else -1, code, pauses[i],
                )  # fmt: skip
                if self._stopping.wait(pauses[i]):
                    return
                elapsed += pauses[i]
                with self._lock:
                    if self._stopping.is_set():
                        return
                    self.procs[i] = self._spawn(i)
                    self.restarts += 1
                started[i] = elapsed
                pauses[i] = min(LAST_RESTART_S, pauses[i] * 2)
            clock.wait(0.5)
            elapsed += 0.5

    def stop(self) -> list[int | None]:
        """SIGTERM every judging process, SIGKILL those still running after the timeout; their exit
        codes."""
        self._stopping.set()
        with self._lock:
            procs = [p for p in self.procs if p is not None]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes: list[int | None] = []
        for proc in procs:
            try:
                codes.append(proc.wait(timeout=self.stop_timeout_s))
            except subprocess.TimeoutExpired:
                log.warning(
                    "judging process pid %d did not stop in %g s: killed", proc.pid, self.stop_timeout_s
                )
                proc.kill()
                codes.append(proc.wait())
        if self._watch is not None:
            self._watch.join(timeout=5)
        return codes


def watch_parent(parent: int, every_s: float = 1.0) -> threading.Thread:
    """In a judging process: stop (SIGTERM to itself, faust's own clean stop) once ``parent``, the
    worker that started it, is gone."""

    def run() -> None:
        tick = threading.Event()
        while os.getppid() == parent:
            tick.wait(every_s)
        log.warning("the worker (pid %d) that started this judging process is gone; stopping", parent)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=run, name="watch-parent", daemon=True)
    thread.start()
    return thread
