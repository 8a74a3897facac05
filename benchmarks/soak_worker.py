"""`groundwatch worker` with memory probes inside the process, for benchmarks/soak.py.

    python benchmarks/soak_worker.py --probe-file F [--interval 10] [--snapshot-dir D --tracemalloc 4]
        -- --loglevel info

Runs the worker exactly as ``python -m groundwatch.commands.worker_cmd`` does (same CLI, same signals),
plus a daemon thread that appends one JSON line to ``--probe-file`` every ``--interval`` seconds: the
process's RSS (with its anonymous and file-backed parts), glibc malloc's bytes in use (``mallinfo2``),
the count of objects Python's GC tracks, the Python heap traced since tracing started, and what the
embedded chDB says it holds (``MemoryTracking`` of ``system.metrics``, queried through the worker's own
store: chDB allows one engine per process), what its jemalloc has allocated (``system.jemalloc_bins``)
and its active parts. Requests arrive as files in ``--snapshot-dir``:
``start.request`` starts tracemalloc (``--tracemalloc`` frames a traceback), ``NAME.request`` dumps a
snapshot as ``NAME.pickle``. Tracing from the end of the warm-up only, a snapshot at the end holds just
the Python allocations made after the warm-up that are still alive: the growth. Tracing slows the
worker, so the slope to report comes from a run without it.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost",
    )]  # fmt: skip


def malloc_in_use_mb() -> float | None:
    """glibc's bytes in use (small allocations in arenas + mmap'ed big ones), MB; None without glibc 2.33."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    info = fn()
    return (info.uordblks + info.hblkhd) / 1e6


def rss_mb() -> dict[str, float]:
    """VmRSS and its parts: RssAnon (heaps: Python's, glibc's, chDB's own allocator) and RssFile (pages of
    mapped files: the chDB library's code among them, paged in as new code paths run)."""
    out: dict[str, float] = {}
    names = {"VmRSS:": "rss_mb", "RssAnon:": "rss_anon_mb", "RssFile:": "rss_file_mb"}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key = line.split(maxsplit=1)[0] if line else ""
            if key in names:
                out[names[key]] = int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return out


class Probe(threading.Thread):
    def __init__(self, out: Path, interval_s: float, snapshot_dir: Path | None, frames: int) -> None:
        super().__init__(daemon=True, name="soak-probe")
        self.frames = frames
        self.out = out
        self.interval_s = interval_s
        self.snapshot_dir = snapshot_dir
        self.t0 = time.monotonic()
        self.store: Any = None

    def find_store(self) -> Any:
        if self.store is None:
            from streams.clickhouse.store import ClickHouseStore

            self.store = next((o for o in gc.get_objects() if isinstance(o, ClickHouseStore)), None)
        return self.store

    def chdb(self) -> dict[str, float]:
        store = self.find_store()
        if store is None:
            return {}
        try:
            mem = store.query_sync("SELECT value FROM system.metrics WHERE metric = 'MemoryTracking'")
            parts = store.query_sync(
                "SELECT count() AS n, sum(bytes_on_disk) AS b FROM system.parts WHERE active "
                "AND database = {db:String}",
                {"db": store.db},
            )
            bins = store.query_sync(
                "SELECT sum(size * (allocations - deallocations)) AS b FROM system.jemalloc_bins"
            )
            return {
                "chdb_jemalloc_mb": int(bins[0]["b"] or 0) / 1e6 if bins else -1.0,
                "chdb_tracked_mb": int(mem[0]["value"]) / 1e6 if mem else -1.0,
                "chdb_active_parts": int(parts[0]["n"]),
                "chdb_parts_mb": int(parts[0]["b"] or 0) / 1e6,
            }
        except Exception as exc:  # the engine is closing: keep probing the rest
            return {"chdb_error": str(exc)[:200]}  # type: ignore[dict-item]

    def sample(self) -> dict[str, Any]:
        row: dict[str, Any] = {"t": time.time(), **rss_mb(), "malloc_mb": malloc_in_use_mb()}
        if tracemalloc.is_tracing():
            row["python_traced_mb"] = tracemalloc.get_traced_memory()[0] / 1e6
        row["gc_objects"] = len(gc.get_objects())
        row.update(self.chdb())
        return row

    def snapshots(self) -> None:
        if self.snapshot_dir is None:
            return
        for request in sorted(self.snapshot_dir.glob("*.request")):
            request.unlink()
            if request.stem == "start":  # trace from now on: what a later snapshot holds was allocated since
                tracemalloc.start(self.frames)
            elif tracemalloc.is_tracing():
                self.snapshot(self.snapshot_dir / (request.stem + ".pickle"))

    def snapshot(self, path: Path) -> None:
        snap = tracemalloc.take_snapshot().filter_traces([
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
        ])  # fmt: skip
        snap.dump(str(path))

    def run(self) -> None:
        while True:
            elapsed = time.monotonic() - self.t0
            self.snapshots()
            row = self.sample()
            row["elapsed_s"] = round(elapsed, 1)
            with self.out.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
            time.sleep(self.interval_s)


def main() -> int:
    argv = sys.argv[1:]
    worker_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--probe-file", type=Path, required=True)
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--tracemalloc", type=int, default=1, help="frames per traceback once tracing starts")
    ap.add_argument("--snapshot-dir", type=Path)
    args = ap.parse_args(own)
    Probe(args.probe_file, args.interval, args.snapshot_dir, max(1, args.tracemalloc)).start()
    from groundwatch.cli import main as cli_main

    return cli_main(["worker", *worker_args])


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
