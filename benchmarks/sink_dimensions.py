"""Write throughput of the evaluation sink with dimensions against without, in one run.

    python benchmarks/sink_dimensions.py [--rows 20000] [--rounds 2] [--workdir DIR] [--json OUT]

Two ``ClickHouseStore``s on one embedded chDB path (one engine per process), each with its own database
(migrations applied by ``open_sync``), each behind an ``EvaluationSink`` with the default settings
(``clickhouse.batch_rows`` 500):

- **with**: the product as shipped: every row's dimensions extracted (``dimensions.paths`` =
  prompt_version, locale, customer, and the three built-ins) and passed through the cardinality guard
  (``dimensions.max_values_per_day``, default 100: the 5,000 customers become ``(other)`` past 100 a day),
  whose memory of a day is read back from the table the first time it meets the day;
- **without**: the same rows written with an empty dimensions map (no extraction, no guard): what a row
  cost before the dimensions existed, but for an empty Map column.

The rows are realistic Evaluations (question, one context passage, answer, a judged statement, the
interaction's metadata: ``prompt_version`` of 5 values, ``locale`` of 50, ``customer`` of 5,000, drawn
uniformly) over two UTC days, each with its own id. After one untimed batch each (the first insert into
a table), the sinks take the same rows, a batch at a time, alternating which goes first, so both see the
same load; ``--rounds`` passes over fresh ids.
Figures: rows per second of each sink (rows / time of its ``add`` calls, which include every flush:
``current_rows`` and the insert), the median batch of each, the median over the back-to-back pairs of
a batch's time with dimensions / without (the figure least moved by other processes' load), the time
the dimensions' extraction and guard took (part of "with"),
and the compressed bytes per row of the ``dimensions`` column as the guard stored them (after ``OPTIMIZE
TABLE ... FINAL``: small parts are compact and keep no per-column sizes).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine, write_json  # noqa: E402
from schemas.evaluation import Evaluation  # noqa: E402
from schemas.interaction import Interaction  # noqa: E402
from schemas.results import HypothesisResult, PairResult, StatementVerdict  # noqa: E402
from schemas.settings import ClickHouseSettings, DimensionSettings  # noqa: E402
from streams.clickhouse.sink import EvaluationSink  # noqa: E402
from streams.clickhouse.store import ClickHouseStore  # noqa: E402

DIMENSIONS = (("prompt_version", 5), ("locale", 50), ("customer", 5000))
START = datetime(2026, 11, 1, tzinfo=UTC)


class NoDimensions:
    """The "without" store's dimension writer: an empty map for every row."""

    def rows(self, evaluations: Sequence[Evaluation]) -> list[dict[str, str]]:
        return [{} for _ in evaluations]


class TimedDimensions:
    """Wraps the shipped DimensionWriter to add up the time its extraction and guard take."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    def rows(self, evaluations: Sequence[Evaluation]) -> list[dict[str, str]]:
        started = time.perf_counter()
        out: list[dict[str, str]] = self.inner.rows(evaluations)
        self.seconds += time.perf_counter() - started
        return out


def evaluations(n: int, round_: int, seed: int = 3) -> list[Evaluation]:
    rng = random.Random(seed + round_)
    span = 2 * 86_400
    out = []
    for i in range(n):
        at = START + timedelta(seconds=span * i / n)
        iid = f"r{round_}-i{i}"  # round -1: the warm-up
        bad = rng.random() < 0.15
        metadata = {name: f"{name}-{rng.randrange(size)}" for name, size in DIMENSIONS}
        interaction = Interaction(
            interaction_id=iid, timestamp=at, app="support-bot", model="gpt-4o-mini", metadata=metadata,
            question="How do I reset the password of my account when the recovery e-mail never arrives?",
            contexts=[{
                "text": "If the recovery e-mail does not arrive within ten minutes, check the spam folder, "
                "then ask support to verify the address on file.",
                "document": "help/account-recovery.md",
            }],
            answer="Check your spam folder first; if the e-mail is not there after ten minutes, contact "
            "support so they can verify the address on your account.",
        )  # fmt: skip
        statement = StatementVerdict(
            statement="Contact support after ten minutes.", verdict="contradicted" if bad else "entailed",
            reason="the passage says so", tag="claim", score=0.1 if bad else 0.95,
        )  # fmt: skip
        out.append(
            Evaluation(
                interaction_id=iid, timestamp=at, evaluated_at=at, app="support-bot",
                model="gpt-4o-mini", judge="lexical",
                context_entailment=statement.score, hallucination=bad, answer_refusal=False,
                grounded_precision=statement.score, input_tokens=600, output_tokens=70, cost_usd=0.0001,
                pairs=[PairResult(pair="context_answer", score=statement.score, hypotheses=[
                    HypothesisResult(hypothesis=statement.statement, statements=[statement],
                                     score=statement.score)])],
                interaction=interaction,
            )
        )  # fmt: skip
    return out


async def run(path: Path, rows: int, rounds: int) -> dict[str, Any]:
    dims = DimensionSettings(paths=[name for name, _ in DIMENSIONS])
    url = f"chdb://{path}"
    with_store = ClickHouseStore.open_sync(ClickHouseSettings(url=url, database="gw_with"), dimensions=dims)
    without_store = ClickHouseStore.open_sync(ClickHouseSettings(url=url, database="gw_without"))
    timed = TimedDimensions(with_store.dimensions)
    with_store.dimensions = timed  # type: ignore[assignment]
    without_store.dimensions = NoDimensions()  # type: ignore[assignment]
    settings = ClickHouseSettings(url=url)
    sinks = {"with": EvaluationSink(settings, with_store), "without": EvaluationSink(settings, without_store)}
    spent = {"with": 0.0, "without": 0.0}
    written = {"with": 0, "without": 0}
    batches: dict[str, list[float]] = {"with": [], "without": []}  # seconds per batch, pair by pair
    batch = settings.batch_rows
    for sink in sinks.values():  # warm-up, not timed: the first insert into each table
        for e in evaluations(batch, -1):
            await sink.add(e)
        await sink.flush()
    for r in range(rounds):
        data = evaluations(rows, r)
        for lo in range(0, rows, batch):
            part = data[lo : lo + batch]
            order = ("with", "without") if (lo // batch) % 2 == 0 else ("without", "with")
            for name in order:
                started = time.perf_counter()
                for e in part:
                    await sinks[name].add(e)
                await sinks[name].flush()
                took = time.perf_counter() - started
                spent[name] += took
                batches[name].append(took)
                written[name] += len(part)
        print(
            f"round {r + 1}/{rounds}: with {written['with'] / spent['with']:.0f} rows/s, "
            f"without {written['without'] / spent['without']:.0f} rows/s so far",
            flush=True,
        )
    # small parts are "compact" (no per-column sizes): merge into one part before reading the column's size
    with_store.client.command("OPTIMIZE TABLE gw_with.evaluations FINAL")
    stored = with_store.query_sync(
        "SELECT sum(column_data_compressed_bytes) AS c, sum(column_data_uncompressed_bytes) AS u "
        "FROM system.parts_columns WHERE database = 'gw_with' AND table = 'evaluations' "
        "AND column = 'dimensions' AND active"
    )[0]
    counts = {
        name: store.query_sync(f"SELECT count() AS n FROM {store.db}.evaluations FINAL")[0]["n"]
        for name, store in (("with", with_store), ("without", without_store))
    }
    distinct = with_store.query_sync(
        "SELECT name, uniqExact(value) AS values FROM gw_with.evaluations "
        "ARRAY JOIN mapKeys(dimensions) AS name, mapValues(dimensions) AS value GROUP BY name ORDER BY name"
    )
    n = int(counts["with"])
    return {
        "rows_per_round": rows, "rounds": rounds, "batch_rows": batch,
        "rows_per_second": {k: written[k] / spent[k] for k in spent},
        "median_batch_rows_per_second": {k: batch / statistics.median(v) for k, v in batches.items()},
        "median_pair_ratio": statistics.median(
            w / o for w, o in zip(batches["with"], batches["without"], strict=True)
        ),
        "batch_seconds": batches,
        "seconds": spent, "rows_written": written, "rows_stored": counts,
        "dimension_extract_and_guard_s": timed.seconds,
        "dimensions_compressed_bytes_per_row": int(stored["c"] or 0) / n if n else 0.0,
        "dimensions_uncompressed_bytes_per_row": int(stored["u"] or 0) / n if n else 0.0,
        "distinct_values": {str(d["name"]): int(d["values"]) for d in distinct},
        "guard_others": timed.inner.guard.others,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000, help="evaluations per round (each sink)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--workdir", type=Path, help="where the chDB path goes (default build/bench/sink_dimensions)"
    )
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    workdir = (args.workdir or REPO / "build" / "bench" / "sink_dimensions").resolve()
    path = workdir / "chdb"
    if path.exists():
        ap.error(f"{path} exists: pass another --workdir")
    workdir.mkdir(parents=True, exist_ok=True)
    report = asyncio.run(run(path, args.rows, args.rounds))
    machine.finish()
    report["machine"] = machine.as_dict()
    rate = report["rows_per_second"]
    print()
    print("| sink | rows | seconds | rows/s |\n|---|---|---|---|")
    for name in ("with", "without"):
        print(
            f"| {name} dimensions | {report['rows_written'][name]} | {report['seconds'][name]:.1f} | "
            f"{rate[name]:.0f} |"
        )
    med = report["median_batch_rows_per_second"]
    print(
        f"\nmedian batch: with {med['with']:.0f} rows/s, without {med['without']:.0f} rows/s; median "
        f"over the {len(report['batch_seconds']['with'])} back-to-back pairs of a batch's time "
        f"with / without: "
        f"{report['median_pair_ratio']:.3f}"
    )
    print(
        f"with / without (totals): {rate['with'] / rate['without']:.3f}; extraction and guard "
        f"{report['dimension_extract_and_guard_s']:.2f} s of the {report['seconds']['with']:.1f} s; "
        f"dimensions column {report['dimensions_compressed_bytes_per_row']:.2f} bytes per row compressed "
        f"({report['dimensions_uncompressed_bytes_per_row']:.1f} uncompressed); distinct values stored "
        f"{report['distinct_values']}; {report['guard_others']} values stored as (other)"
    )
    print(machine.describe())
    write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
