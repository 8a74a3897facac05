"""Typed input and output of each prompt (ragas style: one pydantic model per prompt's input and one
per its answer). ``prompts.Prompts`` validates the input before it renders a prompt."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PronounTurn(_Input):
    """A turn of the conversation before the sentences (pronouns.md's ``history`` section)."""

    role: Literal["user", "assistant"]
    text: str


class PronounsInput(_Input):
    """pronouns.md: the sentences whose pronouns are replaced (earlier ones resolve later ones), and the
    conversation turns before them, oldest first, which may resolve them too but are never rewritten."""

    sentences: list[str] = Field(min_length=1)
    history: list[PronounTurn] = Field(default_factory=list)


class NliInput(_Input):
    """nli.md: one premise, the hypotheses judged against it, and whether to ask if they refuse."""

    premise: str
    hypotheses: list[str] = Field(min_length=1)
    document: str | None = None
    ask_refusal: bool = False
    passages: list[str] = Field(
        default_factory=list,
        description="the passages the premise joins; with two or more they are numbered and the answer "
        "names each statement's passage",
    )
    ask_support: bool = Field(
        False,
        description="with numbered passages: the answer also names, per statement, the passages that "
        "support it (supported_by)",
    )


class NliCase(_Input):
    """One premise and its hypotheses, a case of an ``nli_cases`` prompt."""

    premise: str
    hypotheses: list[str] = Field(min_length=1)
    document: str | None = None
    passages: list[str] = Field(default_factory=list, description="as NliInput.passages")
    ask_support: bool = Field(False, description="as NliInput.ask_support")


class NliCasesInput(_Input):
    """nli_cases.md: several cases in one prompt (the instructions are sent once for all)."""

    cases: list[NliCase] = Field(min_length=1)


class RefusalInput(_Input):
    """refusal.md: the texts (first sentences of answers and ground truths) to flag."""

    texts: list[str] = Field(min_length=1)


class ArgumentValue(_Input):
    """A tool-call argument value the lexical check found nowhere before the call."""

    text: str = Field(description="'<tool>.<argument>=<value>'")
    results_before: int = Field(
        ge=0, description="how many of the tool results (numbered from 1, in order) came before the call"
    )


class ArgumentsInput(_Input):
    """arguments.md: the conversation (oldest first, ending with the current question), the tool results
    in the order the model received them, and the argument values to check against what came before."""

    turns: list[PronounTurn] = Field(min_length=1)
    results: list[str] = Field(default_factory=list)
    values: list[ArgumentValue] = Field(min_length=1)


class ReaskPair(_Input):
    """Two user messages of one conversation, the earlier first."""

    earlier: str
    later: str


class ReaskInput(_Input):
    """reask.md: the pairs of user messages to judge (does the later ask again what the earlier asked)."""

    pairs: list[ReaskPair] = Field(min_length=1)


class PronounSentence(_Strict):
    id: int
    text: str


class PronounsAnswer(_Strict):
    """pronouns.md: one rewritten sentence per input sentence, by id."""

    sentences: list[PronounSentence]


class StatementAnswer(_Strict):
    statement: str
    reason: str = Field(description="short reason, at most 15 words")
    verdict: Literal["entailed", "contradicted", "not_stated"]
    tag: str
    passage: int | None = Field(
        None,
        description="id of the numbered passage that states or contradicts it, else the closest one; null "
        "without numbered passages",
    )
    supported_by: list[int] | None = Field(
        None,
        description="asked with the support question: ids of the numbered passages that state it (each "
        "that does alone, else those that do together); [] when none does; absent when not asked",
    )


class HypothesisAnswer(_Strict):
    id: int
    statements: list[StatementAnswer]


class NliAnswer(_Strict):
    """nli.md: the statements of each hypothesis, by id."""

    hypotheses: list[HypothesisAnswer]


class NliRefusalAnswer(NliAnswer):
    """nli.md with the refusal question (refusal_mode "same")."""

    refusal: bool


class CaseAnswer(_Strict):
    id: int
    hypotheses: list[HypothesisAnswer]


class ArgumentVerdict(_Strict):
    id: int
    reason: str = Field(description="short reason, at most 15 words")
    supported: bool


class ArgumentsAnswer(_Strict):
    """arguments.md: whether the conversation or the earlier tool results support each value, by id."""

    values: list[ArgumentVerdict]


class NliCasesAnswer(_Strict):
    """nli_cases.md: the statements of each hypothesis, by id, of each case, by id."""

    cases: list[CaseAnswer]


class RefusalItem(_Strict):
    id: int
    refusal: bool


class RefusalAnswer(_Strict):
    """refusal.md: one flag per text, by id."""

    texts: list[RefusalItem]


class RubricInput(_Input):
    """rubric.md: a custom evaluator's instructions and the interaction's fields it shows (absent: None)."""

    instructions: str
    question: str | None = None
    history: list[PronounTurn] | None = None
    contexts: list[str] | None = None
    answer: str | None = None
    ground_truth: str | None = None


class RubricPassFailAnswer(_Strict):
    """rubric.md, output pass_fail: a short reason, then the verdict."""

    reason: str
    verdict: Literal["pass", "fail"]


class RubricScoreAnswer(_Strict):
    """rubric.md, output score_1_5: a short reason, then a score from 1 to 5."""

    reason: str
    score: int = Field(ge=1, le=5)


class ReaskVerdict(_Strict):
    id: int
    reason: str = Field(description="short reason, at most 15 words")
    reasked: bool


class ReaskAnswer(_Strict):
    """reask.md: whether the later message of each pair asks again what the earlier asked, by id."""

    pairs: list[ReaskVerdict]


OUTPUT_MODELS: dict[str, type[BaseModel]] = {
    m.__name__: m
    for m in (
        PronounsAnswer, NliAnswer, NliRefusalAnswer, NliCasesAnswer, RefusalAnswer, RubricPassFailAnswer,
        RubricScoreAnswer, ArgumentsAnswer, ReaskAnswer,
    )
}  # fmt: skip
