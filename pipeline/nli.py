"""NLI stage (docs/method.md): three (premise, hypotheses) pairs judged by the judge.

Pairs (``schemas.results.PairName``):

1. ``context_answer``: premise = the evidence passages joined by a blank line: the contexts, then the
   passages of the tool results that count as evidence (``pipeline.evidence``; ``Premise.document`` =
   their document names, comma-separated, when given); hypotheses = the answer's sentences. A short
   answer (one sentence of at most ``short_answer_words`` words, per judge kind) is one hypothesis
   framed by the question's asking sentence (its last sentence ending in "?", else its last sentence:
   "Which state is Reno in? Nevada."), so that the judge checks the claim it makes, not a bare name
   that any passage may mention. In ``refusal_mode`` "same" the refusal question reads the answer as
   written: it is asked with pair 2 (the bare answer), or, without a ground truth, pair 1 is unframed.
2. ``ground_truth_answer``: premise = the question's last sentence, a newline, the ground truth (the
   original text: pronoun replacement only makes single sentences stand alone); hypotheses = the
   answer's sentences.
3. ``answer_ground_truth``: premise = the question's last sentence, a newline, the answer (original
   text); hypotheses = the ground truth's sentences.

Ground truths as alternatives (``pipeline.alternatives``, setting ``ground_truth_alternatives``): when
the ground truth is a list of acceptable short answers (``gold_answers`` metadata, or ``a | b | c``),
pair 3's hypotheses are the alternatives, judged in one call, and the pair holds ONE hypothesis (the
ground truth as given) whose score is the best alternative's (any alternative will do).

Exact match (setting ``exact_match``): in pair 3, an alternative (or ground-truth sentence) that the
answer contains, normalised, is entailed without asking the judge; in pair 2, an answer sentence that
equals an alternative (or the whole ground truth), normalised, is entailed without asking. Decided
hypotheses carry one statement tagged ``exact_match``.

The premises of pairs 2 and 3 carry ``Premise.question`` (the question's end they start with), so
that a judge may tell the question, which frames the claim, from the evidence.

Citations: when the answer cites (``Converted.citations``, ``citations.enabled``), the context pair's
premises ask the judge which passages support each statement (``Premise.ask_support``), in the same
calls; the answers come back as evidence indices in ``StatementVerdict.supported_by``.

A pair without hypotheses, without contexts (pair 1) or without ground truth (pairs 2, 3), or left
out of ``pipeline.pairs``, is not judged: its score is None. ``nli_mode`` "batched" sends up to
``nli_batch_size`` hypotheses with one copy of the premise per call; "per_hypothesis" (the seed's way)
sends one hypothesis a call.

A premise longer than ``max_premise_chars`` (derived from the judge's window) is split into parts:
passages are packed whole while they fit, a passage too long on its own is split on sentence
boundaries (``split_sentences``) and packed by sentences. Each hypothesis is judged against every
part; the parts are combined per hypothesis: when every part returned the same number of statements,
each statement takes its best verdict across the parts (highest score; ties: entailed, then
contradicted, then not_stated, then the earlier part), with the supporting passages every part named,
and the hypothesis score is the mean of those;
otherwise the part whose hypothesis score is highest (earlier part on ties) is taken whole.

Hypothesis score = the judge's mean of its statements (recomputed when parts are combined); pair
score = mean of its hypotheses' scores. In ``refusal_mode`` "same" the refusal question is asked in
the first call of the answer's hypotheses (pair 1, or pair 2 when there is no context) and in the
first call of pair 3 (ground truth), and the flags fill ``NliResult.answer_refusal`` /
``ground_truth_refusal``. All calls run concurrently; the judge client bounds the calls in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pipeline.alternatives import exact_match, ground_truth_alternatives, same_answer
from pipeline.clock import Stopwatch
from pipeline.convert import batches
from pipeline.evidence import evidence
from pipeline.judges.base import JudgeOutput, NliOutput, Premise, PremisePassage
from pipeline.judges.window import window_tokens
from pipeline.nli_grouping import EntailJudge
from pipeline.sentences import split_sentences
from schemas.errors import JudgeError
from schemas.interaction import Passage
from schemas.results import (
    Converted,
    HypothesisResult,
    JudgeCall,
    NliResult,
    PairName,
    PairResult,
    StatementVerdict,
)
from schemas.settings import Settings, ToolSettings

_VERDICT_RANK = {"entailed": 2, "contradicted": 1, "not_stated": 0}


def max_premise_chars(settings: Settings, hypotheses: Sequence[str] = ()) -> int:
    """Characters of premise that fit one NLI prompt with these hypotheses.

    ``(window - prompt overhead - output room) * chars_per_token - hypotheses' characters``, where the
    output room is ``nli_output_tokens_per_hypothesis`` per hypothesis (at most ``max_output_tokens``);
    never less than ``min_premise_chars``.
    """
    pipe = settings.pipeline
    output_room = pipe.nli_output_tokens_per_hypothesis * len(hypotheses)
    output_tokens = min(settings.judge.max_output_tokens, output_room)
    tokens = window_tokens(settings.judge) - pipe.nli_prompt_overhead_tokens - output_tokens
    chars = int(tokens * pipe.chars_per_token) - sum(len(h) for h in hypotheses)
    return max(chars, pipe.min_premise_chars)


def _document_names(passages: Sequence[Passage]) -> str | None:
    names = list(dict.fromkeys(p.document for p in passages if p.document))
    return ", ".join(names) if names else None


def split_premise(passages: Sequence[Passage], max_chars: int, settings: Settings) -> list[Premise]:
    """Pack passages (joined by a blank line) into premises of at most ``max_chars`` characters.

    A passage longer than ``max_chars`` is split into sentences, packed with single spaces; a sentence
    longer than ``max_chars`` (only when ``max_sentence_chars`` exceeds it) is cut in chunks. Each premise
    lists its passages (``Premise.passages``, by position in ``passages``), so a judge can say which one
    bears on a statement.
    """
    parts: list[Premise] = []
    texts: list[str] = []
    docs: list[Passage] = []
    members: list[PremisePassage] = []

    def flush() -> None:
        if texts:
            parts.append(
                Premise(text="\n\n".join(texts), document=_document_names(docs), passages=tuple(members))
            )
        texts.clear()
        docs.clear()
        members.clear()

    for position, passage in enumerate(passages):
        text = passage.text.strip()
        if not text:
            continue
        if len(text) > max_chars:
            flush()
            current = ""
            pieces_of: list[str] = []
            for sentence in split_sentences(text, settings.split):
                pieces = [sentence[i : i + max_chars] for i in range(0, len(sentence), max_chars)]
                for piece in pieces:
                    if current and len(current) + 1 + len(piece) > max_chars:
                        pieces_of.append(current)
                        current = ""
                    current = f"{current} {piece}" if current else piece
            if current:
                pieces_of.append(current)
            for piece_text in pieces_of:
                member = (PremisePassage(position, piece_text),)
                parts.append(Premise(text=piece_text, document=passage.document, passages=member))
            continue
        if texts and len("\n\n".join([*texts, text])) > max_chars:
            flush()
        texts.append(text)
        docs.append(passage)
        members.append(PremisePassage(position, text))
    flush()
    return parts


@dataclass(frozen=True)
class _Job:
    pair: PairName
    part: int
    indices: list[int]  # the pair's hypotheses judged in this call
    hypotheses: list[str]
    ask_refusal: bool


def _best_statement(candidates: list[StatementVerdict]) -> StatementVerdict:
    best = candidates[0]
    for candidate in candidates[1:]:
        if (candidate.score, _VERDICT_RANK[candidate.verdict]) > (best.score, _VERDICT_RANK[best.verdict]):
            best = candidate
    return best


def _with_support_of(best: StatementVerdict, group: Sequence[StatementVerdict]) -> StatementVerdict:
    """The best verdict with the supporting passages every part named (each part holds other passages)."""
    named = [s.supported_by for s in group if s.supported_by is not None]
    if not named:
        return best
    return best.model_copy(update={"supported_by": list(dict.fromkeys(i for ids in named for i in ids))})


def combine_parts(results: list[HypothesisResult]) -> HypothesisResult:
    """One hypothesis judged against several premise parts -> its best support (module docstring)."""
    if len(results) == 1:
        return results[0]
    counts = {len(r.statements) for r in results}
    if len(counts) == 1 and counts != {0}:
        groups = zip(*(r.statements for r in results), strict=True)
        statements = [_with_support_of(_best_statement(list(group)), group) for group in groups]
        score = sum(s.score for s in statements) / len(statements)
        return HypothesisResult(hypothesis=results[0].hypothesis, statements=statements, score=score)
    best = results[0]
    for result in results[1:]:
        if result.score > best.score:
            best = result
    return best


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def question_asked(question_sentences: Sequence[str]) -> str:
    """The sentence of the question that asks: the last one ending in "?" ("Which state is Reno in?" of
    "Which state is Reno in? Answer in one word."), else the last sentence ("" without a question)."""
    asking = [s for s in question_sentences if s.rstrip().endswith("?")]
    if asking:
        return asking[-1]
    return question_sentences[-1] if question_sentences else ""


def context_hypotheses(question: str, answer: list[str], settings: Settings | None) -> list[str]:
    """The answer's sentences, or a short answer framed by the question's asking sentence (module doc)."""
    if settings is None or not question or len(answer) != 1:
        return answer
    limit = settings.pipeline.short_answer_words_for(settings.judge.kind)
    if 0 < len(answer[0].split()) <= limit:
        return [f"{question} {answer[0]}"]
    return answer


def build_pairs(
    converted: Converted, settings: Settings | None = None, passages: Sequence[Passage] | None = None
) -> list[tuple[PairName, list[Passage], list[str]]]:
    """The three pairs as (name, premise passages, hypotheses); empty passages = not judged. The context
    pair's passages are ``passages`` (the evidence, ``pipeline.evidence.evidence``; computed when None).

    With ``ground_truth_alternatives`` on (default) and a ground truth of alternatives, pair 3's
    hypotheses are the alternatives (see the module docstring).
    """
    interaction = converted.interaction
    question_end = converted.question_sentences[-1] if converted.question_sentences else ""
    asked = question_asked(converted.question_sentences)
    if passages is None:
        passages = evidence(interaction, settings.tools if settings is not None else ToolSettings())
    contexts = [p for p in passages if p.text.strip()]
    answer = converted.answer_sentences
    gt_premise: list[Passage] = []
    answer_premise: list[Passage] = []
    gt_hypotheses = converted.ground_truth_sentences
    if interaction.ground_truth is not None and interaction.ground_truth.strip():
        gt_text = "\n".join(t for t in (question_end, interaction.ground_truth.strip()) if t)
        answer_text = "\n".join(t for t in (question_end, interaction.answer.strip()) if t)
        gt_premise = [Passage(text=gt_text)]
        answer_premise = [Passage(text=answer_text)]
        alternatives = ground_truth_alternatives(interaction)
        if alternatives and (settings is None or settings.pipeline.ground_truth_alternatives):
            gt_hypotheses = alternatives
    return [
        ("context_answer", contexts, context_hypotheses(asked, answer, settings)),
        ("ground_truth_answer", gt_premise, answer),
        ("answer_ground_truth", answer_premise, gt_hypotheses),
    ]


def _exact(statement: str, reason: str) -> HypothesisResult:
    verdict = StatementVerdict(
        statement=statement, verdict="entailed", score=1.0, tag="exact_match", reason=reason
    )
    return HypothesisResult(hypothesis=statement, statements=[verdict], score=1.0)


def decided_by_exact_match(
    converted: Converted, name: PairName, hypotheses: Sequence[str], settings: Settings
) -> dict[int, HypothesisResult]:
    """Hypotheses of the ground-truth pairs that exact match decides (entailed), by index."""
    interaction = converted.interaction
    if not settings.pipeline.exact_match or not interaction.ground_truth:
        return {}
    decided: dict[int, HypothesisResult] = {}
    if name == "answer_ground_truth":
        for i, hypothesis in enumerate(hypotheses):
            if exact_match(interaction.answer, hypothesis):
                decided[i] = _exact(hypothesis, "the answer contains it (exact match, normalised)")
    elif name == "ground_truth_answer":
        golds = ground_truth_alternatives(interaction) if settings.pipeline.ground_truth_alternatives else []
        golds = golds or [interaction.ground_truth.strip()]
        for i, hypothesis in enumerate(hypotheses):
            gold = same_answer(hypothesis, golds)
            if gold is not None:
                decided[i] = _exact(hypothesis, f"equals the ground truth {gold!r} (normalised)")
    return decided


def _best_alternative(ground_truth: str, results: Sequence[HypothesisResult]) -> HypothesisResult:
    """One hypothesis for a ground truth of alternatives: the best-scoring alternative (earlier on ties)."""
    best = results[0]
    for result in results[1:]:
        if result.score > best.score:
            best = result
    statements = [
        s.model_copy(update={"reason": f"alternative {best.hypothesis!r}: {s.reason}".strip()})
        for s in best.statements
    ]
    return HypothesisResult(hypothesis=ground_truth, statements=statements, score=best.score)


@dataclass
class _Plan:
    """The NLI calls of one interaction: which hypotheses go to the judge against which premise part."""

    pairs: list[tuple[PairName, list[Passage], list[str]]]
    alternatives_pair: bool
    jobs: list[_Job] = field(default_factory=list)
    premises: dict[tuple[PairName, int], Premise] = field(default_factory=dict)
    part_counts: dict[PairName, int] = field(default_factory=dict)
    decided: dict[PairName, dict[int, HypothesisResult]] = field(default_factory=dict)
    # the indices in pipeline.evidence.evidence (contexts, then tool passages) of the context pair's
    # passages (the non-blank ones)
    context_indices: list[int] = field(default_factory=list)


def _plan(converted: Converted, settings: Settings) -> _Plan:
    """Decide what exact match settles, split long premises, and batch the rest into judge calls."""
    pipe = settings.pipeline
    same = pipe.refusal_mode == "same"
    judged = evidence(converted.interaction, settings.tools)
    plan = _Plan(
        pairs=[
            (name, passages if name in pipe.pairs else [], hypotheses)
            for name, passages, hypotheses in build_pairs(converted, settings, judged)
        ],
        alternatives_pair=pipe.ground_truth_alternatives
        and bool(ground_truth_alternatives(converted.interaction)),
        context_indices=[i for i, p in enumerate(judged) if p.text.strip()],
    )
    answer_refusal_pair: PairName | None = None
    if same:  # the refusal question reads the answer as written, never one framed by the question
        raw = converted.answer_sentences
        answer_refusal_pair = next(
            (name for name, prem, hyps in plan.pairs[:2] if prem and hyps and hyps == raw), None
        )
        name, prem, hyps = plan.pairs[0]
        if answer_refusal_pair is None and prem and hyps:
            plan.pairs[0] = (name, prem, raw)  # no ground truth: the context pair is asked unframed
            answer_refusal_pair = name
    for name, passages, hypotheses in plan.pairs:
        if not passages or not hypotheses:
            continue
        plan.decided[name] = decided_by_exact_match(converted, name, hypotheses, settings)
        asks = same and (name == answer_refusal_pair or name == "answer_ground_truth")
        todo = [i for i in range(len(hypotheses)) if i not in plan.decided[name]]
        if name == "answer_ground_truth" and plan.alternatives_pair and plan.decided[name]:
            todo = []  # one alternative already holds: the best of them cannot score more
        plan.part_counts[name] = 1
        if todo or asks:
            _plan_pair(plan, converted, settings, name, passages, hypotheses, todo or [0], asks)
    return plan


def _checks_citations(converted: Converted, settings: Settings) -> bool:
    """Whether the judge is asked which passages support each statement: the answer cites."""
    cited = converted.citations
    return settings.citations.enabled and cited is not None and cited.cites


def _plan_pair(
    plan: _Plan,
    converted: Converted,
    settings: Settings,
    name: PairName,
    passages: list[Passage],
    hypotheses: list[str],
    todo: list[int],
    asks: bool,
) -> None:
    """The jobs of one pair: ``todo`` hypotheses (the refusal question needs one even when none is left)
    in batches, against each part of the premise."""
    size = settings.pipeline.nli_batch_size if settings.pipeline.nli_mode == "batched" else 1
    question_end = converted.question_sentences[-1] if converted.question_sentences else ""
    chunks = batches([hypotheses[i] for i in todo], size)
    index_chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
    budget = min(max_premise_chars(settings, chunk) for chunk in chunks)
    parts = split_premise(passages, budget, settings)
    plan.part_counts[name] = len(parts)
    for p, premise in enumerate(parts):
        premise = replace(premise, pair=name)
        if name == "context_answer" and _checks_citations(converted, settings):
            premise = replace(premise, ask_support=True)
        if name != "context_answer":  # no retrieved passages to point at: the question and an answer
            premise = replace(premise, passages=())
            if question_end and premise.text.startswith(question_end):
                premise = replace(premise, question=question_end)
        plan.premises[(name, p)] = premise
        for c, (chunk, indices) in enumerate(zip(chunks, index_chunks, strict=True)):
            plan.jobs.append(_Job(name, p, indices, chunk, asks and p == 0 and c == 0))


async def _judge_jobs(judge: EntailJudge, plan: _Plan) -> list[JudgeOutput[NliOutput]]:
    async def run(job: _Job) -> JudgeOutput[NliOutput]:
        premise = plan.premises[(job.pair, job.part)]
        out = await judge.entail(premise, job.hypotheses, ask_refusal=job.ask_refusal)
        got = out.value.hypotheses
        if len(got) != len(job.hypotheses):
            raise JudgeError(
                f"judge {judge.name} returned {len(got)} verdicts for {len(job.hypotheses)} hypotheses"
            )
        return out

    return await asyncio.gather(*(run(job) for job in plan.jobs))


def _pair_results(
    converted: Converted, plan: _Plan, per_part: dict[tuple[PairName, int], list[HypothesisResult]]
) -> list[PairResult]:
    """Each pair's hypotheses (decided by exact match, or the best support across premise parts)."""
    results: list[PairResult] = []
    for name, _passages, hypotheses in plan.pairs:
        if name not in plan.part_counts:
            results.append(PairResult(pair=name))
            continue
        decided = plan.decided[name]
        judged = [
            decided[i] if i in decided else combine_parts(per_part[(name, i)])
            for i in range(len(hypotheses))
            if i in decided or (name, i) in per_part
        ]
        if name == "answer_ground_truth" and plan.alternatives_pair:
            gt = (converted.interaction.ground_truth or "").strip()
            judged = [_best_alternative(gt, judged)]
        score = _mean([h.score for h in judged])
        results.append(
            PairResult(pair=name, hypotheses=judged, score=score, premise_parts=plan.part_counts[name])
        )
    return results


def locate_passages(
    result: HypothesisResult, premise: Premise, context_indices: Sequence[int]
) -> HypothesisResult:
    """The judge's passage of each statement (a position in ``premise.passages``) as the index of the
    evidence passage it came from (``pipeline.evidence.evidence``: the contexts, then the tool passages);
    None where the judge named none, or a position the premise lacks. The same for its supporting
    passages (``supported_by``; positions the premise lacks are left out)."""

    def located(position: int | None) -> int | None:
        if position is None or not 0 <= position < len(premise.passages):
            return None
        index = premise.passages[position].index
        return context_indices[index] if 0 <= index < len(context_indices) else None

    def all_located(positions: list[int] | None) -> list[int] | None:
        if positions is None:
            return None
        found = (located(p) for p in positions)
        return list(dict.fromkeys(i for i in found if i is not None))

    statements = [
        s.model_copy(update={"passage": located(s.passage), "supported_by": all_located(s.supported_by)})
        for s in result.statements
    ]
    return result.model_copy(update={"statements": statements})


async def run_nli(converted: Converted, judge: EntailJudge, settings: Settings) -> NliResult:
    """Judge the three pairs (see the module docstring).

    ``judge``: a Judge, or ``pipeline.nli_grouping.nli_judge(judge, settings)`` to group the cases of
    concurrent interactions into shared prompts.
    """
    watch = Stopwatch()
    plan = _plan(converted, settings)
    outputs = await _judge_jobs(judge, plan)
    per_part: dict[tuple[PairName, int], list[HypothesisResult]] = {}
    calls: list[JudgeCall] = []
    answer_refusal: bool | None = None
    gt_refusal: bool | None = None
    for job, out in zip(plan.jobs, outputs, strict=True):
        calls.extend(out.calls)
        premise = plan.premises[(job.pair, job.part)]
        for index, result in zip(job.indices, out.value.hypotheses, strict=True):
            located = locate_passages(result, premise, plan.context_indices)
            per_part.setdefault((job.pair, index), []).append(located)
        if job.ask_refusal:
            if job.pair == "answer_ground_truth":
                gt_refusal = out.value.refusal
            else:
                answer_refusal = out.value.refusal
    return NliResult(
        interaction_id=converted.interaction.interaction_id,
        digest=converted.digest,
        pairs=_pair_results(converted, plan, per_part),
        calls=calls,
        seconds=watch.seconds(),
        answer_refusal=answer_refusal,
        ground_truth_refusal=gt_refusal,
    )
