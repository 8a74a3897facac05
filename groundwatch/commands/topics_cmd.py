"""`groundwatch topics INPUT.jsonl --out topics.json`: the topics of a file's questions (docs/topics.md);
without INPUT, of the questions stored in ClickHouse (``--since``, ``--app``, ``--clickhouse``).

Each valid line's question (a conversation's last user turn), as storage would see it (``privacy.mode``
all masks it first; stored questions are as stored), is embedded (``pipeline.embeddings``, the
``embeddings`` extra) and grouped by ``GROUNDWATCH_TOPICS__*`` (``pipeline.topic_discovery``). The topic
model is written to ``--out``; with ``--from`` an earlier model, the topics that match its topics keep
their ids. Prints each topic with its id, name and share of the questions; the lines that are not valid
interactions are counted and named.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from groundwatch.commands.arg_types import positive_int
from groundwatch.commands.files import input_file, output_file
from groundwatch.store_access import add_clickhouse_argument
from pipeline.dataset import LineError, read_dataset
from pipeline.embeddings import TextEncoder
from pipeline.privacy.mask import PrivacyGuard
from pipeline.topic_discovery import discover
from schemas.errors import ConfigError
from schemas.settings import Settings
from schemas.topic_model import OTHER, TopicModel


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "input", type=Path, nargs="?", default=None,
        help="interactions JSONL (the eval format); none: the questions stored in ClickHouse",
    )  # fmt: skip
    parser.add_argument("--since", default="7d", help="without INPUT: stored since (30m, 2h, 7d, ISO time)")
    parser.add_argument("--app", default=None, help="without INPUT: only this app's questions")
    parser.add_argument(
        "--max-questions",
        type=positive_int,
        default=50_000,
        help="without INPUT: at most this many of the latest stored questions (default 50,000)",
    )
    add_clickhouse_argument(parser)
    parser.add_argument("--out", type=Path, required=True, help="the topic model JSON to write")
    parser.add_argument(
        "--from",
        dest="previous",
        type=Path,
        default=None,
        metavar="MODEL",
        help="an earlier topic model: topics that match its topics keep their ids",
    )


def previous_model(path: Path | None) -> TopicModel | None:
    """The earlier model ``--from`` names; ConfigError in one line when it is not one."""
    if path is None:
        return None
    input_file(path)
    try:
        return TopicModel.model_validate_json(path.read_bytes())
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise ConfigError(f"--from {path} is not a topic model: {first}") from None


def table(model: TopicModel, counts: Counter[str]) -> list[str]:
    """The printed topics, largest first, then 'other'."""
    total = max(sum(counts.values()), 1)
    lines = [
        f"{model.questions} questions, {len(model.topics)} topics (model v{model.version}, {model.method})"
    ]
    for topic in sorted(model.topics, key=lambda t: -counts[t.id]):
        lines.append(
            f"  {topic.id:>5}  {counts[topic.id]:>6}  {counts[topic.id] / total:6.1%}  {topic.label}"
        )
    lines.append(f"  {OTHER:>5}  {counts[OTHER]:>6}  {counts[OTHER] / total:6.1%}  (in no topic)")
    return lines


def file_questions(path: Path, settings: Settings) -> tuple[list[str], list[LineError]]:
    """The questions of a file's valid lines as storage would see them, and its bad lines."""
    input_file(path)
    dataset = read_dataset(path, settings.limits)
    if not dataset.lines:
        raise ConfigError(f"{path} holds no valid interaction ({len(dataset.errors)} bad lines)")
    privacy = PrivacyGuard(settings.privacy)
    return [privacy.for_storage(line.interaction).question for line in dataset.lines], dataset.errors


def store_questions(args: argparse.Namespace) -> tuple[list[str], Settings]:
    """The questions stored in the range ``--since`` (of ``--app``), the latest ``--max-questions``."""
    from groundwatch.store_access import open_store, read_failed, settings_with_clickhouse
    from groundwatch.trend_report import since_range
    from streams.clickhouse.questions import stored_questions

    start, end = since_range(args.since)
    settings = settings_with_clickhouse(args.clickhouse)
    store = open_store(settings, migrate=False)
    try:
        texts = stored_questions(store, start, end, args.app, args.max_questions)
    except Exception as exc:
        raise read_failed(settings, exc) from None
    finally:
        store.close()
    if not texts:
        raise ConfigError(f"no stored question since {start.isoformat()} in {store.describe()}")
    return texts, settings


def run(args: argparse.Namespace) -> int:
    if args.input is not None:
        output_file(args.out, "--out", args.input)
    earlier = previous_model(args.previous)
    errors: list[LineError] = []
    if args.input is not None:
        settings = Settings()
        texts, errors = file_questions(args.input, settings)
    else:
        texts, settings = store_questions(args)
    encoder = TextEncoder()
    encoder.require()
    model, assigned = discover(texts, encoder, settings.topics, datetime.now(UTC), earlier)
    counts = Counter(a.topic for a in assigned)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(model.model_dump_json(indent=1) + "\n", encoding="utf-8")
    print("\n".join(table(model, counts)), file=sys.stderr)
    for error in errors[:5]:
        print(f"  line {error.line}: {error.reason}", file=sys.stderr)
    if len(errors) > 5:
        print(f"  ... {len(errors) - 5} more bad lines", file=sys.stderr)
    print(json.dumps({"topics": str(args.out), "questions": len(texts), "bad_lines": len(errors)}))
    return 0
