"""What a benchmark ran on: CPU, load, a competing llama.cpp server, versions; RSS of a process.

Every benchmark prints ``Machine.start()`` before its figures and ``machine.finish()`` after them, so a
figure is never read without the contention it was measured under.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def write_json(path: Path | None, figures: Any) -> None:
    """A benchmark's figures as JSON at ``path`` (its ``--json``), when given: indented, with what JSON
    has no type for (a datetime, a path) as its text."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"figures written to {path}")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def loadavg() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:
        return (-1.0, -1.0, -1.0)


def llama_servers() -> list[int]:
    """PIDs of running ``llama_cpp.server`` processes (another helper's local judge competes for CPU)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"llama_cpp.server" in cmd:
            pids.append(int(entry.name))
    return sorted(pids)


def rss_mb(pid: int) -> float | None:
    """Resident set size of a process in MB (VmRSS), None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (and its reaped children) in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def children(pid: int) -> list[int]:
    """The live descendants of a process (its worker processes, pools), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [p for p, pp in parents.items() if pp == parent]
        found.extend(kids)
        frontier.extend(kids)
    return found


def tree_cpu_seconds(pid: int) -> float | None:
    """CPU time of a process and every live descendant (and the children they reaped): what a worker
    costs when it runs processes of its own."""
    own = cpu_seconds(pid)
    if own is None:
        return None
    return own + sum(cpu_seconds(p) or 0.0 for p in children(pid))


def tree_rss_mb(pid: int) -> float | None:
    """Resident set size of a process and every live descendant, summed (pages they share count in each):
    what a worker holds when it runs processes of its own; None when the process is gone."""
    own = rss_mb(pid)
    if own is None:
        return None
    return own + sum(rss_mb(p) or 0.0 for p in children(pid))


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "-"


@dataclass
class Machine:
    cpus: int
    cpu_model: str
    python: str
    versions: dict[str, str]
    commit: str
    started_at: str
    load_start: tuple[float, float, float]
    llama_start: list[int]
    load_end: tuple[float, float, float] | None = None
    llama_end: list[int] | None = None
    llama_seen: bool = False  # a llama.cpp server was running at start, at end or at any sample
    samples: list[tuple[float, float, bool]] = field(default_factory=list)  # (t, load1, llama running)

    @classmethod
    def start(cls) -> Machine:
        llama = llama_servers()
        return cls(
            cpus=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0),
            cpu_model=cpu_model(),
            python=sys.version.split()[0],
            versions={
                d: _version(d)
                for d in ("faust-streaming", "aiokafka", "clickhouse-connect", "chdb", "openai", "pydantic")
            },
            commit=git_commit(),
            started_at=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            load_start=loadavg(),
            llama_start=llama,
            llama_seen=bool(llama),
        )

    def sample(self) -> None:
        """Record the load and whether llama.cpp runs now (call now and then during a long run)."""
        running = bool(llama_servers())
        self.llama_seen = self.llama_seen or running
        self.samples.append((time.time(), loadavg()[0], running))

    def finish(self) -> Machine:
        self.load_end = loadavg()
        self.llama_end = llama_servers()
        self.llama_seen = self.llama_seen or bool(self.llama_end)
        return self

    def contended(self) -> bool:
        loads = [self.load_start[0], *(s[1] for s in self.samples)]
        if self.load_end is not None:
            loads.append(self.load_end[0])
        return self.llama_seen or max(loads) > self.cpus * 0.5

    def describe_start(self) -> str:
        la = " ".join(f"{x:.2f}" for x in self.load_start)
        return (
            f"machine: {self.cpus} CPUs ({self.cpu_model}), Python {self.python}, commit {self.commit}\n"
            f"started {self.started_at}; load average at start {la}; llama.cpp server running: "
            + (f"yes {self.llama_start}" if self.llama_start else "no")
        )

    def describe(self) -> str:
        def la(v: tuple[float, float, float] | None) -> str:
            return "-" if v is None else " ".join(f"{x:.2f}" for x in v)

        start = f"yes {self.llama_start}" if self.llama_start else "no"
        end = f"yes {self.llama_end}" if self.llama_end else "no"
        lines = [
            f"machine: {self.cpus} CPUs ({self.cpu_model}), Python {self.python}, commit {self.commit}",
            "versions: " + ", ".join(f"{k} {v}" for k, v in self.versions.items()),
            f"started {self.started_at}; load average (1/5/15 min) at start {la(self.load_start)}, "
            f"at end {la(self.load_end)}",
            f"llama.cpp server running: at start {start}, at end {end}"
            + (
                f", during the run in {sum(s[2] for s in self.samples)} of {len(self.samples)} samples"
                if self.samples
                else ""
            ),
        ]
        if self.samples:
            loads = [s[1] for s in self.samples]
            lines.append(f"load average (1 min) during the run: min {min(loads):.2f}, max {max(loads):.2f}")
        lines.append("CPU contention: " + ("YES (figures are lower bounds)" if self.contended() else "no"))
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["contended"] = self.contended()
        d.pop("samples")
        return d
