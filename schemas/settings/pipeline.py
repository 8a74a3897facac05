"""The evaluation pipeline (``GROUNDWATCH_PIPELINE__*``), and the operating threshold of each
score for a judge kind, app and model."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from schemas.settings.common import NLI_PAIRS, NliPair, Share
from schemas.settings.thresholds import THRESHOLD_KIND, AppThresholds


class PipelineSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    pronoun_replacement: bool = Field(
        True,
        description="ask the judge to replace pronouns in the answer and ground truth (and, in a "
        "conversation, the question) before NLI",
    )
    pronoun_batch_size: int = Field(16, ge=1, description="sentences a prompt")
    pronoun_prefilter: bool = Field(
        True,
        description=(
            "send a pronoun batch only when a sentence after its first holds an English pronoun or "
            "demonstrative (pipeline.convert.ANAPHORS); turn off for answers in other languages"
        ),
    )
    pronoun_history_turns: int = Field(
        6,
        ge=0,
        description="the most recent user and assistant turns of a conversation's history given to the "
        "pronoun prompt to resolve from (system turns never); 0: none",
    )
    pronoun_history_chars: int = Field(
        4_000,
        ge=0,
        description="most characters of history given to the pronoun prompt (the oldest turns go first)",
    )
    nli_mode: Literal["batched", "per_hypothesis"] = Field(
        "batched",
        description=(
            "batched: all hypotheses of a pair share one prompt; per_hypothesis: one call per hypothesis "
            "(the "
            "method's original way)"
        ),
    )
    pairs: list[NliPair] = Field(
        default_factory=lambda: list(NLI_PAIRS),
        min_length=1,
        description=(
            "the NLI pairs judged (by default all three); leaving one out saves its calls, its score is None"
        ),
    )
    refusal_mode: Literal["separate", "same"] = Field(
        "separate",
        description=(
            "separate: refusal prompts of their own, batched across interactions; same: asked inside the "
            "NLI prompt (docs/method.md)"
        ),
    )
    refusal_prefilter: bool = Field(
        True,
        description="only texts with a refusal cue (a word of negation, inability, lack or uncertainty: "
        "pipeline.refusal_phrases.may_refuse) go to the judge's refusal check; others are not refusals "
        "(a name, a number or a date never is one)",
    )
    no_evidence_unanswerable: bool = Field(
        False,
        description="a question without a ground truth or an answerable label, with no evidence at all (no "
        "context with text, no tool result), is unanswerable (answerable_source contexts: "
        "docs/answerability.md); set it for apps that always send what they retrieved, where an empty "
        "retrieval means the documents hold nothing. Off: such a question's answerability is unknown",
    )
    refusal_sentences: int = Field(
        2, ge=1, description="first sentences of the answer and ground truth that the refusal check reads"
    )
    refusal_batch_size: int = Field(8, ge=1, description="texts a prompt")
    hallucination_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description=(
            "context entailment under this = hallucination. Left unset, each judge kind uses its calibrated "
            "default from ``judge_hallucination_thresholds`` (this value for kinds not listed); set (env or "
            "code), it is used for every judge"
        ),
    )
    unsupported_claim_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="a statement scoring under this is an unsupported claim (and not entailed); None: the "
        "interaction's operating threshold of context_entailment (threshold_for), the one its "
        "hallucination flag uses, so a flagged answer always names the statements under it",
    )
    statement_weights: dict[str, NonNegativeFloat] = Field(
        default_factory=dict,
        description="statement tag -> weight in grounded-unit precision (docs/method.md)",
    )
    relevance: bool = Field(
        False,
        description=(
            "score answer relevance to the last user message by embeddings; needs the `embeddings` extra"
        ),
    )
    nli_batch_size: int = Field(16, ge=1, description='hypotheses a prompt in the "batched" NLI mode')
    refusal_linger_ms: float = Field(
        10.0, ge=0, description="a partly full refusal batch waits this long for more texts"
    )
    nli_group_cases: int = Field(
        4,
        ge=1,
        description=(
            '"batched" mode: NLI cases (premise + hypotheses) of concurrent interactions sharing one '
            "prompt, so its instructions are sent once per group (pipeline.nli_grouping); 1 = one case a "
            "prompt. Left unset, each judge kind uses its default from ``judge_nli_group_cases`` (this "
            "value for kinds not listed); set (env or code), it is used for every judge"
        ),
    )
    judge_nli_group_cases: dict[str, PositiveInt] = Field(
        default_factory=lambda: {"local": 1},
        description="nli_group_cases per judge kind when nli_group_cases is not set",
    )
    nli_group_linger_ms: float = Field(
        200.0,
        ge=0,
        description=(
            "a partly full group waits this long for more cases (at 30 interactions/s a group of 4 fills "
            "in ~130 ms; shorter sends more, emptier prompts)"
        ),
    )
    chars_per_token: float = Field(
        3.5, gt=0, description="premise budget: characters per token of the judge's window"
    )
    nli_prompt_overhead_tokens: int = Field(600, ge=0, description="instructions and fences of an NLI prompt")
    nli_output_tokens_per_hypothesis: int = Field(150, ge=0, description="room kept for the verdicts' output")
    min_premise_chars: int = Field(1000, ge=1, description="a premise part is never made smaller than this")
    ground_truth_alternatives: bool = Field(
        True,
        description=(
            'a ground truth "a | b | c" (or metadata gold_answers) is one hypothesis: any alternative will do'
        ),
    )
    exact_match: bool = Field(
        True,
        description=(
            "ground-truth pairs: an alternative the answer contains (normalised) is entailed without a judge "
            "call"
        ),
    )
    # operating thresholds by judge kind; a score at or over the threshold is the positive class
    # (grounded / correct). How they were chosen: docs/accuracy.md, "Why the shipped defaults"; the
    # cascade shares the lexical judge's while its context scores are the lexical judge's
    # (judge.cascade_llm_pairs without context_answer)
    judge_hallucination_thresholds: dict[str, Share] = Field(
        description="hallucination_threshold per judge kind when hallucination_threshold is not set",
        default_factory=lambda: {"lexical": 0.81, "cascade": 0.81},
    )
    correct_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description=(
            "answer_entails_ground_truth at or over this = the answer agrees with the ground truth "
            '("correct"); left unset, each judge kind uses its calibrated default from '
            "``judge_correct_thresholds``"
        ),
    )
    judge_correct_thresholds: dict[str, Share] = Field(
        default_factory=dict, description="correct_threshold per judge kind when correct_threshold is not set"
    )
    app_thresholds: dict[str, AppThresholds] = Field(
        default_factory=dict,
        description=(
            "decision thresholds per app, and per model of an app, over every other threshold setting: "
            '{"wiki-qa": {"hallucination": 0.7, "correct": 0.6, "models": {"beta": {"hallucination": '
            "0.75}}}} (each 0 to 1; a model's value over its app's; what is not given falls back). "
            "groundwatch calibrate prints the value to apply"
        ),
    )

    short_answer_words: int = Field(
        6,
        ge=0,
        description=(
            "an answer of one sentence and at most this many words is judged against the context as the "
            "claim it makes: the question's last sentence followed by the answer (\"Which state is Reno "
            'in? Nevada."), not the bare answer; 0 = off. Left unset, each judge kind uses its default '
            "from ``judge_short_answer_words`` (this value for kinds not listed); set (env or code), it is "
            "used for every judge"
        ),
    )
    judge_short_answer_words: dict[str, NonNegativeInt] = Field(
        # the lexical judge matches words: the question's words are in any retrieved context, so framing
        # would raise the score of every short answer (the cascade's first stage is the lexical judge)
        default_factory=lambda: {"lexical": 0, "cascade": 0},
        description="short_answer_words per judge kind when short_answer_words is not set",
    )

    def short_answer_words_for(self, judge_kind: str) -> int:
        """The short-answer length for a judge kind (``short_answer_words``, see there)."""
        if "short_answer_words" in self.model_fields_set:
            return self.short_answer_words
        return max(0, self.judge_short_answer_words.get(judge_kind, self.short_answer_words))

    def nli_group_cases_for(self, judge_kind: str) -> int:
        """NLI cases a prompt for a judge kind (``nli_group_cases``, see there)."""
        if "nli_group_cases" in self.model_fields_set:
            return self.nli_group_cases
        return max(1, self.judge_nli_group_cases.get(judge_kind, self.nli_group_cases))

    def threshold_for(
        self, score: str, judge_kind: str, app: str | None = None, model: str | None = None
    ) -> float:
        """The operating threshold of a score (``pipeline.report.SCORES`` names) for a judge kind, and
        for an app and model when given.

        Context scores (``context_entailment``, ``grounded_precision``) use the app/model's
        ``app_thresholds`` hallucination value when there is one, else ``hallucination_threshold`` when it
        was set explicitly, else the judge's calibrated default; ground-truth scores
        (``answer_entails_ground_truth``, ``ground_truth_entails_answer``, ``agreement``) likewise
        with the correct values; anything else 0.5.
        """
        kind = THRESHOLD_KIND.get(score)
        if kind is None:
            return 0.5
        if app is not None and app in self.app_thresholds:
            of_app = self.app_thresholds[app]
            of_model = of_app.models.get(model) if model is not None else None
            for found in (of_model, of_app):
                value = getattr(found, kind) if found is not None else None
                if value is not None:
                    return float(value)
        if kind == "hallucination":
            if "hallucination_threshold" in self.model_fields_set:
                return self.hallucination_threshold
            return self.judge_hallucination_thresholds.get(judge_kind, self.hallucination_threshold)
        if "correct_threshold" in self.model_fields_set:
            return self.correct_threshold
        return self.judge_correct_thresholds.get(judge_kind, self.correct_threshold)

    def app_threshold_overrides(
        self, kind: Literal["hallucination", "correct"]
    ) -> list[tuple[str, str, float]]:
        """Every (app, model, threshold) ``app_thresholds`` sets for ``kind``, model '' for a whole app;
        a model's entries come before its app's (the first match wins)."""
        models = [
            (app, model, float(value))
            for app, of_app in sorted(self.app_thresholds.items())
            for model, of_model in sorted(of_app.models.items())
            if (value := getattr(of_model, kind)) is not None
        ]
        apps = [
            (app, "", float(value))
            for app, of_app in sorted(self.app_thresholds.items())
            if (value := getattr(of_app, kind)) is not None
        ]
        return models + apps
