"""Profile a worker under the instant-judge stream benchmark with py-spy and name the top costs.

    pip install py-spy   # not a project dependency
    python benchmarks/profile_stream.py [--count 4000] [--seconds 25] [--judge openai|lexical]
        [--out build/bench/profile.txt] [--env GROUNDWATCH_X=Y ...]
    python benchmarks/profile_stream.py --analyse build/bench/profile.txt   # an earlier capture

Runs benchmarks/stream_throughput.py's backlog run (fake judge answering at once) with py-spy recording
the worker (``--format raw``: collapsed stacks, 50 samples a second, ``--nonblocking``) for ``--seconds``,
then prints: the share of samples by area (judge client and the openai SDK, HTTP, JSON schema,
Kafka client, faust, pydantic decode/encode, sentence splitting, ClickHouse, logging, ...), and the
functions with the most inclusive and self samples in groundwatch's own code and overall.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine  # noqa: E402
from benchmarks.stream_throughput import report  # noqa: E402
from benchmarks.streamkit import DEFAULT_DATA, RunConfig, figures, run  # noqa: E402

# first match wins, tested against the whole stack (outermost first) from the innermost frame out
AREAS: list[tuple[str, tuple[str, ...]]] = [
    ("logging", ("logging/__init__.py", "mode/utils/logging.py")),
    ("JSON schema of the answer model", ("json_schema (prompts", "pydantic/json_schema.py")),
    ("openai SDK request building (transform)", ("openai/_utils/_transform.py",)),
    ("HTTP (httpx/httpcore/anyio)", ("httpx", "httpcore", "anyio/")),
    ("openai SDK other (response parsing, client)", ("openai/",)),
    ("judge client / LLM judge (ours)", ("pipeline/llm/", "pipeline/judges/llm_judge.py")),
    ("lexical judge", ("pipeline/judges/lexical.py", "pipeline/text_normalise.py")),
    ("sentence splitting (nltk punkt)", ("pipeline/sentences.py", "nltk/")),
    ("ClickHouse (chDB insert/query)", ("streams/clickhouse/", "clickhouse_connect", "chdb")),
    ("pydantic decode/encode at stream boundaries", ("streams/codec.py",)),
    ("Kafka client (aiokafka)", ("aiokafka/",)),
    ("faust runtime", ("faust/", "mode/")),
    ("pipeline other", ("pipeline/",)),
    ("streams other", ("streams/",)),
]


def read_raw(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        frames, _, count = line.rpartition(" ")
        try:
            n = int(count)
        except ValueError:
            continue
        stacks.append((frames.split(";"), n))
    return stacks


def area_of(frames: list[str]) -> str:
    for frame in reversed(frames):  # innermost first: the first frame of a known area decides
        for name, keys in AREAS:
            if any(k in frame for k in keys):
                return name
    if (frames and "asyncio" in frames[-1]) or any("selectors.py" in f for f in frames[-2:]):
        return "asyncio event loop / idle"
    return "other"


def analyse(path: Path, top: int = 25) -> str:
    stacks = read_raw(path)
    total = sum(n for _, n in stacks)
    main = [(f, n) for f, n in stacks if any("worker_cmd.py" in x for x in f)]
    main_total = sum(n for _, n in main)
    out = [
        f"profile {path}: {total} samples, {main_total} in the worker's main thread (event loop); "
        f"the rest in faust's consumer thread and chDB/asyncio worker threads"
    ]
    areas: collections.Counter[str] = collections.Counter()
    for frames, n in stacks:
        areas[area_of(frames)] += n
    out.append("\nshare of all samples by area:")
    for name, n in areas.most_common():
        out.append(f"  {100 * n / total:5.1f}%  {name}")
    inclusive: collections.Counter[str] = collections.Counter()
    self_: collections.Counter[str] = collections.Counter()
    for frames, n in stacks:
        for f in set(frames):
            inclusive[f] += n
        if frames:
            self_[frames[-1]] += n
    ours = ("pipeline/", "streams/", "prompts/", "schemas/")
    out.append(f"\ntop {top} of groundwatch's functions by inclusive samples:")
    for f, n in [(f, n) for f, n in inclusive.most_common() if any(k in f for k in ours)][:top]:
        out.append(f"  {100 * n / total:5.1f}%  {f[:150]}")
    out.append(f"\ntop {top} functions by self samples:")
    for f, n in self_.most_common(top):
        out.append(f"  {100 * n / total:5.1f}%  {f[:150]}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--analyse", type=Path, help="only analyse this raw py-spy capture")
    ap.add_argument("--judge", choices=["openai", "lexical"], default="openai")
    ap.add_argument("--count", type=int, default=4000)
    ap.add_argument("--seconds", type=float, default=25.0)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=REPO / "build" / "bench" / "profile.txt")
    ap.add_argument("--env", action="append", default=[], help="extra GROUNDWATCH_X=Y for the worker")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    if args.analyse:
        print(analyse(args.analyse, args.top))
        return 0
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    cfg = RunConfig(
        workdir=args.out.parent / f"profile-{args.out.stem}",
        judge=args.judge,
        count=args.count,
        data=args.data,
        extra_env=dict(e.split("=", 1) for e in args.env),
        profile=str(args.out),
        profile_seconds=args.seconds,
    )
    result = run(cfg, machine, log=lambda s: print(s, flush=True))
    machine.finish()
    print("\n".join(report(figures(result), cfg)))
    print()
    print(analyse(args.out, args.top))
    print()
    print(machine.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
