"""The judge: an OpenAI-compatible endpoint, a local model, the lexical judge or the cascade
(``GROUNDWATCH_JUDGE__*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, SecretStr, model_validator

from schemas.settings.common import NliPair, variable_name

JudgeKind = Literal["openai", "local", "lexical", "cascade"]


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
