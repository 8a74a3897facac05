"""`groundwatch erase --interaction ID | --conversation ID | --pseudonym TOKEN`: delete one person's rows
from every ClickHouse table that holds interactions' rows, and record the erasure
(``streams.clickhouse.erase``)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from groundwatch.store_access import add_clickhouse_argument
from pipeline.privacy.mask import PSEUDONYM
from schemas.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--interaction", metavar="ID", help="one interaction's rows")
    which.add_argument("--conversation", metavar="ID", help="every interaction of one conversation")
    which.add_argument(
        "--pseudonym",
        metavar="TOKEN",
        help="every interaction holding this keyed pseudonym, e.g. <EMAIL_3f9a0c2d1b7e> "
        "(privacy.mode all with privacy.pseudonym_key)",
    )
    parser.add_argument("--json", action="store_true", help="print the erasure as JSON")
    add_clickhouse_argument(parser)


def target(args: argparse.Namespace) -> tuple[str, str]:
    """(kind, value) of the erasure asked for; ConfigError (one line, exit 2) when it is malformed."""
    if args.pseudonym is not None:
        match = PSEUDONYM.match(args.pseudonym.strip())
        if match is None:
            raise ConfigError(
                f"--pseudonym {args.pseudonym!r} is not a keyed pseudonym (like <EMAIL_3f9a0c2d1b7e>: "
                "an entity name, _, 12 hex digits)"
            )
        return "pseudonym", f"<{match.group(1)}>"
    kind, value = (
        ("interaction", args.interaction)
        if args.interaction is not None
        else ("conversation", args.conversation)
    )
    if not value.strip():
        raise ConfigError(f"--{kind} is empty")
    return kind, value


def run(args: argparse.Namespace) -> int:
    from groundwatch.store_access import open_store, read_failed, settings_with_clickhouse
    from streams.clickhouse.erase import erase

    kind, value = target(args)
    settings = settings_with_clickhouse(args.clickhouse)
    store = open_store(settings, migrate=True)  # the erasures table may be new
    try:
        done = erase(store, kind, value, datetime.now(UTC), settings.clickhouse.cluster)  # type: ignore[arg-type]
    except Exception as exc:
        raise read_failed(settings, exc) from None
    finally:
        store.close()
    if args.json:
        print(
            json.dumps(
                {
                    "kind": kind,
                    "target": value,
                    "interaction_ids": done.interaction_ids,
                    "rows": done.rows,
                    "total_rows": done.total_rows,
                    "erasure_id": done.erasure_id,
                }
            )
        )
    else:
        tables = ", ".join(f"{t} {n}" for t, n in done.rows.items() if n) or "no rows"
        count = len(done.interaction_ids)
        print(f"erased {kind} {value}: {count} interactions, {done.total_rows} rows ({tables})")
    return 0
