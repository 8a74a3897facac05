"""`groundwatch labels import FILE`: people's labels from a JSONL file into ClickHouse ``labels``.

The file is the one ``groundwatch eval`` reads (``interaction_id``/``id`` and ``labels``). Every line is
checked first; a file with any bad line imports nothing (each bad line is named). With an embedded chDB
held by a running worker, stop it first or send the labels as ``Label`` JSON to ``<prefix>labels``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

from groundwatch.commands.files import input_file
from groundwatch.store_access import add_clickhouse_argument
from schemas.errors import ConfigError
from schemas.label import LabelSource


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1], got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1], got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="labels_command", required=True)
    imp = sub.add_parser("import", help="import the labels of a JSONL file (the eval format)")
    imp.add_argument("file", type=Path, help="JSONL: interaction_id (or id) and labels per line")
    imp.add_argument("--reviewer", default="import", help="who the labels are recorded as (default: import)")
    imp.add_argument(
        "--source",
        choices=[s.value for s in LabelSource],
        default=LabelSource.IMPORT.value,
        help="where the labels come from (default: import)",
    )
    imp.add_argument(
        "--sample",
        type=_rate,
        help="import only this share of the interactions, drawn by a stable hash of the id, and "
        "record it as their inclusion probability (e.g. 0.1)",
    )
    add_clickhouse_argument(imp)


def run(args: argparse.Namespace) -> int:
    from groundwatch.labels_file import read_labels_file
    from groundwatch.store_access import open_store, settings_with_clickhouse
    from streams.clickhouse.labels import LabelStore

    input_file(args.file)
    settings = settings_with_clickhouse(args.clickhouse)  # the evaluators file's label kinds installed
    parsed = read_labels_file(
        args.file,
        reviewer=args.reviewer,
        source=LabelSource(args.source),
        labeled_at=datetime.now(UTC),
        sample=args.sample,
    )
    if parsed.errors:
        for error in parsed.errors[:20]:
            print(f"{args.file}: {error}", file=sys.stderr)
        more = " (first 20 shown)" if len(parsed.errors) > 20 else ""
        raise ConfigError(f"{args.file}: {len(parsed.errors)} bad lines{more}; nothing imported")
    labels = parsed.labels
    if settings.privacy.mode == "all" and any(label.note for label in labels):
        from pipeline.privacy.mask import PrivacyGuard

        guard = PrivacyGuard(settings.privacy)  # the notes masked, as the worker masks what it stores
        labels = [guard.label_for_storage(label) for label in labels]
    store = open_store(settings, migrate=True)
    try:
        asyncio.run(LabelStore(store).insert(labels))
    finally:
        store.close()
    interactions = len({label.interaction_id for label in parsed.labels})
    extra = []
    if args.sample is not None:
        extra.append(f"{parsed.not_drawn} left out by the {args.sample:g} sample")
    if parsed.unlabeled:
        extra.append(f"{parsed.unlabeled} lines without labels of a known kind")
    if parsed.ignored_keys:
        keys = ", ".join(f"{k} ({n})" for k, n in sorted(parsed.ignored_keys.items()))
        extra.append(f"not label kinds, left out: {keys}")
    tail = f"; {'; '.join(extra)}" if extra else ""
    print(
        f"{args.file}: {len(parsed.labels)} labels of {interactions} interactions imported as "
        f"{args.reviewer} ({args.source}) into {store.describe()}{tail}"
    )
    return 0
