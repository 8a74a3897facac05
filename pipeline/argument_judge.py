"""Ungrounded tool arguments, second opinion: the LLM judge reviews the values the lexical check did not find.

With ``tools.argument_judge`` "llm" and an LLM judge (``judge.kind`` openai, local, or cascade's LLM), the
argument values ``pipeline.tool_arguments`` reports as ungrounded (only those, so the cost is bounded by
what the lexical check flags) go to the judge in one call per interaction (prompts/arguments.md, stage
``arguments``): the conversation (the history's user and assistant turns, then the question), the tool
results in the order the model received them, and each value with how many of those results came
before its call. A value the judge calls supported (a date the user gave in words, an id the model
normalised) is dropped from ``ungrounded_argument_values``; ``ungrounded_arguments`` is False when none
is left. Bounds: the first ``MAX_VALUES`` values are sent (the rest keep the lexical verdict); each turn
and tool result shown is cut to ``MAX_TEXT_CHARS``, and the results together to ``MAX_RESULTS_CHARS``
(later results get what is left, marked cut).

The call goes through the judge's ``JudgeClient`` (retries, in-flight slots, cost) and its verdict cache.
When it fails (an error, an answer that never validates), or with "llm" and no LLM judge, the lexical
result stands and ``argument_judge_failure`` says why: the interaction is never failed by it. An
interaction without an unsupported value makes no call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pipeline.assemble import with_calls
from pipeline.custom_evaluators import llm_of
from pipeline.judges.base import Judge
from pipeline.llm.cache import cache_key
from pipeline.tool_arguments import unsupported_values
from prompts import ArgumentsAnswer, ArgumentsInput, ArgumentValue, Prompts, PronounTurn
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.results import JudgeCall
from schemas.settings import Settings

log = logging.getLogger(__name__)

#: characters of each conversation turn and tool result shown to the judge
MAX_TEXT_CHARS = 4000
#: characters of all the tool results shown together
MAX_RESULTS_CHARS = 32_000
#: values sent in one call; the others keep the lexical verdict
MAX_VALUES = 50
CUT = " [cut]"
REASON_CHARS = 200


def arguments_input(interaction: Interaction, min_chars: int) -> ArgumentsInput | None:
    """What the judge is shown for ``interaction`` (module docstring); None when the lexical check left no
    value unsupported."""
    found = unsupported_values(interaction, min_chars)
    if not found:
        return None
    turns = [
        PronounTurn(role=m.role, text=m.content[:MAX_TEXT_CHARS])
        for m in interaction.history
        if m.role in ("user", "assistant")
    ]
    turns.append(PronounTurn(role="user", text=interaction.question[:MAX_TEXT_CHARS]))
    found = found[:MAX_VALUES]
    seen = max(v.results_before for v in found)
    results: list[str] = []
    left = MAX_RESULTS_CHARS
    for text in [s.result for s in interaction.steps if s.result is not None][:seen]:
        cut = min(MAX_TEXT_CHARS, left)
        results.append(text if len(text) <= cut else text[:cut] + CUT)
        left -= min(len(text), cut)
    values = [ArgumentValue(text=v.label, results_before=v.results_before) for v in found]
    return ArgumentsInput(turns=turns, results=results, values=values)


def _check(count: int) -> Callable[[ArgumentsAnswer], None]:
    def check(answer: ArgumentsAnswer) -> None:
        ids = sorted(v.id for v in answer.values)
        if ids != list(range(1, count + 1)):
            raise ValueError(f"expected one verdict for each of ids 1 to {count}, got ids {ids}")

    return check


class ArgumentJudge:
    """The LLM judge's review of a judged interaction's unsupported argument values (module docstring).
    False (nothing to do) with ``tools.argument_judge`` "lexical"."""

    def __init__(self, judge: Judge | None, settings: Settings, prompts: Prompts | None = None) -> None:
        self.on = settings.tools.argument_judge == "llm"
        self.min_chars = settings.tools.argument_min_chars
        self.llm = llm_of(judge) if self.on else None
        self.prompts = (prompts or Prompts()) if self.llm is not None else None

    def __bool__(self) -> bool:
        return self.on

    async def review(self, evaluation: Evaluation, interaction: Interaction) -> Evaluation:
        """``evaluation`` with the values the judge finds supported dropped and its call counted.
        ``interaction``: the one the judge sees (masked under privacy mode judge), whose unsupported values
        are those of the evaluation, in the same order. Never raises (a cancellation goes through)."""
        if not self.on or not evaluation.ungrounded_argument_values:
            return evaluation
        if self.llm is None or self.prompts is None:
            return evaluation.model_copy(
                update={"argument_judge_failure": "no LLM judge: needs judge.kind openai, local or cascade"}
            )
        inp = arguments_input(interaction, self.min_chars)
        if inp is None or len(inp.values) != min(MAX_VALUES, len(evaluation.ungrounded_argument_values)):
            return evaluation.model_copy(
                update={"argument_judge_failure": "the values to review do not match the evaluation's"}
            )
        client, cache, model = self.llm
        prompt = self.prompts.arguments(inp)
        key = cache_key("arguments", prompt.version, model, inp.model_dump_json())
        calls: list[JudgeCall] = []
        try:
            hit = (await cache.get_many([key]))[0] if cache is not None else None
            if hit is not None:
                answer = ArgumentsAnswer.model_validate_json(hit)
                judge = client.judge_name
                calls.append(JudgeCall(stage="arguments", judge=judge, model=model, cached=True, attempts=0))
            else:
                answer, call = await client.complete(
                    prompt, stage="arguments", items=len(inp.values), check=_check(len(inp.values))
                )
                calls.append(call)
                if cache is not None:
                    await cache.put_many([(key, answer.model_dump_json())])
        except Exception as exc:  # the lexical result stands; the interaction is never failed by this
            log.warning("argument judge failed on %s: %r", evaluation.interaction_id, exc)
            reason = f"{type(exc).__name__}: {exc}"[:REASON_CHARS]
            return evaluation.model_copy(update={"argument_judge_failure": reason})
        supported = {v.id for v in answer.values if v.supported}
        kept = [v for i, v in enumerate(evaluation.ungrounded_argument_values, 1) if i not in supported]
        return with_calls(evaluation, calls, ungrounded_argument_values=kept, ungrounded_arguments=bool(kept))
