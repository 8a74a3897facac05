"""Every setting of groundwatch, read from ``GROUNDWATCH_*`` environment variables.

Nested settings use ``__``: ``GROUNDWATCH_JUDGE__MODEL=gpt-4o-mini``,
``GROUNDWATCH_PIPELINE__NLI_MODE=per_hypothesis``. The numbers the seeds give (500/20 characters,
16 sentences a prompt, batches of 8, 32 in flight, first 2 sentences) are the defaults here.
"""

from __future__ import annotations

import difflib
import json
import re
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from schemas.errors import SettingError
from schemas.slice_filter import COLUMNS as SLICE_COLUMNS
from schemas.validation import problems as validation_problems

PREFIX = "GROUNDWATCH_"

JudgeKind = Literal["openai", "local", "lexical", "cascade"]
# the NLI pairs (schemas.results.PairName, which imports this module)
NliPair = Literal["context_answer", "ground_truth_answer", "answer_ground_truth"]
NLI_PAIRS: tuple[NliPair, ...] = ("context_answer", "ground_truth_answer", "answer_ground_truth")
Share = Annotated[float, Field(ge=0, le=1)]  # a score threshold or a share, 0 to 1


class Limits(BaseModel):
    """Size limits on an incoming interaction; a violation names the field and the limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_question_chars: int = Field(20_000, ge=1, description="longest question (characters)")
    max_answer_chars: int = Field(50_000, ge=1, description="longest answer (characters)")
    max_ground_truth_chars: int = Field(50_000, ge=1, description="longest ground truth (characters)")
    max_contexts: int = Field(100, ge=1, description="most retrieved passages an interaction may carry")
    max_context_chars: int = Field(400_000, ge=1, description="most characters of all passages together")
    max_id_chars: int = Field(256, ge=1, description="longest interaction_id (characters)")
    max_document_chars: int = Field(
        1_000,
        ge=1,
        description="longest document name of a passage (characters); document names also count in "
        "max_context_chars, since they go into the judge's prompt",
    )
    max_app_chars: int = Field(200, ge=1, description="longest app name (characters)")
    max_model_chars: int = Field(200, ge=1, description="longest model name (characters)")
    max_conversation_id_chars: int = Field(256, ge=1, description="longest conversation_id (characters)")
    max_history_turns: int = Field(
        50,
        ge=0,
        description="most conversation turns kept before the question (history, from messages); past it "
        "the oldest turns are dropped and the interaction is flagged history_truncated, not refused",
    )
    max_history_chars: int = Field(
        20_000,
        ge=0,
        description="most characters of all history turns together; past it the oldest turns are dropped "
        "(flagged history_truncated, not refused)",
    )
    max_metadata_chars: int = Field(
        20_000, ge=2, description="largest metadata object, as compact JSON (characters)"
    )
    max_steps: int = Field(
        200,
        ge=0,
        description="most tool steps (calls and their results) kept per interaction; past it the earliest "
        "steps are dropped and the interaction is flagged steps_dropped, not refused",
    )
    max_tool_result_chars: int = Field(
        20_000,
        ge=1,
        description="longest tool result kept (characters); a longer one is cut to this and its step "
        "marked truncated, never refused",
    )
    max_tool_arguments_chars: int = Field(
        4_000,
        ge=2,
        description="longest tool-call arguments kept, as compact JSON (characters); longer ones are kept "
        "as their JSON text cut to this, flagged tool_arguments_truncated",
    )
    max_json_depth: int = Field(
        64,
        ge=2,
        description="deepest nesting of objects and arrays in an incoming message (checked before parsing)",
    )
    max_event_age_days: float = Field(
        400.0,
        gt=0,
        description="an interaction stamped more than this many days before the wall clock is rejected "
        "(dead-lettered, stage validate): its windows could never be written or read",
    )
    max_event_future_seconds: float = Field(
        3_600.0,
        ge=0,
        description="an interaction stamped more than this many seconds after the wall clock is rejected "
        "(dead-lettered, stage validate)",
    )


class SplitSettings(BaseModel):
    """Sentence conversion (docs/method.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_sentence_chars: int = Field(
        500,
        ge=1,
        description=(
            "a sentence over this is split on blank lines, then newlines, then into chunks of this size"
        ),
    )
    min_sentence_chars: int = Field(
        20, ge=0, description="a sentence under this joins the next one (the previous one when it is last)"
    )
    keep_lists: bool = Field(True, description="list items stay with the sentence that introduces them")
    keep_tables: bool = Field(True, description="markdown table rows carry their header")

    @model_validator(mode="after")
    def _min_under_max(self) -> SplitSettings:
        if self.min_sentence_chars > self.max_sentence_chars:
            low, high = (
                variable_name("split", "min_sentence_chars"),
                variable_name("split", "max_sentence_chars"),
            )
            raise ValueError(f"{low} ({self.min_sentence_chars}) is above {high} ({self.max_sentence_chars})")
        return self


class ModelPrice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_1k: float = Field(0.0, ge=0, description="USD per 1,000 input tokens")
    output_per_1k: float = Field(0.0, ge=0, description="USD per 1,000 output tokens")


class JudgeSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: JudgeKind = Field(
        "lexical",
        description=(
            "judge: openai (any OpenAI-compatible endpoint), local (llama.cpp started by groundwatch), "
            "lexical "
            "(no model) or cascade (lexical, then an LLM where unsure)"
        ),
    )
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint; None = OpenAI's default")
    model: str = Field("gpt-4o-mini", description="model name sent to the OpenAI-compatible endpoint")
    api_key: SecretStr | None = Field(
        None, description="API key of the endpoint (a secret: never in repr, logs or dead letters)"
    )
    max_in_flight: int = Field(32, ge=1, description="judge requests in flight at once")
    max_retries: int = Field(
        4, ge=0, description="retries of a failed request (429, 5xx, timeouts, unparseable output)"
    )
    backoff_base_s: float = Field(0.5, ge=0, description="first retry delay; doubles each retry, with jitter")
    backoff_max_s: float = Field(8.0, ge=0, description="longest retry delay")
    timeout_s: float = Field(60.0, gt=0, description="timeout of one request to the endpoint")
    temperature: float = Field(0.0, ge=0, le=2, description="sampling temperature of the judge")
    max_output_tokens: int = Field(2048, ge=1, description="most tokens the judge may generate per request")
    structured_output: bool = Field(
        True, description="JSON-schema response_format, plain JSON as the fallback"
    )
    refusal_phrases_first: bool = Field(
        True,
        description=(
            "a text that one of the refusal phrases matches (pipeline.refusal_phrases, the patterns the "
            "lexical judge uses by default) is a refusal without a judge call; the judge decides the rest. "
            'An LLM judge then cannot miss an explicit "the context does not provide" that goes on to '
            "answer anyway (docs/accuracy.md)"
        ),
    )
    verdict_logprobs: int = Field(
        5,
        ge=0,
        le=20,
        description=(
            "graded NLI verdicts: ask the LLM server for this many top token log-probabilities and score "
            "each statement by the probability of its verdict (P(entailed) with the default scores, "
            "pipeline.llm.verdict_probs); 0 = off. A server that gives none, or rejects the request, "
            "leaves each statement its verdict's fixed score"
        ),
    )
    prices: dict[str, ModelPrice] = Field(
        description="USD per 1,000 tokens by model name (an exact name, else the longest prefix), for the "
        "cost of every judge call",
        default_factory=lambda: {
            "gpt-4o-mini": ModelPrice(input_per_1k=0.00015, output_per_1k=0.0006),
            "gpt-4o": ModelPrice(input_per_1k=0.0025, output_per_1k=0.01),
        },
    )
    cache_enabled: bool = Field(
        True, description="cache verdicts by content hash (premise, hypothesis, model, prompt version)"
    )
    cache_path: Path | None = Field(None, description="None: in-memory cache for the life of the process")
    context_window_tokens: int = Field(
        4096,
        ge=1,
        description=(
            "the judge model's window, for models without an entry in ``context_windows`` (and the lexical "
            "judge); premises longer than the window are split. ``pipeline.judges.window.window_tokens`` "
            "picks "
            "the window of the judge in use: local_ctx for `local`, context_windows for `openai`"
        ),
    )
    cascade_llm_pairs: list[NliPair] = Field(
        default_factory=lambda: list[NliPair](["answer_ground_truth"]),
        description=(
            "cascade: the NLI pairs whose unsure hypotheses go to the LLM (context_answer, "
            "ground_truth_answer, answer_ground_truth); a pair not listed is judged by the lexical judge "
            "alone. Default: answer_ground_truth (correctness). With a stronger LLM add the others, and "
            "choose the hallucination threshold again (groundwatch calibrate): docs/accuracy.md, "
            '"Why the shipped defaults"'
        ),
    )
    cascade_unsure_low: float = Field(
        0.2,
        ge=0,
        le=1,
        description="cascade, context pairs (grounding): the lexical verdict is trusted outside "
        "[cascade_unsure_low, cascade_unsure_high]",
    )
    cascade_unsure_high: float = Field(
        0.8,
        ge=0,
        le=1,
        description=(
            "cascade, context pairs: a lexical score at or above this is trusted as supported (under "
            "cascade_unsure_low as unsupported); between them the LLM judges"
        ),
    )
    cascade_ground_truth_unsure_low: float = Field(
        0.0,
        ge=0,
        le=1,
        description="cascade, ground-truth pairs (correctness): the low end of the band the LLM judges",
    )
    cascade_ground_truth_unsure_high: float = Field(
        0.5,
        ge=0,
        le=1,
        description=(
            "cascade, ground-truth pairs (correctness): the high end of the band the LLM judges; above it "
            'the lexical verdict (correct) stands (docs/accuracy.md, "Why the shipped defaults")'
        ),
    )
    local_model_dir: Path = Field(
        Path.home() / ".cache" / "groundwatch" / "models",
        description="where the local judge's model is assembled (llama.cpp server started by groundwatch)",
    )
    local_threads: int = Field(2, ge=1, description="CPU threads of the local llama.cpp server")
    local_ctx: int = Field(4096, ge=1, description="context window (tokens) of the local model")
    local_port: int = Field(0, ge=0, le=65535, description="0 = a free port on 127.0.0.1")
    local_start_timeout_s: float = Field(180.0, gt=0, description="model load + first answer of /v1/models")
    local_timeout_s: float = Field(
        900.0, gt=0, description="one request to the local server (on a few CPU cores: minutes under load)"
    )
    local_max_in_flight: int = Field(1, ge=1, description="llama.cpp's server answers one request at a time")
    local_verdict_logprobs: int = Field(
        0,
        ge=0,
        le=20,
        description=(
            "verdict_logprobs of the local judge: off by default, because llama-cpp-python's server computes "
            'top log-probabilities in Python, several times slower (docs/accuracy.md, "Why the shipped '
            'defaults")'
        ),
    )
    cache_max_entries: int = Field(100_000, ge=1, description="in-memory verdict cache (LRU)")
    cascade_llm: Literal["openai", "local"] = Field(
        "local", description="the LLM behind the cascade's unsure cases"
    )
    cascade_llm_refusals: bool = Field(
        False,
        description=(
            "ask the cascade's LLM about texts the refusal phrases do not flag. Off by default: the phrases "
            'alone do better than the default local model (docs/accuracy.md, "Why the shipped defaults")'
        ),
    )
    # context window (tokens) per hosted model, like ``prices``: an exact name, else the longest name the
    # model starts with (dated snapshots); models not listed use ``context_window_tokens``
    context_windows: dict[str, PositiveInt] = Field(
        description="context window (tokens) per hosted model, like prices",
        default_factory=lambda: {"gpt-4o-mini": 128_000, "gpt-4o": 128_000},
    )

    @model_validator(mode="after")
    def _ordered(self) -> JudgeSettings:
        pairs = [
            ("cascade_unsure_low", "cascade_unsure_high"),
            ("cascade_ground_truth_unsure_low", "cascade_ground_truth_unsure_high"),
            ("backoff_base_s", "backoff_max_s"),
        ]
        for low, high in pairs:
            if getattr(self, low) > getattr(self, high):
                raise ValueError(
                    f"{variable_name('judge', low)} ({getattr(self, low)}) is above "
                    f"{variable_name('judge', high)} ({getattr(self, high)})"
                )
        return self


class Thresholds(BaseModel):
    """Decision thresholds of one model of an app (``PipelineSettings.app_thresholds``); unset: the
    app's, else the worker's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hallucination: Share | None = Field(
        None, description="context entailment under this = hallucination (as hallucination_threshold)"
    )
    correct: Share | None = Field(
        None, description="answer_entails_ground_truth at or over this = correct (as correct_threshold)"
    )


class AppThresholds(Thresholds):
    """Decision thresholds of one app, and of some of its models (``PipelineSettings.app_thresholds``)."""

    models: dict[str, Thresholds] = Field(
        default_factory=dict, description="model -> thresholds of that model of the app, over the app's"
    )


#: which threshold of ``Thresholds`` decides a score (pipeline.report.SCORES names)
_THRESHOLD_KIND: dict[str, Literal["hallucination", "correct"]] = {
    "context_entailment": "hallucination",
    "grounded_precision": "hallucination",
    "answer_entails_ground_truth": "correct",
    "ground_truth_entails_answer": "correct",
    "agreement": "correct",
}


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
    unsupported_claim_threshold: float = Field(
        0.5, ge=0, le=1, description="statement score under this = unsupported claim"
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
        kind = _THRESHOLD_KIND.get(score)
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


class KafkaSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    broker: str = Field(
        "kafka://127.0.0.1:9092",
        description="bootstrap servers, faust style: kafka://h1:9092;kafka://h2:9092",
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT",
        description=(
            "security (production Kafka, MSK, Redpanda Cloud): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
        ),
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(
        "PLAIN", description="SASL mechanism (with SASL_PLAINTEXT or SASL_SSL)"
    )
    sasl_username: str | None = Field(None, description="SASL user name")
    sasl_password: SecretStr | None = Field(None, description="SASL password (a secret)")
    ssl_cafile: Path | None = Field(None, description="None: the system's CA bundle")
    ssl_certfile: Path | None = Field(None, description="client certificate (mutual TLS)")
    ssl_keyfile: Path | None = Field(None, description="private key of the client certificate (mutual TLS)")
    topic_prefix: str = Field(
        "groundwatch.",
        max_length=200,
        pattern=r"^[A-Za-z0-9._-]*$",
        description=(
            "prefix of every topic name (interactions, converted, judged, evaluations, alerts, deadletter); "
            "letters, digits, '.', '_' and '-' only, as Kafka topic names allow"
        ),
    )
    partitions: int = Field(
        4, ge=1, description="partitions of every topic (co-partitioned by interaction_id)"
    )
    replicas: int = Field(1, ge=1, description="replication factor of the topics groundwatch creates")
    consumer_group: str = Field(
        "groundwatch",
        description="Kafka consumer group of the workers (workers in one group share the partitions)",
    )
    stage_concurrency: int = Field(
        128,
        ge=1,
        description=(
            "interactions in flight inside each processor (and the default concurrency of groundwatch eval); "
            "grouped NLI sends ~4 interactions a call, so filling the judge's max_in_flight takes several "
            "times as many interactions in flight"
        ),
    )
    join_timeout_s: float | None = Field(
        None,
        gt=0,
        description=(
            "how long the join waits for an interaction's parts before it emits what it has (incomplete). "
            "None "
            "(the default): derived at start from the judge's worst case for one call, see "
            "``streams.join.join_timeout``: 2 x ((max_retries + 1) x timeout_s + the backoffs) for an HTTP "
            "judge, 2 x local_timeout_s for the local one, at least 120 s. A set value under that worst "
            "case is"
            " used but logged as a warning (late parts still complete the Evaluation: see join_emitted_cache)"
        ),
    )
    join_emitted_cache: int = Field(
        10_000,
        ge=0,
        description=(
            "Converted of interactions emitted recently (LRU, by interaction_id): a part that arrives after"
            " its"
            " interaction was emitted incomplete rebuilds and re-emits the complete Evaluation"
        ),
    )
    deadletter_max_bytes: int = Field(
        256_000,
        ge=1024,
        description=(
            "a dead letter's payload over this many bytes (UTF-8) is cut to this budget (its prefix, with "
            "the "
            "sha256 and byte length of the whole); the original interaction is dropped when over it. Keep it "
            "well under the broker's max message size (1 MB by default)"
        ),
    )
    deadletter_attempts: int = Field(
        5,
        ge=1,
        description=(
            "attempts (with backoff) to send what must not be lost: an Evaluation the join cannot send is "
            "then dead-lettered; a dead letter that cannot be sent (the producer fails) is then given up "
            "and its message acked with an ERROR log naming its topic, partition and offset, so one "
            "message never blocks its partition for ever"
        ),
    )
    start_offset: Literal["latest", "earliest"] = Field(
        "latest",
        description=(
            "where a new consumer group starts reading the input topics (interactions, otlp, otlp_logs): "
            "latest = only what is produced from its first start on; earliest = everything the topic retains "
            "(every retained interaction is judged again). A group that has committed offsets resumes "
            "from them either way; the topics between stages are always read from their start"
        ),
    )
    session_timeout_s: float = Field(
        60.0,
        gt=0,
        description="Kafka consumer session timeout (faust's default; the embedded broker of the demo and "
        "tests uses 6, groundwatch.local.tansu.worker_env)",
    )
    heartbeat_interval_s: float = Field(
        3.0, gt=0, description="Kafka consumer heartbeat interval; under session_timeout_s"
    )
    rebalance_timeout_s: float = Field(
        60.0, gt=0, description="Kafka consumer group rebalance timeout (faust's default)"
    )
    web_port: int = Field(
        6066, ge=1, le=65535, description="port of the worker's web server (dashboard at /dashboard/)"
    )
    otlp_input: bool = Field(
        False,
        description="also read OpenTelemetry traces (OTLP/JSON export requests, as an OpenTelemetry "
        "Collector's Kafka exporter writes them with encoding otlp_json) from the topic <prefix>otlp",
    )
    otlp_logs_input: bool = Field(
        False,
        description="also read OpenTelemetry logs (OTLP/JSON, the Collector's Kafka logs exporter with "
        "encoding otlp_json) from the topic <prefix>otlp_logs: the GenAI events that carry a model call's "
        "messages when an instrumentation records them as log events; joined to their span by trace and "
        "span id when otlp_input is on too",
    )
    otlp_hold_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="how long the pieces of one OpenTelemetry trace (its model calls' spans and log records, "
        "its tool spans, its other spans, its retrieved passages) are held waiting for the rest (its root "
        "span, each call's content) when they arrive apart; then its final answer is evaluated with what "
        "came (a tool call without its result is a step without one), or its calls dead-lettered (stage "
        "otlp) with the reason. Its export requests are acked only then, so this also delays their commit",
    )
    otlp_http_max_bytes: int = Field(
        1_000_000,
        ge=1024,
        description="largest OTLP/HTTP request body the worker's web server takes on POST /v1/traces and "
        "/v1/logs (as sent, unpacked from gzip, and as the OTLP/JSON message produced to Kafka; the broker's "
        "and the producer's message size limits must allow it); larger ones are answered 413",
    )
    web_enabled: bool = Field(
        False,
        description=(
            "faust's HTTP server (on dashboard.host:web_port): serves the built-in dashboard at /dashboard/"
        ),
    )
    commit_interval_s: float = Field(1.0, gt=0, description="how often processed offsets are committed")
    topic_check_seconds: float = Field(
        5.0,
        gt=0,
        description=(
            "how often the worker checks that its topics still exist on the broker with the partitions "
            "they had; when they are gone or changed at two checks in a row (a broker restarted with "
            "empty storage) the worker stops with one line and exit code 2, so that its supervisor "
            "restarts it (a new start recreates the topics)"
        ),
    )
    shutdown_timeout_s: float = Field(
        30.0,
        gt=0,
        description=(
            "a stop (SIGTERM or SIGINT) still running after this many seconds ends the process with one "
            "line and exit code 2; events not acked yet are read again at the next start"
        ),
    )
    producer_linger_s: float = Field(
        0.005, ge=0, description="batch a stage's outputs this long before sending"
    )
    fetch_max_wait_s: float = Field(
        0.1,
        gt=0,
        le=30,
        description=(
            "longest a consumer fetch waits on the broker for new messages (faust's own is 1.5 s); a broker "
            "that does not answer a waiting fetch early when messages arrive (the embedded Tansu) adds up to "
            "this much latency to every topic hop; a broker that does (Kafka) only answers idle fetches "
            "this often"
        ),
    )
    topology: Literal["staged", "fused"] = Field(
        "staged",
        description=(
            '"staged": convert -> judge (NLI and refusal) -> join, one topic a hop (stages scale and fail '
            'apart); "fused": one processor runs every stage of an interaction (interactions -> '
            "evaluations), fewer Kafka hops; a stage failure dead-letters the interaction instead of an "
            "incomplete Evaluation"
        ),
    )
    datadir: Path | None = Field(
        None, description="faust's data directory; None: a temporary directory per worker"
    )

    @model_validator(mode="after")
    def _heartbeat_within_session(self) -> KafkaSettings:
        if self.heartbeat_interval_s >= self.session_timeout_s:
            raise ValueError(
                f"{variable_name('kafka', 'heartbeat_interval_s')} ({self.heartbeat_interval_s}) must be "
                f"under {variable_name('kafka', 'session_timeout_s')} ({self.session_timeout_s})"
            )
        return self


class ClickHouseSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    url: SecretStr = Field(
        SecretStr("chdb:///" + str(Path.cwd() / ".groundwatch" / "chdb")),
        description=(
            "chdb:///abs/path (embedded) or http(s)://user:password@host:port/database; a secret (the URL "
            "carries the password): repr() and logs never show it, pass it via the environment"
        ),
    )
    ttl_days: int = Field(
        90,
        ge=1,
        description=(
            "retention of the tables that hold texts or point at one interaction (evaluations, "
            "evaluation_statements, dead_letters, labels), counted from when a row was written"
        ),
    )
    aggregate_ttl_days: int = Field(
        395,
        ge=1,
        description=(
            "retention of the tables without texts (window_aggregates, alerts, alert_deliveries, erasures), "
            "counted from when a row was written"
        ),
    )
    store_payload: bool = Field(
        True,
        description=(
            "keep the texts: the evaluation's JSON with its interaction (payload), the statements, the "
            "unsupported claims; false: scores, flags, counts and statement verdicts without any text"
        ),
    )
    batch_rows: int = Field(500, ge=1, description="evaluations buffered before a ClickHouse insert")
    batch_seconds: float = Field(
        0.25,
        gt=0,
        description=(
            "longest an evaluation waits in the buffer before an insert (checked 4 times as often); under "
            "load batches fill to batch_rows first"
        ),
    )
    database: str = Field(
        "groundwatch", description="used when the URL names none (chdb:///path, http://host:8123)"
    )
    status_file: Path | None = Field(
        None,
        description=(
            "the worker writes its table counts here after each flush (JSON): how a demo or a test follows "
            "an "
            "embedded chDB that only the worker's process may open"
        ),
    )
    migrations_dir: Path | None = Field(
        None, description="versioned DDL (NNN_name.sql); None: the repository's deploy/clickhouse"
    )
    sink_max_failures: int = Field(
        5,
        ge=1,
        description=(
            "a batch that fails this many flushes in a row is split in halves to find the row ClickHouse "
            'rejects; that row goes to deadletter (stage "sink") and the rest are written'
        ),
    )
    dead_letter_batch_rows: int = Field(
        500,
        ge=1,
        description="dead-letter rows buffered before a ClickHouse insert (each letter is acked once the "
        "insert holding its row succeeded)",
    )
    dead_letter_batch_seconds: float = Field(
        0.5,
        gt=0,
        description="longest a dead-letter row waits in the buffer before an insert (checked 4 times as "
        "often); a flood fills batches to dead_letter_batch_rows first",
    )
    cluster: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description=(
            "a ClickHouse cluster name (remote_servers): migrations run ON CLUSTER with Replicated engines "
            "(macros {shard}, {replica}); None: one server, or ClickHouse Cloud (SharedMergeTree: no "
            "cluster needed)"
        ),
    )
    distributed: bool = Field(
        False,
        description=(
            "with cluster: also keep a Distributed table <table>_all per table, to read every shard from "
            "one place; the worker writes and reads its node's tables"
        ),
    )

    @model_validator(mode="after")
    def _distributed_needs_cluster(self) -> ClickHouseSettings:
        if self.distributed and self.cluster is None:
            raise ValueError("distributed needs a cluster (set clickhouse.cluster)")
        return self


class WindowSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    size_seconds: int = Field(60, ge=1, description="tumbling window size")
    grace_seconds: int = Field(
        5,
        ge=0,
        description="a window closes once its app and model's event-time watermark is this far past its end",
    )
    idle_close_seconds: float = Field(
        10.0,
        ge=0,
        description=(
            "a window also closes when no row has landed in it for this long (wall clock), so the last "
            "window "
            "of a stream that goes quiet is written; later rows reopen and recompute it"
        ),
    )
    tick_seconds: float = Field(1.0, gt=0, description="how often due windows are looked for")
    reconcile_hours: float = Field(
        24.0, gt=0, description="at start, recompute windows left unclosed this far back"
    )
    max_skew_seconds: float = Field(
        300.0,
        ge=0,
        description=(
            "the event-time watermark (one per app and model) takes no timestamp beyond wall clock + this: "
            "one "
            "event stamped in the future cannot close windows early"
        ),
    )
    max_close_attempts: int = Field(
        5,
        ge=1,
        description="a window whose close fails this many ticks in a row is dropped from the pending "
        "windows with an ERROR log naming it (the other windows are closed regardless)",
    )
    close_batch: int = Field(
        100,
        ge=1,
        le=10_000,
        description="due windows closed together: their rows read in one query per app and model and "
        "their aggregates written in one insert, oldest first. A stop closes the pending windows in such "
        "batches for at most a third of kafka.shutdown_timeout_s, and leaves the rest (logged) for the "
        "next start to recompute",
    )


class ConversationSettings(BaseModel):
    """Conversation rollups (pipeline.conversations, streams.windows.conversations)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = Field(
        True,
        description="roll the turns of each conversation (app, model, conversation_id) up into a "
        "conversations row when it closes, and count conversation metrics in the windows",
    )
    idle_seconds: float = Field(
        1800.0,
        gt=0,
        description="a conversation closes once its app and model's event-time watermark is this far past "
        "its last turn (or, on a quiet stream, no turn of it has arrived for this long on the wall clock); "
        "a turn with metadata.conversation_end true closes it at once. A later turn reopens it and its row "
        "is written again",
    )
    quiet_seconds: float | None = Field(
        None,
        gt=0,
        description="on a stream gone quiet, a conversation whose last turn is idle_seconds old closes after "
        "this many seconds without a turn of it on the wall clock (none: idle_seconds); a replay of old "
        "traffic sets it low so its last conversations close soon after it ends",
    )
    reask_similarity: float = Field(
        0.35,
        gt=0,
        le=1,
        description="a user turn is a re-ask when the Jaccard similarity of its content words with an "
        "earlier user turn's of the conversation reaches this (chosen by grouped cross-validation on "
        "planted re-asks: benchmarks/conversation_detection.py)",
    )
    close_batch: int = Field(
        200, ge=1, le=10_000, description="due conversations closed together (one read per app and model)"
    )


class AlertSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rules_file: Path | None = Field(
        None, description="YAML alert rules (deploy/alerts/rules.example.yaml); none: no alerts"
    )
    webhook_url: SecretStr | None = Field(
        None,
        description="Slack-compatible webhook the alerts are posted to; a secret (hook URLs are "
        "credentials): pass it via the environment",
    )
    webhook_retries: int = Field(3, ge=0, description="retries of a failed webhook post")
    webhook_backoff_s: float = Field(0.5, ge=0, description="first webhook retry delay (doubles)")
    webhook_timeout_s: float = Field(5.0, gt=0, description="timeout of one webhook post")
    delivery_lease_s: float = Field(
        600.0,
        gt=0,
        description="a delivery claimed this long ago with no outcome recorded is taken over by another "
        "worker (its claimant stopped mid-send); longer than a send with all its retries takes",
    )
    redeliver_hours: float = Field(
        24.0,
        gt=0,
        description="how far back a worker looks for transitions whose notification was never recorded",
    )


class SamplingSettings(BaseModel):
    """Which interactions are judged (pipeline.sampling; docs/sampling.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default_rate: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="share of interactions judged when no sampling rule matches (by a stable hash of the "
        "interaction id: a replay or another worker decides the same); the others are stored unjudged",
    )
    rules_file: Path | None = Field(
        None,
        description="YAML/JSON sampling rules and judge budgets (deploy/sampling/rules.example.yaml); "
        "none: no rules, no budget",
    )


class EvaluatorsSettings(BaseModel):
    """Your own evaluators (schemas.evaluators; docs/evaluators.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    file: Path | None = Field(
        None,
        description="YAML/JSON file of your evaluators (pattern, python, rubric; deploy/evaluators/); each "
        "becomes the metric custom.<name>. A file that does not validate stops the worker at start. "
        "none: no custom evaluators",
    )
    wait_after_core_s: float = Field(
        5.0,
        ge=0.0,
        le=600.0,
        description="once an interaction's core verdicts are in, how long its custom evaluators still "
        "running may take before they are given up (their scores missing, reason timeout): a slow "
        "evaluator never holds the core verdicts longer than this",
    )
    python_threads: int = Field(
        4, ge=1, le=64, description="threads running python evaluators, per evaluator (off the event loop)"
    )


#: dimensions every evaluation carries beside the configured metadata paths (pipeline/dimensions.py)
BUILTIN_DIMENSIONS: tuple[str, ...] = ("answer_length", "has_ground_truth", "turn", "tool")
_DIMENSION_PATH = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")


class DimensionSettings(BaseModel):
    """What evaluations are sliced by (docs/slices.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    paths: list[str] = Field(
        default_factory=lambda: ["prompt_version", "retriever", "locale", "customer.tier"],
        max_length=32,
        description="metadata paths stored as dimensions of each evaluation (a dot reaches into a nested "
        "object: customer.tier); an interaction without one has no value for it. The built-ins "
        "answer_length, has_ground_truth, turn and tool (the tools called) are always stored",
    )
    max_values_per_day: int = Field(
        100,
        ge=1,
        le=100_000,
        description="distinct values a dimension keeps per UTC day (by event time); values past it are "
        "stored as (other), so a high-cardinality key cannot blow up storage or queries",
    )
    max_value_chars: int = Field(
        100, ge=1, le=1000, description="a dimension value is cut to this many characters"
    )

    @field_validator("paths")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        for path in value:
            if not 0 < len(path) <= 64 or not _DIMENSION_PATH.match(path):
                raise ValueError(
                    f"{path!r} is not a metadata path: letters, digits, _ and -, parts joined by dots, "
                    "at most 64 characters"
                )
            if path in BUILTIN_DIMENSIONS:
                raise ValueError(f"{path!r} is a built-in dimension: it is always stored")
            if path in SLICE_COLUMNS:
                raise ValueError(f"{path!r} names the {path} column in a slice filter ({path}:...)")
        dup = sorted({p for p in value if value.count(p) > 1})
        if dup:
            raise ValueError(f"paths given twice: {', '.join(dup)}")
        return value

    @property
    def names(self) -> tuple[str, ...]:
        """Every dimension an evaluation may carry: the configured paths, then the built-ins."""
        return (*self.paths, *BUILTIN_DIMENSIONS)


PrivacyMode = Literal["off", "judge", "all"]
#: what the detectors find without a spaCy model (Presidio's entity names)
PATTERN_ENTITIES: tuple[str, ...] = (
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "CREDIT_CARD",
    "IBAN_CODE",
    "IP_ADDRESS",
    "US_SSN",
    "URL",
)
#: what needs a spaCy model with a named-entity recogniser (``privacy.spacy_model``)
NLP_ENTITIES: tuple[str, ...] = ("PERSON", "LOCATION")
_ENTITY_NAME = r"^[A-Z][A-Z0-9_]{0,31}$"


class PrivacySettings(BaseModel):
    """Personal data in the texts (pipeline.privacy; docs/privacy.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: PrivacyMode = Field(
        "off",
        description=(
            "off: texts as they are; judge: the judge sees placeholders (<EMAIL_1>), ClickHouse keeps the "
            "originals; all: the judge, ClickHouse, dead letters, logs and the dashboard see placeholders "
            "only (needs the extra privacy)"
        ),
    )
    entities: list[str] = Field(
        default_factory=lambda: list(PATTERN_ENTITIES),
        description=(
            "Presidio entity types detected: "
            + ", ".join(PATTERN_ENTITIES)
            + "; "
            + " and ".join(NLP_ENTITIES)
            + " only with spacy_model"
        ),
    )
    patterns: dict[Annotated[str, Field(pattern=_ENTITY_NAME)], str] = Field(
        default_factory=dict,
        description=(
            'your own patterns, entity name -> regular expression (e.g. {"CUSTOMER_ID": "CUS-[0-9]{8}"}); '
            "a match becomes <CUSTOMER_ID_1>"
        ),
    )
    deny_lists: dict[Annotated[str, Field(pattern=_ENTITY_NAME)], list[str]] = Field(
        default_factory=dict,
        description='words always masked, entity name -> words (e.g. {"PROJECT": ["Bluebird"]})',
    )
    min_score: Share = Field(
        0.3, description="the least detector confidence masked (Presidio's score, 0 to 1)"
    )
    pseudonym_key: SecretStr | None = Field(
        None,
        description=(
            "a secret: with it a value's placeholder is a keyed hash (<EMAIL_3f9a0c2d1b7e>), the same in "
            "every interaction, so one person can be followed and erased (groundwatch erase --pseudonym) "
            "without the value being stored; none: numbered per interaction (<EMAIL_1>)"
        ),
    )
    spacy_model: str | None = Field(
        None,
        description=(
            "an installed spaCy model package (e.g. en_core_web_sm) for "
            + " and ".join(NLP_ENTITIES)
            + "; loaded from the environment, never downloaded; none: a blank English tokenizer and "
            "pattern detectors only"
        ),
    )

    @model_validator(mode="after")
    def _known_entities(self) -> PrivacySettings:
        allowed = set(PATTERN_ENTITIES) | (set(NLP_ENTITIES) if self.spacy_model else set())
        unknown = sorted(set(self.entities) - allowed)
        if unknown:
            hint = " (PERSON and LOCATION need spacy_model)" if set(unknown) & set(NLP_ENTITIES) else ""
            raise ValueError(
                f"{variable_name('privacy', 'entities')}: unknown {', '.join(unknown)}{hint}; "
                f"known: {', '.join(sorted(allowed))}"
            )
        for name, pattern in self.patterns.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{variable_name('privacy', 'patterns')} ({name}): {exc}") from None
        return self


#: shortest dashboard token accepted: it is the only credential in front of a dashboard beyond loopback
DASHBOARD_TOKEN_MIN_CHARS = 16


class DashboardSettings(BaseModel):
    """The built-in dashboard, on the worker's web server and in ``groundwatch dashboard``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = Field(
        "127.0.0.1",
        description="address the worker's web server (and `groundwatch dashboard` by default) binds; any "
        "address but loopback needs a token or a username and password",
    )
    token: SecretStr | None = Field(
        None,
        description="bearer token the dashboard and its API require (header or ?token= once); at least "
        f"{DASHBOARD_TOKEN_MIN_CHARS} characters, not blank",
    )
    username: str | None = Field(
        None, description="basic-auth user the dashboard requires (with password); not blank"
    )
    password: SecretStr | None = Field(None, description="basic-auth password (with username); not blank")
    refresh_seconds: int = Field(30, ge=5, le=3600, description="how often an open page reloads its data")

    @property
    def has_credentials(self) -> bool:
        return bool(self.token and self.token.get_secret_value()) or bool(
            self.username and self.password and self.password.get_secret_value()
        )

    @model_validator(mode="after")
    def _both_or_neither(self) -> DashboardSettings:
        if bool(self.username) != bool(self.password):
            raise ValueError("dashboard username and password go together")
        return self

    @model_validator(mode="after")
    def _credentials_are_usable(self) -> DashboardSettings:
        """A credential that is set counts, so it must be worth something: no blank token, user or
        password, no token short enough to guess."""
        token = self.token.get_secret_value() if self.token is not None else None
        if token is not None and (not token.strip() or len(token) < DASHBOARD_TOKEN_MIN_CHARS):
            raise ValueError(
                f"the dashboard token must be at least {DASHBOARD_TOKEN_MIN_CHARS} characters and not blank "
                f"(it has {len(token)})"
            )
        password = self.password.get_secret_value() if self.password is not None else None
        for name, value in (("username", self.username), ("password", password)):
            if value is not None and not value.strip():
                raise ValueError(f"the dashboard {name} is blank")
        return self


class FeedbackRule(BaseModel):
    """How end users' thumbs in an interaction's metadata become labels (source ``end_user``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field("feedback", min_length=1, description="the metadata key holding the end user's verdict")
    kind: Literal["grounded", "correct"] = Field(
        "grounded", description="the label kind a verdict stands for: grounded or correct"
    )
    values: dict[str, Literal[0, 1]] = Field(
        min_length=1,
        description='the label value of each verdict, e.g. {"up": 1, "down": 0, "1": 1, "-1": 0}; verdicts '
        'are matched as text, trimmed and in lower case (the number -1 as "-1", true as "true"); a '
        "verdict not listed gives no label",
    )

    @field_validator("values")
    @classmethod
    def _normalised(cls, value: dict[str, int]) -> dict[str, int]:
        out: dict[str, int] = {}
        for verdict, label in value.items():
            key = verdict.strip().lower()
            if not key:
                raise ValueError("a verdict must not be blank")
            if key in out and out[key] != label:
                raise ValueError(f"the verdict {key!r} is given twice with different values")
            out[key] = label
        return out


class LabelsSettings(BaseModel):
    """People's labels: the review queue, and when agreement may correct a rate (docs/trust.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    review_rate: float = Field(
        0.02,
        gt=0.0,
        le=1.0,
        description="share of each app/model's judged interactions the review queue draws uniformly (by a "
        "stable hash of the interaction id, so the draw is the same in every process)",
    )
    review_near_threshold_rate: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="share drawn among interactions whose context entailment is within "
        "review_near_threshold_band of the hallucination threshold (the judge's unsure cases); 0: none. "
        "Agreement weights every label by the inverse of its chance of being drawn",
    )
    review_near_threshold_band: float = Field(
        0.1, gt=0.0, le=1.0, description="half-width of the band around the threshold counted as near it"
    )
    weekly_target: int = Field(
        50, ge=1, description="labels a week the review queue aims at per app/model (its progress bar)"
    )
    min_per_class: int = Field(
        20,
        ge=1,
        description="labels of each class (condition seen / not seen) an app/model needs before its rate is "
        "corrected for the judge's errors",
    )
    include_end_user: bool = Field(
        False,
        description="count end users' labels (source end_user) in the judge's agreement; off: they are kept "
        "and shown apart",
    )
    bootstrap_resamples: int = Field(
        1000, ge=0, le=100_000, description="bootstrap resamples behind every agreement interval (0: none)"
    )
    end_user_feedback: FeedbackRule | None = Field(
        None,
        description="turn end users' thumbs (metadata.feedback) into end_user labels as the worker stores "
        'interactions, e.g. {"kind": "grounded", "values": {"up": 1, "down": 0}}; unset: none',
    )
    gauge_refresh_seconds: float = Field(
        300.0,
        gt=0,
        description="how often the worker reads the judge's agreement for its Prometheus gauges "
        "(groundwatch_judge_*)",
    )
    gauge_period_days: int = Field(
        30,
        ge=1,
        le=400,
        description="the labeled interactions the Prometheus agreement gauges cover: the last N days",
    )


class ToolSettings(BaseModel):
    """Tool calls and their results (docs/input.md "Agents and tools")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    evidence: bool = Field(
        True,
        description="a tool's result the model received before answering is evidence for grounding beside "
        "the contexts (split into passages, named by tool and call id)",
    )
    evidence_allow: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="only these tools' results are evidence (names as called); empty: every tool",
    )
    evidence_deny: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="these tools' results are never evidence (applied after evidence_allow)",
    )
    evidence_earlier_turns: bool = Field(
        True,
        description="results of tool calls made for earlier user turns of the conversation count as "
        "evidence too (the model saw them); false: only the current question's calls",
    )
    max_evidence_passages: int = Field(
        50,
        ge=1,
        le=1000,
        description="most passages one tool result is split into (a JSON list of documents gives one "
        "each); the rest of the result is the last passage",
    )
    argument_min_chars: int = Field(
        3,
        ge=1,
        le=100,
        description="an argument value shorter than this (characters) is never checked for grounding "
        "(ungrounded tool arguments)",
    )
    argument_judge: Literal["lexical", "llm"] = Field(
        "lexical",
        description="who decides ungrounded tool arguments: lexical (a value must appear in the "
        "conversation or an earlier tool result, pipeline.tool_arguments); llm: the values the lexical check "
        "does not find are sent to the LLM judge (judge.kind openai, local or cascade) in one call per "
        "interaction, and those it finds supported (a date given in words, a normalised id) are dropped; "
        "without an LLM judge, or when the call fails, the lexical result stands "
        "(pipeline.argument_judge)",
    )

    @field_validator("evidence_allow", "evidence_deny")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        blank = [v for v in value if not v.strip()]
        if blank:
            raise ValueError("a tool name is blank")
        return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The environment is read by ``_CheckedEnvSource``: a GROUNDWATCH_* variable that names no
        setting stops the load."""
        return init_settings, _CheckedEnvSource(settings_cls), dotenv_settings, file_secret_settings

    limits: Limits = Field(default_factory=Limits, description="size limits on incoming interactions")
    split: SplitSettings = Field(default_factory=SplitSettings, description="sentence conversion")
    judge: JudgeSettings = Field(
        default_factory=JudgeSettings, description="the judge (LLM endpoint, local model or lexical)"
    )
    pipeline: PipelineSettings = Field(
        default_factory=PipelineSettings, description="the evaluation pipeline"
    )
    kafka: KafkaSettings = Field(
        default_factory=KafkaSettings, description="Kafka connection, topics and stream processing"
    )
    clickhouse: ClickHouseSettings = Field(
        default_factory=ClickHouseSettings, description="ClickHouse connection, retention and sink"
    )
    window: WindowSettings = Field(default_factory=WindowSettings, description="tumbling windows")
    conversations: ConversationSettings = Field(
        default_factory=ConversationSettings, description="conversation rollups and their metrics"
    )
    alerts: AlertSettings = Field(default_factory=AlertSettings, description="alert rules and webhook")
    sampling: SamplingSettings = Field(
        default_factory=SamplingSettings, description="sampling rules and judge budgets"
    )
    dashboard: DashboardSettings = Field(
        default_factory=DashboardSettings, description="the built-in dashboard"
    )
    labels: LabelsSettings = Field(
        default_factory=LabelsSettings, description="people's labels, the review queue and agreement"
    )
    dimensions: DimensionSettings = Field(
        default_factory=DimensionSettings, description="metadata dimensions evaluations are sliced by"
    )
    privacy: PrivacySettings = Field(
        default_factory=PrivacySettings, description="personal data: masking before the judge and storage"
    )
    tools: ToolSettings = Field(
        default_factory=ToolSettings, description="tool calls: their results as evidence, their arguments"
    )
    evaluators: EvaluatorsSettings = Field(
        default_factory=EvaluatorsSettings, description="your own evaluators (custom.<name> metrics)"
    )

    def with_changes(self, **sections: Mapping[str, Any] | BaseModel) -> Settings:
        """A validated copy with fields of some sections changed (settings are frozen), e.g.
        ``settings.with_changes(judge={"kind": "local"}, kafka={"broker": url})``. Fields set before
        stay set and the changed ones become set (per-judge defaults look at which fields were set)."""
        data: dict[str, Any] = {
            name: getattr(self, name).model_dump(exclude_unset=True) for name in self.model_fields_set
        }
        for name, fields in sections.items():
            if name not in type(self).model_fields:
                raise ValueError(f"no settings section {name!r}")
            values = fields.model_dump(exclude_unset=True) if isinstance(fields, BaseModel) else dict(fields)
            data[name] = {**data.get(name, {}), **values}
        return type(self).from_values(data)

    @classmethod
    def from_values(cls, data: Mapping[str, Any]) -> Settings:
        """Settings from these values and the defaults only, never the environment (``model_validate``
        of a BaseSettings reads it): each section is validated by its own model."""
        unknown = sorted(set(data) - set(cls.model_fields))
        if unknown:
            raise ValueError(f"unknown settings sections: {', '.join(unknown)}")
        sections: dict[str, Any] = {}
        problems: list[Any] = []
        for name, value in data.items():
            model = cls.model_fields[name].annotation
            assert isinstance(model, type) and issubclass(model, BaseModel)
            try:
                sections[name] = model.model_validate(value)
            except ValidationError as exc:  # named as the whole Settings would name them
                problems += [{**e, "loc": (name, *e["loc"])} for e in exc.errors()]
        if problems:
            raise ValidationError.from_exception_data(cls.__name__, problems)
        return cls.model_construct(_fields_set=set(sections), **sections)


# GROUNDWATCH_* variables that are not settings and may share an environment with them: the command
# line's traceback switch (groundwatch.cli), and the ClickHouse data source of the Grafana provisioning
# (deploy/grafana). Other names without ``__`` are not checked (rules files may read secrets from variables
# of any name, e.g. GROUNDWATCH_HOOK_SECRET), unless they start like a section (GROUNDWATCH_JUDGE_MODEL)
# or nearly spell one (GROUNDWATCH_JUGDE)
NOT_SETTINGS = frozenset(
    {"GROUNDWATCH_DEBUG"}
    | {
        f"GROUNDWATCH_CLICKHOUSE_{name}"
        for name in ("HOST", "PORT", "PROTOCOL", "SECURE", "DATABASE", "USER", "PASSWORD")
    }
)


def variable_name(section: str, field: str | None = None) -> str:
    """The environment variable of a section (a JSON object) or of one of its fields."""
    return f"{PREFIX}{section.upper()}" + (f"__{field.upper()}" if field is not None else "")


def _nests(field: FieldInfo) -> bool:
    """A field whose value has keys of its own (``GROUNDWATCH_JUDGE__PRICES__GPT-4O__INPUT_PER_1K``)."""
    annotation = field.annotation
    return typing.get_origin(annotation) is dict or (
        isinstance(annotation, type) and issubclass(annotation, BaseModel)
    )


def setting_variables() -> dict[str, FieldInfo]:
    """Every setting's environment variable and its field."""
    out: dict[str, FieldInfo] = {}
    for section, info in Settings.model_fields.items():
        model = info.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        for name, field in model.model_fields.items():
            out[variable_name(section, name)] = field
    return out


def unknown_variables(names: Iterable[str]) -> list[str]:
    """``GROUNDWATCH_* is not a setting (did you mean ...?)`` for each name given that looks like a
    setting but names none (pydantic-settings itself drops those without a word)."""
    known = setting_variables()
    sections = {name.upper(): name for name in Settings.model_fields}
    problems = []
    for raw in sorted(names):
        name = raw.upper()
        if not name.startswith(PREFIX) or name in NOT_SETTINGS or name in known:
            continue
        rest = name[len(PREFIX) :]
        head, delimiter, tail = rest.partition("__")
        if not delimiter:
            if rest in sections:
                continue
            looks_like_one = any(rest.startswith(f"{s}_") for s in sections) or difflib.get_close_matches(
                rest, sections, n=1, cutoff=0.8
            )
            if not looks_like_one:
                continue
        elif head in sections:
            field = known.get(f"{PREFIX}{head}__{tail.split('__')[0]}")
            if field is not None and _nests(field):
                continue
        candidates = [*known, *(variable_name(s) for s in sections.values())]
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
        problems.append(f"{name} is not a setting" + (f" (did you mean {close[0]}?)" if close else ""))
    return problems


def describe_settings_error(exc: ValidationError) -> str:
    """One line naming each invalid setting by its environment variable, for a ValidationError of
    ``Settings`` (from ``Settings()``, ``from_values`` or ``with_changes``)."""
    problems = []
    for problem in validation_problems(exc):
        loc = [str(p) for p in problem.loc]
        message = problem.why
        if len(loc) >= 2:
            where = variable_name(loc[0], loc[1]) + (f" ({'.'.join(loc[2:])})" if len(loc) > 2 else "")
            problems.append(f"{where}: {message}")
        elif loc and loc[0] in Settings.model_fields:
            problems.append(message if "GROUNDWATCH_" in message else f"{variable_name(loc[0])}: {message}")
        else:
            problems.append(message)
    return "; ".join(problems)


class _CheckedEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source that first refuses GROUNDWATCH_* variables naming no
    setting (``SettingError`` naming them and the closest setting), and names the variable whose list
    or mapping is not JSON."""

    def __call__(self) -> dict[str, Any]:
        problems = unknown_variables(name for name in self.env_vars)
        if problems:
            raise SettingError("; ".join(problems))
        try:
            return super().__call__()
        except SettingsError as exc:  # a list or mapping that is not JSON
            for name, value in sorted(self.env_vars.items()):
                field = setting_variables().get(name.upper())
                complex_ = field is not None and (
                    _nests(field) or typing.get_origin(field.annotation) is list
                )
                if complex_ and value:
                    try:
                        json.loads(value)
                    except ValueError as bad:
                        raise SettingError(f"{name.upper()} is not JSON: {bad}") from None
            raise SettingError(f"{exc}: {exc.__cause__}") from None


class _MappingEnvSource(_CheckedEnvSource):
    """The checked environment source over a given mapping instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = dict(environ)
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        from pydantic_settings.sources.utils import parse_env_vars

        environ, case, empty = self._environ, self.case_sensitive, self.env_ignore_empty
        return parse_env_vars(environ, case, empty, self.env_parse_none_str)


def settings_from_env(environ: Mapping[str, str]) -> Settings:
    """The Settings a process with exactly this environment would read (``GROUNDWATCH_*``, ``__``
    nesting, JSON for complex values), without reading or touching ``os.environ``."""
    values: dict[str, Any] = _MappingEnvSource(Settings, environ)()
    return Settings.from_values(values)
