"""`groundwatch topics INPUT.jsonl --out topics.json`: the topics of a file's questions (docs/topics.md).

Each valid line's question (a conversation's last user turn), as storage would see it (``privacy.mode``
all masks it first), is embedded (``pipeline.embeddings``, the ``embeddings`` extra) and grouped by
``GROUNDWATCH_TOPICS__*`` (``pipeline.topic_discovery``). The topic model is written to ``--out``; with
``--from`` an earlier model, the topics that match its topics keep their ids. Prints each topic with its
id, name and share of the questions; the lines that are not valid interactions are counted and named.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from groundwatch.commands.files import input_file, output_file
from pipeline.dataset import read_dataset
from pipeline.embeddings import TextEncoder
from pipeline.privacy.mask import PrivacyGuard
from pipeline.topic_discovery import assign, fit_topics
from schemas.errors import ConfigError
from schemas.settings import Settings
from schemas.topic_model import OTHER, TopicModel


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", type=Path, help="interactions JSONL (the eval format)")
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


def run(args: argparse.Namespace) -> int:
    input_file(args.input)
    output_file(args.out, "--out", args.input)
    earlier = previous_model(args.previous)
    settings = Settings()
    dataset = read_dataset(args.input, settings.limits)
    if not dataset.lines:
        raise ConfigError(f"{args.input} holds no valid interaction ({len(dataset.errors)} bad lines)")
    privacy = PrivacyGuard(settings.privacy)
    texts = [privacy.for_storage(line.interaction).question for line in dataset.lines]
    encoder = TextEncoder()
    encoder.require()
    vectors = encoder.encode(texts)
    model = fit_topics(texts, vectors, settings.topics, datetime.now(UTC), earlier)
    counts = Counter(a.topic for a in assign(model, vectors))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(model.model_dump_json(indent=1) + "\n", encoding="utf-8")
    print("\n".join(table(model, counts)), file=sys.stderr)
    for error in dataset.errors[:5]:
        print(f"  line {error.line}: {error.reason}", file=sys.stderr)
    if len(dataset.errors) > 5:
        print(f"  ... {len(dataset.errors) - 5} more bad lines", file=sys.stderr)
    print(json.dumps({"topics": str(args.out), "questions": len(texts), "bad_lines": len(dataset.errors)}))
    return 0
