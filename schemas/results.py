"""Intermediate results of each pipeline stage, as they travel between stream processors."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from schemas.citations import AnswerCitations, StatementCitations
from schemas.interaction import Interaction
from schemas.stages import Stage

Verdict = Literal["entailed", "contradicted", "not_stated"]
PairName = Literal["context_answer", "ground_truth_answer", "answer_ground_truth"]

#: the score a verdict contributes to its hypothesis (a hypothesis scores the mean over its statements)
VERDICT_SCORE: dict[str, float] = {"entailed": 1.0, "contradicted": 0.0, "not_stated": 0.0}


class JudgeCall(BaseModel):
    """One call to a judge (an LLM request, or a cache hit, or a lexical decision)."""

    stage: Stage
    judge: str  # "openai", "lexical", ...
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    cost_usd: float = 0.0
    cached: bool = False
    attempts: int = 1
    items: int = 1  # hypotheses / sentences / texts handled by this call
    # latency_ms is the time of the request(s) themselves; wall_ms the caller's whole wait for the call
    # (queueing for a request slot, retries and backoff included); 0 where not measured (cache hits)
    wall_ms: float = 0.0


class CustomScore(BaseModel):
    """One custom evaluator's outcome for one interaction (schemas.evaluators): its score in [0, 1] (1 for a
    flag, a pass), or None when it failed, with why."""

    score: float | None = Field(None, ge=0.0, le=1.0, description="0-1; None: missing (see reason)")
    reason: str = Field("", description="the judge's or function's reason; for a missing score, why")
    version: str = Field("", description="the evaluator's version when it scored")

    @property
    def failure_kind(self) -> str | None:
        """For a missing score, the kind of its reason: the first word(s) before a colon (``timeout``,
        ``raised`` for ``raised ValueError: ...``, ``crashed``, ``bad result``, ``stopped``, ``error``,
        ``no LLM judge``); None for a score."""
        if self.score is not None:
            return None
        head = self.reason.split(":", 1)[0].strip()
        return "raised" if head.startswith("raised") else head or "unknown"


class StatementVerdict(BaseModel):
    """One statement (a substring of a hypothesis) and whether the premise entails it."""

    statement: str
    verdict: Verdict
    reason: str = ""
    tag: str = ""  # e.g. "number", "entity", "claim"
    score: float = Field(ge=0.0, le=1.0)  # 1/0 for an LLM verdict; partial credit where the judge has it
    passage: int | None = Field(
        None,
        ge=0,
        description="the passage the statement was judged against: the one that states or contradicts it, "
        "else the closest (context pair only). A judge gives its position in Premise.passages; the NLI stage "
        "turns it into an index of the evidence: the interaction's contexts, then the tool-result passages "
        "(Evaluation.evidence). None where the judge cannot say, in the ground-truth pairs, and in "
        "evaluations stored before passages were recorded",
    )
    supported_by: list[int] | None = Field(
        None,
        description="the passages that support the statement: each that states it alone, or, when only "
        "several together do, those (context pair only; positions in Premise.passages from a judge, "
        "evidence indices after the NLI stage, as passage). [] when none does; None where the judge was "
        "not asked (citations.enabled off, the ground-truth pairs, verdicts cached before it was asked)",
    )
    citations: StatementCitations | None = Field(
        None,
        description="the statement's citations and whether the cited passages support it (context pair, "
        "an answer that cites; pipeline.citations_check); None otherwise",
    )


class HypothesisResult(BaseModel):
    hypothesis: str
    statements: list[StatementVerdict]
    score: float = Field(ge=0.0, le=1.0)  # mean of its statements' scores


class PairResult(BaseModel):
    """One (premise, hypotheses) pair; score = mean of its hypotheses, None when it has none."""

    pair: PairName
    hypotheses: list[HypothesisResult] = Field(default_factory=list)
    score: float | None = None
    premise_parts: int = 1  # >1 when the premise was split to fit the judge's window


#: every part carries the digest of the interaction it was made from, so the join puts together the
#: parts of one message even when another message has the same interaction_id
DIGEST_DESCRIPTION = (
    "schemas.interaction.interaction_digest of the interaction this part was made from (sha256 of its "
    "canonical JSON); empty in a part that carries none (then the join keys it by interaction_id alone)"
)


class Converted(BaseModel):
    """Output of the sentence-conversion stage (with pronoun replacement)."""

    interaction: Interaction
    digest: str = Field("", description=DIGEST_DESCRIPTION)
    question_sentences: list[str]
    answer_sentences: list[str]  # after pronoun replacement
    ground_truth_sentences: list[str]  # after pronoun replacement; [] when there is no ground truth
    citations: AnswerCitations | None = Field(
        None,
        description="what each answer sentence cites (pipeline.citations), its markers already removed from "
        "answer_sentences; None with citations.enabled off",
    )
    refusal_texts: list[str] = Field(
        default_factory=list,
        description="what the refusal stage classifies: the first pipeline.refusal_sentences sentences of "
        "the answer, then of the ground truth when there is one, as written (before pronoun replacement); "
        "taken from the same split as the sentences above, so no stage splits a text twice",
    )
    calls: list[JudgeCall] = Field(default_factory=list)
    seconds: float = 0.0
    # privacy.mode "judge": placeholder -> the value it replaced in ``interaction``, put back before the
    # evaluation is stored (pipeline.privacy.mask.restore_evaluation)
    originals: dict[str, str] = Field(default_factory=dict)


class NliResult(BaseModel):
    interaction_id: str
    digest: str = Field("", description=DIGEST_DESCRIPTION)
    pairs: list[PairResult]
    calls: list[JudgeCall] = Field(default_factory=list)
    seconds: float = 0.0
    # filled only in the "same" refusal mode (refusal asked inside the NLI prompt)
    answer_refusal: bool | None = None
    ground_truth_refusal: bool | None = None


class RefusalResult(BaseModel):
    interaction_id: str
    digest: str = Field("", description=DIGEST_DESCRIPTION)
    answer_refusal: bool | None
    ground_truth_refusal: bool | None  # None when there is no ground truth
    calls: list[JudgeCall] = Field(default_factory=list)
    seconds: float = 0.0


class JudgeResult(BaseModel):
    """The judge processor's output for one Converted: its NLI and refusal results in one message. A stage
    that failed (dead-lettered under its own name) is None; so is ``refusal`` when the refusal question is
    asked inside the NLI prompt (``refusal_mode`` "same")."""

    interaction_id: str
    digest: str = Field("", description=DIGEST_DESCRIPTION)
    nli: NliResult | None = None
    refusal: RefusalResult | None = None
    custom: dict[str, CustomScore] = Field(
        default_factory=dict, description="the custom evaluators that applied (pipeline.custom_evaluators)"
    )
    custom_calls: list[JudgeCall] = Field(default_factory=list, description="the rubrics' judge calls")
