"""The lexical judge's supporting passages (``supported_by``): passages that together entail a statement
are looked for only when the answer cites (each join costs an index of the premise)."""

from __future__ import annotations

import asyncio

from pipeline.judges.base import Premise, PremisePassage
from pipeline.judges.lexical import LexicalJudge

A = "Gustave Eiffel's company built the tower."
B = "The tower opened in 1889 in Paris."


def supported_by(ask_support: bool) -> list[int] | None:
    passages = (PremisePassage(index=0, text=A), PremisePassage(index=1, text=B))
    premise = Premise(text=f"{A}\n\n{B}", passages=passages, ask_support=ask_support)
    out = asyncio.run(
        LexicalJudge().entail(premise, ["Eiffel's company built the tower that opened in 1889."])
    )
    statement = out.value.hypotheses[0].statements[0]
    assert statement.verdict == "entailed"  # by the two passages together, by neither alone
    return statement.supported_by


def test_passages_that_support_a_statement_together_are_named_for_an_answer_that_cites() -> None:
    assert supported_by(ask_support=True) == [0, 1]


def test_an_answer_that_does_not_cite_pays_for_no_joins() -> None:
    assert supported_by(ask_support=False) == []
