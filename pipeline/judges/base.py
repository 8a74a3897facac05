"""The judge interface: what every judge (openai, local, lexical, cascade) answers.

A judge handles one prompt's worth of work per call; the pipeline stages decide batching
(16 sentences a pronoun prompt, 8 texts a refusal prompt, all hypotheses of a pair or one each)
and premise splitting. Every method returns the value and the calls it cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, runtime_checkable

from prompts.models import PronounTurn
from schemas.results import HypothesisResult, JudgeCall, PairName

T = TypeVar("T")


@dataclass(frozen=True)
class PremisePassage:
    """One passage (or, for a passage too long for one prompt, a piece of it) of a premise."""

    index: int  # its position among the passages the premise was built from
    text: str


@dataclass(frozen=True)
class Premise:
    text: str
    document: str | None = None  # document name(s), given to the judge when known
    # the question's end when the premise text starts with it (ground-truth pairs): the question frames
    # the claim but is not evidence for it; judges that read ``text`` whole may ignore this
    question: str | None = None
    # the NLI pair the premise serves (schemas.results.PairName): the retrieved context (grounding) or
    # one of the two ground-truth pairs (correctness); a judge may treat them apart (the cascade does)
    pair: PairName = "context_answer"
    # the passages ``text`` joins (retrieved context only; empty for the ground-truth pairs). A judge
    # answers each statement's ``passage`` as a position in this tuple (``StatementVerdict.passage``)
    passages: tuple[PremisePassage, ...] = ()
    # ask which passages support each statement (``StatementVerdict.supported_by``: the answer's citations
    # are checked against them); the NLI stage sets it for the retrieved context of an answer that cites.
    # A judge that finds them anyway (the lexical one) may answer them without being asked
    ask_support: bool = False


@dataclass
class JudgeOutput(Generic[T]):
    value: T
    calls: list[JudgeCall] = field(default_factory=list)


@dataclass
class NliOutput:
    """Verdicts for the hypotheses of one prompt, in order, and, when asked, refusal flags."""

    hypotheses: list[HypothesisResult]
    refusal: bool | None = None  # "same" mode: is the hypotheses' text a refusal


@runtime_checkable
class Judge(Protocol):
    name: str
    model: str

    async def replace_pronouns(
        self, sentences: Sequence[str], history: Sequence[PronounTurn] = ()
    ) -> JudgeOutput[list[str]]:
        """Return exactly one sentence per sentence given, pronouns replaced by their nouns.

        ``history``: earlier turns of the conversation, oldest first, to resolve from (never rewritten).
        A judge that cannot keep the count returns the originals.
        """
        ...

    async def entail(
        self, premise: Premise, hypotheses: Sequence[str], *, ask_refusal: bool = False
    ) -> JudgeOutput[NliOutput]:
        """Split each hypothesis into statements and judge each against the premise."""
        ...

    async def classify_refusals(self, texts: Sequence[str]) -> JudgeOutput[list[bool]]:
        """One flag per text: True when the text is an answer refusal."""
        ...

    async def aclose(self) -> None: ...
