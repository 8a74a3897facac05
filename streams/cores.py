"""How many CPU cores this process may use, and so how many processes a worker, or ``groundwatch eval``,
runs (``kafka.processes``).

``os.cpu_count()`` is the machine's: in a container it says 64 where the pod may use 2. The cores a
process may use are its CPU affinity (``os.sched_getaffinity``: cpusets) bounded by its cgroup's CPU
quota (``cpu.max`` in cgroup v2, ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` in v1), rounded up, as the
Go runtime's automaxprocs and the JVM's container support count them.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from schemas.settings import Settings

CGROUP = Path("/sys/fs/cgroup")


def _quota(root: Path) -> float | None:
    """The cgroup's CPU quota in cores, None when unlimited or unknown."""
    try:
        v2 = root / "cpu.max"
        if v2.exists():
            quota, period = v2.read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us


def usable_cores(cgroup: Path = CGROUP) -> int:
    """CPU cores this process may use: its affinity, bounded by its cgroup's quota; at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = _quota(cgroup)
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def local_model(settings: Settings) -> bool:
    """Whether the judge (or a cascade's LLM) is the local model, whose server each process would start."""
    js = settings.judge
    return js.kind == "local" or (js.kind == "cascade" and js.cascade_llm == "local")


def processes(settings: Settings) -> int:
    """``kafka.processes``, else one per usable core; one with the local model as the judge: its server
    already uses the cores, and each process would start one of its own."""
    if settings.kafka.processes is not None:
        return settings.kafka.processes
    return 1 if local_model(settings) else usable_cores()


def judging_processes(settings: Settings) -> int:
    """Processes of a worker (``processes``); one for the staged topology, whose stages are separate agents
    of one process. With more than one, all but the first judge (``streams.processes``)."""
    return 1 if settings.kafka.topology != "fused" else processes(settings)
