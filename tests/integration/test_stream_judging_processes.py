"""A worker that judges in two processes (``kafka.processes``, streams.processes), on a real Tansu broker
and chDB: every interaction is stored once; a judging process killed (SIGKILL) is started again and the
traffic after it is stored too; a stop ends both processes; a worker killed leaves no judging process
behind."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import WorkerProcess, wait_for
from groundwatch.local.tansu import TansuBroker
from tests.integration.helpers import deployment

SAMPLE = Path(__file__).resolve().parents[2] / "groundwatch" / "data" / "sample_interactions.jsonl"


def judging_children(worker_pid: int) -> list[int]:
    """The live judging processes a worker started (their command line names it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (
            state != "Z"
            and b"--judging-for" in args
            and args[args.index(b"--judging-for") + 1] == str(worker_pid).encode()
        ):
            found.append(int(entry.name))
    return found


def start_with_a_judging_process(
    broker: TansuBroker, tmp_path: Path
) -> tuple[LocalStack, WorkerProcess, int]:
    """A deployment whose worker runs two processes, started and ready: its writer, and the pid of its
    one judging process."""
    dep = deployment(broker.url, tmp_path, extra_env={"GROUNDWATCH_KAFKA__PROCESSES": "2"})
    worker = dep.start_worker()
    try:
        worker.wait_ready()
        wait_for(lambda: len(judging_children(worker.pid)) == 1, 60, "the judging process")
    except BaseException:
        worker.kill()
        raise
    return dep, worker, judging_children(worker.pid)[0]


def test_two_judging_processes_store_each_interaction_once_and_survive_a_kill(
    broker: TansuBroker, tmp_path: Path
) -> None:
    lines = [line for line in SAMPLE.read_text().splitlines() if line.strip()][:60]
    dep, worker, first = start_with_a_judging_process(broker, tmp_path)
    try:
        wait_for(lambda: "judging process ready" in worker.log.read_text(), 120, "the judging process ready")
        dep.replay(lines[:30])
        wait_for(lambda: dep.evaluations() >= 30, 120, "the first 30 stored")

        # a judging process dies: it is started again, and the interactions wait for it
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: judging_children(worker.pid) not in ([], [first]), 60, "a new judging process")
        dep.replay(lines[30:])
        wait_for(lambda: dep.evaluations() >= 60, 180, "all 60 stored")
        [second] = judging_children(worker.pid)
    finally:
        code = worker.stop()
    assert code == 0, worker.tail()
    log = worker.log.read_text()
    assert f"judging process 1 (pid {first}) ended with exit code -9" in log
    assert judging_children(worker.pid) == [] and not Path(f"/proc/{second}/cmdline").exists()
    assert dep.report().counts["evaluations"] == 60


def test_a_worker_killed_leaves_no_judging_process_behind(broker: TansuBroker, tmp_path: Path) -> None:
    _, worker, child = start_with_a_judging_process(broker, tmp_path)
    worker.kill()  # SIGKILL: no stop of its own, nothing to stop its judging process but the process
    wait_for(lambda: not Path(f"/proc/{child}/cmdline").exists() or _zombie(child), 60, "the orphan gone")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
