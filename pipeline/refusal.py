"""Refusal stage (docs/method.md): is the answer (and the ground truth) an answer refusal?

Each interaction contributes up to two texts: the first ``refusal_sentences`` converted sentences of
the *original* answer and of the original ground truth (when there is one), joined by a space.
Texts from all concurrent callers of one ``RefusalClassifier`` are micro-batched into prompts of
``refusal_batch_size`` texts: a batch is sent as soon as it is full, or ``refusal_linger_ms`` after
its first text arrived. Every caller gets its own flags.

Accounting of a shared call: ``pipeline.call_shares`` (each caller gets its share of the tokens and
cost; only the owner of the batch's first text keeps the call's ``attempts``).

An error of a batch (a ``JudgeError``, or any other exception, wrapped in ``JudgeError``) is raised
in every caller with a text in that batch, as is a judge returning the wrong number of flags.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.call_shares import share_calls
from pipeline.clock import Stopwatch
from pipeline.judges.base import Judge
from pipeline.refusal_phrases import may_refuse
from pipeline.sentences import first_sentences
from schemas.errors import JudgeError
from schemas.results import Converted, JudgeCall, RefusalResult
from schemas.settings import Settings


@dataclass
class _Ticket:
    """One caller's texts waiting for a batch, and where its flags and calls go."""

    count: int
    future: asyncio.Future[tuple[list[bool], list[JudgeCall]]]
    flags: list[bool] = field(default_factory=list)
    calls: list[JudgeCall] = field(default_factory=list)
    remaining: int = 0


class RefusalClassifier:
    """Classify refusals, batching the texts of concurrent callers (see the module docstring).

    One instance serves one event loop; create it inside the loop that calls ``classify``.
    """

    def __init__(self, judge: Judge, settings: Settings) -> None:
        self._judge = judge
        self._settings = settings
        self._pending: list[tuple[str, _Ticket, int]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def texts(self, converted: Converted) -> list[str]:
        """The texts classified for an interaction: answer first, then the ground truth if any. They
        come with the Converted (``refusal_texts``, from the conversion's split); a Converted written
        before it carried them (still on the topic after an upgrade) has its texts split here."""
        if converted.refusal_texts:
            return converted.refusal_texts
        interaction = converted.interaction
        count, split = self._settings.pipeline.refusal_sentences, self._settings.split
        texts = [first_sentences(interaction.answer, count, split)]
        if interaction.ground_truth is not None:
            texts.append(first_sentences(interaction.ground_truth, count, split))
        return texts

    async def classify(self, converted: Converted) -> RefusalResult:
        """A blank text is not judged: its flag is None (an empty answer says nothing, it does not refuse).
        With ``pipeline.refusal_prefilter`` a text without a refusal cue (``may_refuse``: no word of
        negation, inability, lack or uncertainty, as in a name, a number or a date) is not a refusal and
        costs no judge call."""
        watch = Stopwatch()
        texts = self.texts(converted)
        by_slot: list[bool | None] = [None] * len(texts)
        judged = []
        for i, text in enumerate(texts):
            if not text.strip():
                continue
            if self._settings.pipeline.refusal_prefilter and not may_refuse(text):
                by_slot[i] = False
            else:
                judged.append(i)
        flags, calls = await self.classify_texts([texts[i] for i in judged])
        for i, flag in zip(judged, flags, strict=True):
            by_slot[i] = flag
        return RefusalResult(
            interaction_id=converted.interaction.interaction_id,
            digest=converted.digest,
            answer_refusal=by_slot[0],
            ground_truth_refusal=by_slot[1] if len(by_slot) > 1 else None,
            calls=calls,
            seconds=watch.seconds(),
        )

    async def classify_texts(self, texts: Sequence[str]) -> tuple[list[bool], list[JudgeCall]]:
        """Flags for ``texts`` (one per text) and this caller's share of the calls."""
        if not texts:
            return [], []
        loop = asyncio.get_running_loop()
        ticket = _Ticket(count=len(texts), future=loop.create_future(), remaining=len(texts))
        ticket.flags = [False] * len(texts)
        for index, text in enumerate(texts):
            self._pending.append((text, ticket, index))
        size = self._settings.pipeline.refusal_batch_size
        while len(self._pending) >= size:
            self._send(self._pending[:size])
            del self._pending[:size]
        if self._pending and self._timer is None:
            linger = self._settings.pipeline.refusal_linger_ms / 1000.0
            self._timer = loop.call_later(linger, self._flush)
        elif not self._pending and self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return await ticket.future

    def _flush(self) -> None:
        self._timer = None
        size = self._settings.pipeline.refusal_batch_size
        while self._pending:
            self._send(self._pending[:size])
            del self._pending[:size]

    def _send(self, batch: list[tuple[str, _Ticket, int]]) -> None:
        batch = [entry for entry in batch if not entry[1].future.done()]  # a cancelled caller's texts
        if not batch:
            return
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[str, _Ticket, int]]) -> None:
        texts = [text for text, _, _ in batch]
        owners: list[_Ticket] = []
        for _, ticket, _ in batch:
            if ticket not in owners:
                owners.append(ticket)
        try:
            out = await self._judge.classify_refusals(texts)
        except asyncio.CancelledError:  # aclose(cancel=True): the callers are not left waiting
            for ticket in owners:
                if not ticket.future.done():
                    ticket.future.cancel()
            raise
        except Exception as exc:
            self._fail(owners, exc)
            return
        if len(out.value) != len(texts):
            self._fail(
                owners,
                JudgeError(
                    f"judge {self._judge.name} returned {len(out.value)} refusal flags for {len(texts)} texts"
                ),
            )
            return
        counts = [sum(1 for _, t, _ in batch if t is ticket) for ticket in owners]
        shares = share_calls(out.calls, counts)
        for (_, ticket, index), flag in zip(batch, out.value, strict=True):
            ticket.flags[index] = bool(flag)
            ticket.remaining -= 1
        for ticket, calls in zip(owners, shares, strict=True):
            ticket.calls.extend(calls)
            if ticket.remaining == 0 and not ticket.future.done():
                ticket.future.set_result((ticket.flags, ticket.calls))

    @staticmethod
    def _fail(owners: list[_Ticket], exc: Exception) -> None:
        """Every caller in the batch gets the error."""
        error = exc if isinstance(exc, JudgeError) else JudgeError(f"refusal batch failed: {exc!r}")
        if error is not exc:
            error.__cause__ = exc
        for ticket in owners:
            if not ticket.future.done():
                ticket.future.set_exception(error)

    async def aclose(self, *, cancel: bool = False) -> None:
        """Send what is pending and wait for the batches in flight; with ``cancel`` (a stream worker
        stopping: its callers are gone and their messages come back unacked), drop what is pending and
        cancel the batches in flight instead of waiting minutes for a slow judge."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if cancel:
            for _, ticket, _ in self._pending:
                if not ticket.future.done():
                    ticket.future.cancel()
            self._pending.clear()
            for task in self._tasks:
                task.cancel()
        elif self._pending:
            self._flush()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
