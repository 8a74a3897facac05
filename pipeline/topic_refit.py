"""A refit of the topics in a child process: ``refit`` embeds the questions and fits them
(``pipeline.topic_discovery.discover``) from the current model, so matching topics keep their ids, in a
process of its own (pebble, ``spawn``), killed once it has run ``topics.refit_timeout_seconds``. The
embedding of tens of thousands of questions is minutes of CPU: it never runs in the caller's process, and
the child's memory (torch, the encoder, scikit-learn) goes with it."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Sequence
from datetime import datetime

import pebble

from pipeline.child_process import die_with_parent
from schemas.errors import GroundwatchError
from schemas.settings import TopicsSettings
from schemas.topic_model import TopicModel


class RefitFailed(GroundwatchError):
    """A refit that did not give a model: it raised, ran past its timeout, or its process died."""


def _fit(texts: list[str], settings: str, previous: str | None, fitted_at: datetime) -> str:
    """In the child: the refit model as JSON (only plain values cross between the processes)."""
    from pipeline.embeddings import TextEncoder
    from pipeline.topic_discovery import discover

    earlier = TopicModel.model_validate_json(previous) if previous is not None else None
    model, _ = discover(
        texts, TextEncoder(), TopicsSettings.model_validate_json(settings), fitted_at, earlier
    )
    return model.model_dump_json()


async def refit(
    texts: Sequence[str], settings: TopicsSettings, previous: TopicModel | None, fitted_at: datetime
) -> TopicModel:
    """The topics of ``texts`` from ``previous`` (a first fit without one), fitted in a child process;
    RefitFailed says why there is none. A cancellation kills the child."""
    pool = pebble.ProcessPool(
        max_workers=1, initializer=die_with_parent, context=multiprocessing.get_context("spawn")
    )
    try:
        future = pool.schedule(
            _fit,
            args=(list(texts), settings.model_dump_json(), previous.model_dump_json() if previous else None,
                  fitted_at),
            timeout=settings.refit_timeout_seconds,
        )  # fmt: skip
        try:
            found: str = await asyncio.wrap_future(future)
            return TopicModel.model_validate_json(found)
        except TimeoutError:
            raise RefitFailed(f"still running after {settings.refit_timeout_seconds:g} s") from None
        except pebble.ProcessExpired as exc:
            raise RefitFailed(f"its process died (exit code {exc.exitcode})") from None
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            raise RefitFailed(f"{type(exc).__name__}: {exc}") from exc
    finally:
        pool.stop()
        await asyncio.to_thread(pool.join, 5)
