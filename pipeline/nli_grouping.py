"""NLI cases of concurrent interactions grouped into one prompt (``nli_mode`` "batched").

Batched NLI sends all hypotheses of a pair with one copy of the premise. Most chatbot answers are one
or two sentences, so the prompt's fixed instructions, not the premise, are most of what a call sends.
``NliGrouper`` therefore also groups the (premise, hypotheses) cases of concurrent callers, across
pairs and interactions, into one ``nli_cases`` prompt, so the instructions are sent once per group:

- a group is sent when it holds ``group_cases`` cases, when the next case would take it over the
  judge's window (``max_group_tokens``: the window minus the prompt's overhead; each case counts its
  characters / ``chars_per_token`` plus ``nli_output_tokens_per_hypothesis`` per hypothesis, and the
  output room of a group stays within ``max_output_tokens``), or ``nli_group_linger_ms`` after its
  first case arrived;
- a group of one case is the one-premise ``nli`` prompt (so ``group_cases`` = 1 is the ungrouped way);
- a case that asks the refusal question (``refusal_mode`` "same") is not grouped: it goes alone;
- a group whose call fails (after the client's retries) or whose answer does not fit is sent again
  case by case, so one case a small model cannot answer in a group does not fail its neighbours;
- every caller receives its own verdicts and its share of the call (``pipeline.call_shares``).

The group size is per judge kind (``PipelineSettings.nli_group_cases_for``): on by default for hosted
judges (billed per input token), 1 for the local one (its llama.cpp server reuses the instructions
already evaluated for the previous request, a prefix match, and a 1.5B model follows a one-case prompt
more reliably).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pipeline.judges.base import Judge, JudgeOutput, NliOutput, Premise
from pipeline.judges.window import window_tokens
from schemas.errors import JudgeError
from schemas.settings import Settings


@runtime_checkable
class CaseJudge(Protocol):
    """A judge that can answer several (premise, hypotheses) cases in one call."""

    async def entail_cases(
        self, cases: Sequence[tuple[Premise, Sequence[str]]]
    ) -> list[JudgeOutput[NliOutput]]: ...


class EntailJudge(Protocol):
    """What the NLI stage needs of a judge: its name and ``entail``."""

    name: str

    async def entail(
        self, premise: Premise, hypotheses: Sequence[str], *, ask_refusal: bool = False
    ) -> JudgeOutput[NliOutput]: ...


@dataclass
class _Case:
    premise: Premise
    hypotheses: list[str]
    tokens: int
    output_tokens: int
    future: asyncio.Future[JudgeOutput[NliOutput]] = field(repr=False)


class NliGrouper:
    """``entail`` like a judge, grouping concurrent callers' cases (see the module docstring).

    One instance serves one event loop; create it inside the loop that calls ``entail``.
    """

    def __init__(self, judge: Judge, settings: Settings, group_cases: int) -> None:
        if not isinstance(judge, CaseJudge):
            raise TypeError(f"judge {judge.name} cannot answer several NLI cases in one call")
        self.name = judge.name
        self._judge = judge
        self._cases_judge: CaseJudge = judge
        self._settings = settings
        self.group_cases = group_cases
        pipe = settings.pipeline
        self.max_group_tokens = max(1, window_tokens(settings.judge) - pipe.nli_prompt_overhead_tokens)
        self.max_output_tokens = settings.judge.max_output_tokens
        self._pending: list[_Case] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def case_tokens(self, premise: Premise, hypotheses: Sequence[str]) -> tuple[int, int]:
        """(tokens a case takes in a prompt with its output room, its output room)."""
        pipe = self._settings.pipeline
        chars = len(premise.text) + len(premise.document or "") + sum(len(h) for h in hypotheses)
        output = pipe.nli_output_tokens_per_hypothesis * len(hypotheses)
        return int(chars / pipe.chars_per_token) + output, output

    async def entail(
        self, premise: Premise, hypotheses: Sequence[str], *, ask_refusal: bool = False
    ) -> JudgeOutput[NliOutput]:
        if ask_refusal or self.group_cases <= 1 or not hypotheses:
            return await self._judge.entail(premise, hypotheses, ask_refusal=ask_refusal)
        loop = asyncio.get_running_loop()
        tokens, output = self.case_tokens(premise, hypotheses)
        case = _Case(premise, list(hypotheses), tokens, output, loop.create_future())
        if self._pending and not self._fits(case):
            self._send_pending()
        self._pending.append(case)
        if len(self._pending) >= self.group_cases:
            self._send_pending()
        elif self._timer is None:
            linger = self._settings.pipeline.nli_group_linger_ms / 1000.0
            self._timer = loop.call_later(linger, self._send_pending)
        return await case.future

    def _fits(self, case: _Case) -> bool:
        tokens = sum(c.tokens for c in self._pending) + case.tokens
        output = sum(c.output_tokens for c in self._pending) + case.output_tokens
        return tokens <= self.max_group_tokens and output <= self.max_output_tokens

    def _send_pending(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        group = [c for c in self._pending if not c.future.done()]  # a cancelled caller's case
        self._pending = []
        if not group:
            return
        task = asyncio.get_running_loop().create_task(self._run(group))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, group: list[_Case]) -> None:
        try:
            if len(group) == 1:
                await self._alone(group[0])
                return
            try:
                outs = await self._cases_judge.entail_cases([(c.premise, c.hypotheses) for c in group])
                if len(outs) != len(group) or any(
                    len(o.value.hypotheses) != len(c.hypotheses) for o, c in zip(outs, group, strict=False)
                ):
                    raise JudgeError(f"judge {self.name} answered a group of {len(group)} cases incompletely")
            except JudgeError:
                # a group the judge could not answer: each case on its own (module docstring)
                await asyncio.gather(*(self._alone(c) for c in group))
                return
            except Exception as exc:  # not the judge's verdict: every caller of the group gets it
                error = JudgeError(f"NLI group of {len(group)} cases failed: {exc!r}")
                error.__cause__ = exc
                for case in group:
                    if not case.future.done():
                        case.future.set_exception(error)
                return
            for case, out in zip(group, outs, strict=True):
                if not case.future.done():
                    case.future.set_result(out)
        except asyncio.CancelledError:  # aclose(cancel=True): the callers are not left waiting
            for case in group:
                if not case.future.done():
                    case.future.cancel()
            raise

    async def _alone(self, case: _Case) -> None:
        try:
            out = await self._judge.entail(case.premise, case.hypotheses)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not case.future.done():
                case.future.set_exception(exc)
            return
        if not case.future.done():
            case.future.set_result(out)

    async def aclose(self, *, cancel: bool = False) -> None:
        """Send what is pending and wait for the groups in flight; with ``cancel`` (a stream worker
        stopping), drop what is pending and cancel the groups in flight."""
        if cancel:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            for case in self._pending:
                if not case.future.done():
                    case.future.cancel()
            self._pending = []
            for task in self._tasks:
                task.cancel()
        elif self._pending:
            self._send_pending()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def nli_judge(judge: Judge, settings: Settings) -> EntailJudge | NliGrouper:
    """The NLI stage's judge: a ``NliGrouper`` when batched mode groups cases for this judge kind and
    the judge can answer cases together, else the judge itself."""
    pipe = settings.pipeline
    group = pipe.nli_group_cases_for(settings.judge.kind)
    if pipe.nli_mode != "batched" or group <= 1 or not isinstance(judge, CaseJudge):
        return judge
    return NliGrouper(judge, settings, group)
