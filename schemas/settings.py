"""Every setting of groundwatch, read from ``GROUNDWATCH_*`` environment variables.

Nested settings use ``__``: ``GROUNDWATCH_JUDGE__MODEL=gpt-4o-mini``,
``GROUNDWATCH_PIPELINE__NLI_MODE=per_hypothesis``. The numbers the seeds give (500/20 characters,
16 sentences a prompt, batches of 8, 32 in flight, first 2 sentences) are the defaults here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

JudgeKind = Literal["openai", "local", "lexical", "cascade"]
# the NLI pairs (schemas.results.PairName, which imports this module)
NliPair = Literal["context_answer", "ground_truth_answer", "answer_ground_truth"]
NLI_PAIRS: tuple[NliPair, ...] = ("context_answer", "ground_truth_answer", "answer_ground_truth")


class Limits(BaseModel):
    """Size limits on an incoming interaction; a violation names the field and the limit."""

    max_question_chars: int = 20_000
    max_answer_chars: int = 50_000
    max_ground_truth_chars: int = 50_000
    max_contexts: int = 100
    max_context_chars: int = 400_000  # all passages together
    max_id_chars: int = 256


class SplitSettings(BaseModel):
    """Sentence conversion (seeds 000/001)."""

    max_sentence_chars: int = Field(500, ge=1)
    min_sentence_chars: int = Field(20, ge=0)
    keep_lists: bool = True  # list items stay with the sentence that introduces them
    keep_tables: bool = True  # markdown table rows carry their header


class ModelPrice(BaseModel):
    input_per_1k: float = 0.0
    output_per_1k: float = 0.0


class JudgeSettings(BaseModel):
    kind: JudgeKind = "lexical"
    base_url: str | None = None  # OpenAI-compatible endpoint; None = OpenAI's default
    model: str = "gpt-4o-mini"
    api_key: SecretStr | None = None
    max_in_flight: int = Field(32, ge=1)
    max_retries: int = Field(4, ge=0)
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    timeout_s: float = 60.0
    temperature: float = 0.0
    max_output_tokens: int = 2048
    structured_output: bool = True  # JSON-schema response_format, plain JSON as the fallback
    prices: dict[str, ModelPrice] = Field(
        default_factory=lambda: {
            "gpt-4o-mini": ModelPrice(input_per_1k=0.00015, output_per_1k=0.0006),
            "gpt-4o": ModelPrice(input_per_1k=0.0025, output_per_1k=0.01),
        }
    )
    cache_enabled: bool = True
    cache_path: Path | None = None  # None: in-memory cache for the life of the process
    # the judge model's window, for models without an entry in ``context_windows`` (and the lexical
    # judge); premises longer than the window are split. ``pipeline.judges.window.window_tokens`` picks
    # the window of the judge in use: local_ctx for `local`, context_windows for `openai`
    context_window_tokens: int = 4096
    # cascade: the lexical verdict is trusted outside [unsure_low, unsure_high]
    cascade_unsure_low: float = 0.2
    cascade_unsure_high: float = 0.8
    # local judge (llama.cpp server started by groundwatch)
    local_model_dir: Path = Path.home() / ".cache" / "groundwatch" / "models"
    local_threads: int = 2
    local_ctx: int = 4096
    local_port: int = 0  # 0 = a free port on 127.0.0.1
    local_start_timeout_s: float = 180.0  # model load + first answer of /v1/models
    local_timeout_s: float = 900.0  # one request to the local server (2 CPU cores: minutes under load)
    local_max_in_flight: int = Field(1, ge=1)  # llama.cpp's server answers one request at a time
    cache_max_entries: int = Field(100_000, ge=1)  # in-memory verdict cache (LRU)
    cascade_llm: Literal["openai", "local"] = "local"  # the LLM behind the cascade's unsure cases
    # ask the cascade's LLM about texts the refusal phrases do not flag. Off by default: the lexical
    # phrases reach 0.977 balanced accuracy on DelucionQA dev, while the default local 1.5B model called
    # 40% of plain answers refusals (19 of the first 48, docs/accuracy.md)
    cascade_llm_refusals: bool = False
    # context window (tokens) per hosted model, like ``prices``: an exact name, else the longest name the
    # model starts with (dated snapshots); models not listed use ``context_window_tokens``
    context_windows: dict[str, int] = Field(
        default_factory=lambda: {"gpt-4o-mini": 128_000, "gpt-4o": 128_000}
    )


class PipelineSettings(BaseModel):
    pronoun_replacement: bool = True
    pronoun_batch_size: int = Field(16, ge=1)  # sentences a prompt
    # send a pronoun batch only when a sentence after its first holds an English pronoun or
    # demonstrative (pipeline.convert.ANAPHORS); turn off for answers in other languages
    pronoun_prefilter: bool = True
    nli_mode: Literal["batched", "per_hypothesis"] = "batched"
    # the NLI pairs judged (seed 000: all three); leaving one out saves its calls, its score is None
    pairs: list[NliPair] = Field(default_factory=lambda: list(NLI_PAIRS), min_length=1)
    refusal_mode: Literal["separate", "same"] = "separate"  # "same": asked inside the NLI prompt (seed 001)
    refusal_sentences: int = Field(2, ge=1)
    refusal_batch_size: int = Field(8, ge=1)  # texts a prompt
    # context entailment under this = hallucination. Left unset, each judge kind uses its calibrated
    # default from ``judge_hallucination_thresholds`` (this value for kinds not listed); set (env or
    # code), it is used for every judge
    hallucination_threshold: float = 0.5
    unsupported_claim_threshold: float = 0.5  # statement score under this = unsupported claim
    statement_weights: dict[str, float] = Field(default_factory=dict)  # tag -> weight (seed 002)
    relevance: bool = False  # embedding relevance (seed 004); needs the `embeddings` extra
    nli_batch_size: int = Field(16, ge=1)  # hypotheses a prompt in the "batched" NLI mode
    refusal_linger_ms: float = Field(10.0, ge=0)  # a partly full refusal batch waits this long for more texts
    # "batched" mode: NLI cases (premise + hypotheses) of concurrent interactions sharing one prompt, so
    # its instructions are sent once per group (pipeline.nli_grouping); 1 = one case a prompt. Left
    # unset, each judge kind uses its default from ``judge_nli_group_cases`` (this value for kinds not
    # listed); set (env or code), it is used for every judge
    nli_group_cases: int = Field(4, ge=1)
    judge_nli_group_cases: dict[str, int] = Field(default_factory=lambda: {"local": 1})
    nli_group_linger_ms: float = Field(20.0, ge=0)  # a partly full group waits this long for more cases
    chars_per_token: float = Field(3.5, gt=0)  # premise budget: characters per token of the judge's window
    nli_prompt_overhead_tokens: int = Field(600, ge=0)  # instructions and fences of an NLI prompt
    nli_output_tokens_per_hypothesis: int = Field(150, ge=0)  # room kept for the verdicts' output
    min_premise_chars: int = Field(1000, ge=1)  # a premise part is never made smaller than this
    # a ground truth "a | b | c" (or metadata gold_answers) is one hypothesis: any alternative will do
    ground_truth_alternatives: bool = True
    # ground-truth pairs: an alternative the answer contains (normalised) is entailed without a judge call
    exact_match: bool = True
    # operating thresholds by judge kind, calibrated on the dev sets (docs/accuracy.md has the curves that
    # chose them); a score at or over the threshold is the positive class (grounded / correct)
    judge_hallucination_thresholds: dict[str, float] = Field(
        default_factory=lambda: {"lexical": 0.85, "cascade": 0.85}
    )
    # answer_entails_ground_truth at or over this = the answer agrees with the ground truth ("correct");
    # left unset, each judge kind uses its calibrated default from ``judge_correct_thresholds``
    correct_threshold: float = 0.5
    judge_correct_thresholds: dict[str, float] = Field(default_factory=dict)

    def nli_group_cases_for(self, judge_kind: str) -> int:
        """NLI cases a prompt for a judge kind (``nli_group_cases``, see there)."""
        if "nli_group_cases" in self.model_fields_set:
            return self.nli_group_cases
        return max(1, self.judge_nli_group_cases.get(judge_kind, self.nli_group_cases))

    def threshold_for(self, score: str, judge_kind: str) -> float:
        """The operating threshold of a score (``pipeline.report.SCORES`` names) for a judge kind.

        Context scores (``context_entailment``, ``grounded_precision``) use ``hallucination_threshold``
        when it was set explicitly, else the judge's calibrated default; ground-truth scores
        (``answer_entails_ground_truth``, ``ground_truth_entails_answer``, ``agreement``) likewise
        with ``correct_threshold``; anything else 0.5.
        """
        if score in ("context_entailment", "grounded_precision"):
            if "hallucination_threshold" in self.model_fields_set:
                return self.hallucination_threshold
            return self.judge_hallucination_thresholds.get(judge_kind, self.hallucination_threshold)
        if score in ("answer_entails_ground_truth", "ground_truth_entails_answer", "agreement"):
            if "correct_threshold" in self.model_fields_set:
                return self.correct_threshold
            return self.judge_correct_thresholds.get(judge_kind, self.correct_threshold)
        return 0.5


class KafkaSettings(BaseModel):
    broker: str = "kafka://127.0.0.1:9092"
    # security (production Kafka, MSK, Redpanda Cloud): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = None  # None: the system's CA bundle
    ssl_certfile: Path | None = None  # client certificate (mutual TLS)
    ssl_keyfile: Path | None = None
    topic_prefix: str = "groundwatch."
    partitions: int = Field(4, ge=1)
    replicas: int = Field(1, ge=1)
    consumer_group: str = "groundwatch"
    stage_concurrency: int = Field(32, ge=1)  # interactions in flight inside each processor
    # how long the join waits for an interaction's parts before it emits what it has (incomplete).
    # None (the default): derived at start from the judge's worst case for one call, see
    # ``streams.join.join_timeout``: 2 x ((max_retries + 1) x timeout_s + the backoffs) for an HTTP judge,
    # 2 x local_timeout_s for the local one, at least 120 s. A set value under that worst case is used
    # but logged as a warning (late parts still complete the Evaluation: see join_emitted_cache)
    join_timeout_s: float | None = None
    # Converted of interactions emitted recently (LRU, by interaction_id): a part that arrives after its
    # interaction was emitted incomplete rebuilds and re-emits the complete Evaluation
    join_emitted_cache: int = Field(10_000, ge=0)
    # a dead letter's payload over this many bytes (UTF-8) is cut to this budget (its prefix, with the
    # sha256 and byte length of the whole); the original interaction is dropped when over it. Keep it
    # well under the broker's max message size (1 MB by default)
    deadletter_max_bytes: int = Field(256_000, ge=1024)
    # a message whose dead letter cannot be sent (the producer fails) is retried this many times, then
    # acked anyway with an ERROR log naming its topic, partition and offset, so one message never
    # blocks its partition for ever
    deadletter_attempts: int = Field(5, ge=1)
    session_timeout_s: float = 6.0
    heartbeat_interval_s: float = 1.0
    rebalance_timeout_s: float = 4.0
    web_port: int = 6066
    # faust's HTTP server (on dashboard.host:web_port): serves the built-in dashboard at /dashboard/
    web_enabled: bool = False
    commit_interval_s: float = Field(1.0, gt=0)
    producer_linger_s: float = Field(0.005, ge=0)  # batch a stage's outputs this long before sending
    # "staged": convert -> nli / refusal -> join, one topic a hop (stages scale and fail apart);
    # "fused": one processor runs every stage of an interaction (interactions -> evaluations), far fewer
    # Kafka hops; a stage failure dead-letters the interaction instead of an incomplete Evaluation
    topology: Literal["staged", "fused"] = "staged"
    datadir: Path | None = None  # faust's data directory; None: a temporary directory per worker


class ClickHouseSettings(BaseModel):
    # a secret (an http(s) URL carries the password): repr() and logs never show it; pass it via env
    url: SecretStr = SecretStr("chdb:///" + str(Path.cwd() / ".groundwatch" / "chdb"))
    ttl_days: int = Field(90, ge=1)
    batch_rows: int = Field(500, ge=1)
    batch_seconds: float = 1.0
    database: str = "groundwatch"  # used when the URL names none (chdb:///path, http://host:8123)
    # the worker writes its table counts here after each flush (JSON): how a demo or a test follows an
    # embedded chDB that only the worker's process may open
    status_file: Path | None = None
    # versioned DDL (NNN_name.sql); None: the repository's deploy/clickhouse
    migrations_dir: Path | None = None
    # a batch that fails this many flushes in a row is split in halves to find the row ClickHouse rejects;
    # that row goes to deadletter (stage "sink") and the rest are written
    sink_max_failures: int = Field(5, ge=1)


class WindowSettings(BaseModel):
    size_seconds: int = Field(60, ge=1)
    grace_seconds: int = Field(5, ge=0)
    # a window also closes when no row has landed in it for this long (wall clock), so the last window of
    # a stream that goes quiet is written; later rows reopen and recompute it
    idle_close_seconds: float = Field(10.0, ge=0)
    tick_seconds: float = Field(1.0, gt=0)  # how often due windows are looked for
    reconcile_hours: float = Field(24.0, gt=0)  # at start, recompute windows left unclosed this far back
    # the event-time watermark (one per app and model) takes no timestamp beyond wall clock + this: one
    # event stamped in the future cannot close windows early
    max_skew_seconds: float = Field(300.0, ge=0)


class AlertSettings(BaseModel):
    rules_file: Path | None = None
    webhook_url: SecretStr | None = None  # a secret (Slack hook URLs are credentials): pass it via env
    webhook_retries: int = 3
    webhook_backoff_s: float = 0.5
    webhook_timeout_s: float = 5.0


class DashboardSettings(BaseModel):
    """The built-in dashboard, on the worker's web server and in ``groundwatch dashboard``."""

    model_config = ConfigDict(frozen=True)

    host: str = Field(
        "127.0.0.1",
        description="address the worker's web server (and `groundwatch dashboard` by default) binds; any "
        "address but loopback needs a token or a username and password",
    )
    token: SecretStr | None = Field(
        None, description="bearer token the dashboard and its API require (header or ?token= once)"
    )
    username: str | None = Field(None, description="basic-auth user the dashboard requires (with password)")
    password: SecretStr | None = Field(None, description="basic-auth password (with username)")
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


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GROUNDWATCH_", env_nested_delimiter="__", extra="ignore")

    limits: Limits = Field(default_factory=Limits)
    split: SplitSettings = Field(default_factory=SplitSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    pipeline: PipelineSettings = Field(default_factory=PipelineSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    clickhouse: ClickHouseSettings = Field(default_factory=ClickHouseSettings)
    window: WindowSettings = Field(default_factory=WindowSettings)
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)


class _MappingEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping instead of ``os.environ``."""

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
    return Settings.model_validate(values)
