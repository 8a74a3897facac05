"""Assemble one interaction's stage results into its ``Evaluation``.

- Scores: the three pair scores of ``NliResult`` (None when the pair was not judged).
- Refusal flags: from ``RefusalResult``; in ``refusal_mode`` "same", from ``NliResult`` when the
  refusal result is None (the question was asked inside the NLI prompt).
- ``hallucination``: ``context_entailment`` under the judge's operating threshold
  (``PipelineSettings.threshold_for``: the interaction's app/model's ``app_thresholds`` value, else
  ``hallucination_threshold`` when set, else the judge kind's calibrated default) when the answer was
  given (it has at least one sentence), is known not to be a refusal, and the context pair was judged;
  otherwise None (no context, a refusal, or an unknown refusal flag).
- Statements: a statement of the context pair is entailed from the same operating threshold up, and an
  unsupported claim under it (``pipeline.unsupported_claim_threshold`` when set), so a flagged answer
  always names the statements that made it so (``at_threshold``); ``grounded_precision`` and
  ``unsupported_claims`` from that pair (``metrics.grounded``).
- Evidence and tools: ``evidence`` holds the tool-result passages judged beside the contexts
  (``pipeline.evidence``). ``no_evidence`` is True when the answer was given, is known not to be a
  refusal, has a factual statement (``pipeline.evidence.is_factual``) and there is no evidence at all (no
  non-blank context, no tool passage); False when such an answer had evidence. ``outcome``: refusal,
  unsupported_no_evidence, else hallucination or supported from ``hallucination``, else None.
  ``tool_calls``, ``tool_error`` and ``ungrounded_arguments`` describe the current question's steps
  (``pipeline.tool_arguments``).
- Citations (``pipeline.metrics.citations``): the context pair's statements carry their citations
  (``StatementVerdict.citations``) and the evaluation the answer's citation figures, when it cites.
- Answerability (``pipeline.answerability``): whether the question is answerable from its documents (an
  ``answerable`` label, else the ground truth's refusal flag, else, with
  ``pipeline.no_evidence_unanswerable``, no evidence at all), which source decided, and the refusal
  groundedness flags it gives with ``answer_refusal``.
- Cost and time: every call of every stage; ``judge_calls`` counts the records that reached the
  judge's model (not cached, ``attempts > 0``: shares of a refusal batch led by another interaction
  have ``attempts=0``, see ``pipeline.refusal``); tokens, cost and latency are summed over all records.
- ``complete`` is False when a stage result is missing (``nli``; ``refusal`` in the "separate" mode)
  or ``missing`` names parts; ``missing`` lists them (``"nli"``, ``"refusal"`` and those given).
- Privacy: the values behind a masked interaction's placeholders (``Converted.originals``, mode
  ``judge``) are put back in the interaction and the statements (``pipeline.privacy.mask``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict
from datetime import datetime
from typing import Any

from pipeline.answerability import answerability, has_evidence, nothing_retrieved
from pipeline.evidence import has_factual_statement, tool_passages
from pipeline.judges.identity import judge_model, prompt_version
from pipeline.metrics.citations import check_citations
from pipeline.metrics.grounded import grounded_precision, unsupported_claims
from pipeline.privacy.mask import restore_evaluation
from pipeline.tool_arguments import ungrounded_arguments
from schemas.evaluation import Evaluation, Outcome
from schemas.interaction import Interaction, Passage
from schemas.results import (
    Converted,
    JudgeCall,
    NliResult,
    PairName,
    PairResult,
    RefusalResult,
    StatementVerdict,
)
from schemas.settings import PipelineSettings, Settings


def _pair(nli: NliResult | None, name: PairName) -> PairResult | None:
    if nli is None:
        return None
    return next((p for p in nli.pairs if p.pair == name), None)


def _units(scored: PairResult | None, pipe: PipelineSettings, threshold: float) -> dict[str, Any]:
    """Grounded-unit precision and the unsupported claims (under ``pipeline.unsupported_claim_threshold``
    when set, else the operating ``threshold``) of the scored context pair."""
    under = threshold if pipe.unsupported_claim_threshold is None else pipe.unsupported_claim_threshold
    return {
        "grounded_precision": grounded_precision(scored, pipe.statement_weights),
        "unsupported_claims": unsupported_claims(scored, under),
    }


def _score(nli: NliResult | None, name: PairName) -> float | None:
    pair = _pair(nli, name)
    return pair.score if pair is not None else None


def count_judge_calls(calls: Iterable[JudgeCall]) -> int:
    """Records that reached the judge's model: not cache hits, and with requests of their own."""
    return sum(1 for call in calls if not call.cached and call.attempts > 0)


def with_calls(evaluation: Evaluation, calls: list[JudgeCall], **update: Any) -> Evaluation:
    """The evaluation with more judge calls (custom rubrics, the argument judge) in its calls, judge call
    count, tokens, cost and latency, and the other fields of ``update``."""
    all_calls = [*evaluation.calls, *calls]
    return evaluation.model_copy(
        update={
            **update,
            "calls": all_calls,
            "judge_calls": count_judge_calls(all_calls),
            "input_tokens": evaluation.input_tokens + sum(c.input_tokens for c in calls),
            "output_tokens": evaluation.output_tokens + sum(c.output_tokens for c in calls),
            "cost_usd": evaluation.cost_usd + sum(c.cost_usd for c in calls),
            "judge_latency_ms": evaluation.judge_latency_ms + sum(c.latency_ms for c in calls),
        }
    )


def _absent(
    nli: NliResult | None, refusal: RefusalResult | None, same: bool, missing: Iterable[str]
) -> list[str]:
    """The parts missing from the Evaluation: those given, and the stage results that did not arrive."""
    absent = list(dict.fromkeys(missing))
    if nli is None and "nli" not in absent:
        absent.append("nli")
    if refusal is None and not same and "refusal" not in absent:
        absent.append("refusal")
    return absent


def _refusal_flags(
    nli: NliResult | None, refusal: RefusalResult | None, same: bool
) -> tuple[bool | None, bool | None]:
    """(answer refusal, ground-truth refusal): from the refusal stage, else (``same`` mode) from NLI."""
    if refusal is not None:
        return refusal.answer_refusal, refusal.ground_truth_refusal
    if same and nli is not None:
        return nli.answer_refusal, nli.ground_truth_refusal
    return None, None


def _calls_and_seconds(
    converted: Converted,
    nli: NliResult | None,
    refusal: RefusalResult | None,
    extra_seconds: Mapping[str, float] | None,
) -> tuple[list[JudgeCall], dict[str, float]]:
    """Every call of every stage, and the seconds each stage took."""
    calls: list[JudgeCall] = list(converted.calls)
    stage_seconds: dict[str, float] = {"convert": converted.seconds}
    if nli is not None:
        calls.extend(nli.calls)
        stage_seconds["nli"] = nli.seconds
    if refusal is not None:
        calls.extend(refusal.calls)
        stage_seconds["refusal"] = refusal.seconds
    stage_seconds.update(extra_seconds or {})
    return calls, stage_seconds


def _outcome(
    answer_refusal: bool | None, no_evidence: bool | None, hallucination: bool | None
) -> Outcome | None:
    if answer_refusal:
        return "refusal"
    if no_evidence:
        return "unsupported_no_evidence"
    if hallucination is None:
        return None
    return "hallucination" if hallucination else "supported"


def _tools(interaction: Interaction, settings: Settings) -> dict[str, Any]:
    """The Evaluation's tool fields: calls and errors of the current question, ungrounded arguments."""
    current = [s for s in interaction.steps if not s.earlier_turn]
    values = ungrounded_arguments(interaction, settings.tools.argument_min_chars)
    return {
        "tool_calls": len(current),
        "tool_error": any(s.status == "error" for s in current) if current else None,
        "ungrounded_arguments": bool(values) if values is not None else None,
        "ungrounded_argument_values": values or [],
    }


def _answerability(
    interaction: Interaction,
    passages: list[Passage],
    gt_refusal: bool | None,
    answer_refusal: bool | None,
    settings: Settings,
) -> dict[str, Any]:
    """The Evaluation's answerability fields (pipeline.answerability)."""
    nothing = nothing_retrieved(interaction.contexts, passages, settings.pipeline.no_evidence_unanswerable)
    return answerability(interaction.labels, gt_refusal, nothing, answer_refusal).model_dump()


def _call_totals(calls: list[JudgeCall]) -> dict[str, Any]:
    """The Evaluation's judge call count, tokens, cost and latency, summed over its calls."""
    return {
        "judge_calls": count_judge_calls(calls),
        "input_tokens": sum(c.input_tokens for c in calls),
        "output_tokens": sum(c.output_tokens for c in calls),
        "cost_usd": sum(c.cost_usd for c in calls),
        "judge_latency_ms": sum(c.latency_ms for c in calls),
    }


def operating_threshold(converted: Converted, settings: Settings) -> float:
    """The interaction's operating threshold of ``context_entailment`` (its app/model's, else the
    judge kind's): its hallucination flag, and its statements' verdicts, are decided by it."""
    interaction = converted.interaction
    return settings.pipeline.threshold_for(
        "context_entailment", settings.judge.kind, interaction.app, interaction.model
    )


def _hallucination(
    converted: Converted, answer_refusal: bool | None, context_entailment: float | None, threshold: float
) -> bool | None:
    """An answer that is not a refusal, entailed by its contexts under ``threshold``; None when there is
    no answer, it may be a refusal, or the entailment is unknown."""
    if not converted.answer_sentences or answer_refusal is not False or context_entailment is None:
        return None
    return context_entailment < threshold


def at_threshold(pair: PairResult | None, threshold: float) -> PairResult | None:
    """The context pair with each statement's verdict decided by its score and ``threshold``, as the
    flag is: entailed from the threshold up, else the judge's own verdict when it was not entailed, else
    not_stated (a judge with partial credit may call a statement entailed at 0.73). The scores stay, so
    the pair's score and the flag do not move; a flagged answer's mean is under the threshold, so at
    least one of its statements is."""
    if pair is None:
        return None

    def decided(st: StatementVerdict) -> StatementVerdict:
        verdict = (
            "entailed"
            if st.score >= threshold
            else ("not_stated" if st.verdict == "entailed" else st.verdict)
        )
        if verdict == st.verdict:
            return st
        side = "at or over" if verdict == "entailed" else "under"
        why = f"score {st.score:.3f} {side} the operating threshold {threshold:g}"
        return st.model_copy(
            update={"verdict": verdict, "reason": f"{st.reason} ({why})" if st.reason else why}
        )

    hypotheses = [
        h.model_copy(update={"statements": [decided(st) for st in h.statements]}) for h in pair.hypotheses
    ]
    return pair.model_copy(update={"hypotheses": hypotheses})


def _no_evidence(converted: Converted, answer_refusal: bool | None, passages: list[Passage]) -> bool | None:
    """An answer that is not a refusal had no evidence (no context text, no tool passage) and a factual
    statement; False: it had evidence; None: a refusal, unknown, or nothing factual said."""
    if not converted.answer_sentences or answer_refusal is not False:
        return None
    if has_evidence(converted.interaction.contexts, passages):
        return False
    return True if has_factual_statement(converted.answer_sentences) else None


def _citations(
    nli: NliResult | None, context_pair: PairResult | None, converted: Converted, refusal: bool | None
) -> dict[str, Any]:
    """The Evaluation's pairs (the context pair's statements with their citations) and citation figures."""
    checked, figures = check_citations(context_pair, converted.citations, refusal)
    context = checked if checked is not None else context_pair
    pairs = [
        context if p.pair == "context_answer" and context is not None else p
        for p in (nli.pairs if nli is not None else [])
    ]
    return {"pairs": pairs, **asdict(figures)}


def assemble(
    converted: Converted,
    nli: NliResult | None,
    refusal: RefusalResult | None,
    settings: Settings,
    *,
    evaluated_at: datetime,
    relevance: float | None = None,
    missing: Iterable[str] = (),
    extra_seconds: Mapping[str, float] | None = None,
) -> Evaluation:
    """The Evaluation of one interaction (see the module docstring)."""
    interaction = converted.interaction
    pipe = settings.pipeline
    same = pipe.refusal_mode == "same"
    answer_refusal, gt_refusal = _refusal_flags(nli, refusal, same)

    threshold = operating_threshold(converted, settings)
    context_pair = at_threshold(_pair(nli, "context_answer"), threshold)
    context_entailment = context_pair.score if context_pair is not None else None
    hallucination = _hallucination(converted, answer_refusal, context_entailment, threshold)
    passages = tool_passages(interaction, settings.tools)
    no_evidence = _no_evidence(converted, answer_refusal, passages)

    absent = _absent(nli, refusal, same, missing)
    calls, stage_seconds = _calls_and_seconds(converted, nli, refusal, extra_seconds)
    scored = context_pair if context_pair is not None and context_pair.score is not None else None
    evaluation = Evaluation(
        interaction_id=interaction.interaction_id,
        timestamp=interaction.timestamp,
        evaluated_at=evaluated_at,
        app=interaction.app,
        model=interaction.model,
        conversation_id=interaction.conversation_id,
        judge=settings.judge.kind,
        judge_model=judge_model(settings.judge),
        prompt_version=prompt_version(settings.judge.kind),
        context_entailment=context_entailment,
        ground_truth_entails_answer=_score(nli, "ground_truth_answer"),
        answer_entails_ground_truth=_score(nli, "answer_ground_truth"),
        answer_refusal=answer_refusal,
        ground_truth_refusal=gt_refusal,
        **_units(scored, pipe, threshold),
        hallucination=hallucination,
        relevance=relevance,
        **_citations(nli, context_pair, converted, answer_refusal),
        outcome=_outcome(answer_refusal, no_evidence, hallucination),
        no_evidence=no_evidence,
        evidence=passages,
        calls=calls,
        **_call_totals(calls),
        stage_seconds=stage_seconds,
        complete=not absent,
        missing=absent,
        labels=interaction.labels,
        interaction=interaction,
        **_tools(interaction, settings),
        **_answerability(interaction, passages, gt_refusal, answer_refusal, settings),
    )
    return restore_evaluation(evaluation, converted.originals)
