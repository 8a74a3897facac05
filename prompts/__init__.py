"""Prompt templates (one file per prompt), their typed output models, and rendering.

Each ``*.md`` file here starts with a small header (``name``, ``version``, ``output``: the pydantic
model of its answer) and holds its text in sections: ``<!-- system -->`` (instructions and few-shot
examples), ``<!-- user -->`` (the data, as ``${placeholders}``) and optional named sections.

Untrusted text (premise, hypotheses, texts to classify) is always fenced in tags, and any fence tag
inside it is neutralised (its ``<`` becomes ``‹``), so a text can never close its fence and pose as
instructions; the system text says that fenced content is data, never instructions.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from prompts.fences import FENCE_TAGS, fence, neutralise
from prompts.models import (
    OUTPUT_MODELS,
    ArgumentsAnswer,
    ArgumentsInput,
    ArgumentValue,
    ArgumentVerdict,
    CaseAnswer,
    HypothesisAnswer,
    NliAnswer,
    NliCase,
    NliCasesAnswer,
    NliCasesInput,
    NliInput,
    NliRefusalAnswer,
    PronounsAnswer,
    PronounSentence,
    PronounsInput,
    PronounTurn,
    ReaskAnswer,
    ReaskInput,
    ReaskPair,
    ReaskVerdict,
    RefusalAnswer,
    RefusalInput,
    RefusalItem,
    RubricInput,
    RubricPassFailAnswer,
    RubricScoreAnswer,
    StatementAnswer,
)

__all__ = [
    "FENCE_TAGS",
    "SUPPORT_FIELDS",
    "ArgumentValue",
    "ArgumentVerdict",
    "ArgumentsAnswer",
    "ArgumentsInput",
    "CaseAnswer",
    "HypothesisAnswer",
    "NliAnswer",
    "NliCase",
    "NliCasesAnswer",
    "NliCasesInput",
    "NliInput",
    "NliRefusalAnswer",
    "PromptTemplate",
    "Prompts",
    "PronounSentence",
    "PronounTurn",
    "PronounsAnswer",
    "PronounsInput",
    "ReaskAnswer",
    "ReaskInput",
    "ReaskPair",
    "ReaskVerdict",
    "RefusalAnswer",
    "RefusalInput",
    "RefusalItem",
    "RenderedPrompt",
    "RubricInput",
    "RubricPassFailAnswer",
    "RubricScoreAnswer",
    "StatementAnswer",
    "fence",
    "load_template",
    "neutralise",
    "strict_json_schema",
]

OutT = TypeVar("OutT", bound=BaseModel)

_HEADER_RE = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
_SECTION_RE = re.compile(r"^<!-- (\w+) -->\n", re.MULTILINE)


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    version: str
    output: str  # the name of its output model in prompts.models
    sections: dict[str, str]
    fingerprint: str  # sha256 of the file, so an edit without a version bump never reuses cached verdicts

    def section(self, key: str, **values: str) -> str:
        return Template(self.sections[key]).substitute(values)


@dataclass(frozen=True)
class RenderedPrompt(Generic[OutT]):
    """A prompt ready to send: chat messages and the model its answer must validate against.

    ``items`` (when known) is how many items the answer's top-level list must hold: the JSON schema
    then says so (minItems = maxItems), which a grammar-constrained server (llama.cpp) enforces, so a
    small model can neither stop early nor invent an extra item.
    """

    name: str
    version: str
    messages: list[dict[str, str]]
    output_model: type[OutT]
    items: int | None = None
    input: BaseModel | None = None  # the validated input it was rendered from (prompts.models)
    # optional answer fields this prompt does not ask for: left out of the JSON schema, so a strict schema
    # never makes the model write them (NLI's supported_by without the support question)
    omit: tuple[str, ...] = ()

    def json_schema(self) -> dict[str, Any]:
        return strict_json_schema(self.output_model, items=self.items, omit=self.omit)


def load_template(name: str) -> PromptTemplate:
    """Read ``prompts/<name>.md`` (package data) and parse its header and sections."""
    raw = resources.files("prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")
    m = _HEADER_RE.match(raw)
    if m is None:
        raise ValueError(f"prompt {name}.md has no '---' header")
    header: dict[str, str] = {}
    for line in m.group(1).splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"prompt {name}.md: bad header line {line!r}")
        header[key.strip()] = value.strip()
    for key in ("name", "version", "output"):
        if key not in header:
            raise ValueError(f"prompt {name}.md: header lacks {key!r}")
    if header["output"] not in OUTPUT_MODELS:
        raise ValueError(f"prompt {name}.md: unknown output model {header['output']!r}")
    body = raw[m.end() :]
    parts = _SECTION_RE.split(body)
    sections = {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts) - 1, 2)}
    for key in ("system", "user"):
        if key not in sections:
            raise ValueError(f"prompt {name}.md lacks the <!-- {key} --> section")
    return PromptTemplate(
        name=header["name"],
        version=header["version"],
        output=header["output"],
        sections=sections,
        fingerprint=hashlib.sha256(raw.encode()).hexdigest()[:16],
    )


def premise_text(premise: str, passages: Sequence[str]) -> str:
    """The premise as the prompt shows it: with two or more passages, each fenced and numbered
    (``<passage id="N">``), so the judge can name the one that bears on a statement."""
    if len(passages) < 2:
        return neutralise(premise)
    return "\n".join(fence("passage", text, i) for i, text in enumerate(passages, 1))


class Prompts:
    """The prompts, loaded once, each rendered with typed input and a typed output model."""

    def __init__(self) -> None:
        self.pronouns_t = load_template("pronouns")
        self.nli_t = load_template("nli")
        self.nli_cases_t = load_template("nli_cases")
        self.refusal_t = load_template("refusal")
        self.rubric_t = load_template("rubric")
        self.arguments_t = load_template("arguments")
        self.reask_t = load_template("reask")

    @staticmethod
    def _messages(t: PromptTemplate, **values: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": t.section("system")},
            {"role": "user", "content": t.section("user", **values)},
        ]

    @staticmethod
    def _version(t: PromptTemplate) -> str:
        return f"{t.version}+{t.fingerprint}"

    def pronouns(
        self, sentences: Sequence[str], history: Sequence[PronounTurn] = ()
    ) -> RenderedPrompt[PronounsAnswer]:
        """The pronoun prompt; with ``history`` (earlier turns of the conversation, oldest first) its
        ``history`` section fences them before the sentences, as context to resolve from."""
        t = self.pronouns_t
        inp = PronounsInput(sentences=list(sentences), history=list(history))
        items = "\n".join(fence("sentence", s, i) for i, s in enumerate(inp.sentences, 1))
        turns = "\n".join(f'<turn role="{turn.role}">{neutralise(turn.text)}</turn>' for turn in inp.history)
        context = t.section("history", turns=turns) + "\n" if inp.history else ""
        return RenderedPrompt(
            t.name,
            self._version(t),
            self._messages(t, history=context, sentences=items, count=str(len(inp.sentences))),
            PronounsAnswer,
            len(inp.sentences),
            inp,
        )

    def nli(
        self,
        premise: str,
        hypotheses: Sequence[str],
        *,
        document: str | None = None,
        ask_refusal: bool = False,
        passages: Sequence[str] = (),
        ask_support: bool = False,
    ) -> RenderedPrompt[NliAnswer]:
        t = self.nli_t
        inp = NliInput(
            premise=premise,
            hypotheses=list(hypotheses),
            document=document,
            ask_refusal=ask_refusal,
            passages=list(passages),
            ask_support=ask_support and len(passages) >= 2,
        )
        values = {
            "document": fence("document", inp.document) + "\n" if inp.document else "",
            "premise": premise_text(inp.premise, inp.passages),
            "hypotheses": "\n".join(fence("hypothesis", h, i) for i, h in enumerate(inp.hypotheses, 1)),
            "refusal": t.section("refusal") + "\n" if inp.ask_refusal else "",
            "support": t.section("support") + "\n" if inp.ask_support else "",
            "count": str(len(inp.hypotheses)),
        }
        model: type[NliAnswer] = NliRefusalAnswer if inp.ask_refusal else NliAnswer
        messages = self._messages(t, **values)
        omit = () if inp.ask_support else SUPPORT_FIELDS
        return RenderedPrompt(t.name, self._version(t), messages, model, len(inp.hypotheses), inp, omit)

    def nli_cases(self, cases: Sequence[NliCase]) -> RenderedPrompt[NliCasesAnswer]:
        """Several (premise, hypotheses) cases in one prompt: the instructions are sent once for all."""
        t = self.nli_cases_t
        inp = NliCasesInput(cases=list(cases))
        rendered = [
            t.section(
                "case",
                id=str(n),
                document=fence("document", case.document) + "\n" if case.document else "",
                premise=premise_text(case.premise, case.passages),
                hypotheses="\n".join(fence("hypothesis", h, i) for i, h in enumerate(case.hypotheses, 1)),
                hypothesis_count=str(len(case.hypotheses)),
            )
            for n, case in enumerate(inp.cases, 1)
        ]
        asks = any(case.ask_support and len(case.passages) >= 2 for case in inp.cases)
        support = t.section("support") + "\n" if asks else ""
        values = {"cases": "\n".join(rendered), "count": str(len(inp.cases)), "support": support}
        messages = self._messages(t, **values)
        omit = () if asks else SUPPORT_FIELDS
        return RenderedPrompt(t.name, self._version(t), messages, NliCasesAnswer, len(inp.cases), inp, omit)

    def refusal(self, texts: Sequence[str]) -> RenderedPrompt[RefusalAnswer]:
        t = self.refusal_t
        inp = RefusalInput(texts=list(texts))
        items = "\n".join(fence("text", s, i) for i, s in enumerate(inp.texts, 1))
        messages = self._messages(t, texts=items, count=str(len(inp.texts)))
        return RenderedPrompt(t.name, self._version(t), messages, RefusalAnswer, len(inp.texts), inp)

    def rubric(
        self, inp: RubricInput, output: str
    ) -> RenderedPrompt[RubricPassFailAnswer] | RenderedPrompt[RubricScoreAnswer]:
        """A custom rubric (schemas.evaluators.RubricEvaluator): the user's instructions in the system
        text, the fields it shows fenced in the user text; ``output`` pass_fail or score_1_5."""
        t = self.rubric_t
        parts: list[str] = []
        if inp.history:
            turns = "\n".join(f'<turn role="{u.role}">{neutralise(u.text)}</turn>' for u in inp.history)
            parts.append(f"<conversation>\n{turns}\n</conversation>")
        if inp.question is not None:
            parts.append(fence("question", inp.question))
        if inp.contexts is not None:
            parts.extend(fence("passage", c, i) for i, c in enumerate(inp.contexts, 1))
        if inp.answer is not None:
            parts.append(fence("answer", inp.answer))
        if inp.ground_truth is not None:
            parts.append(fence("ground_truth", inp.ground_truth))
        system = Template(t.sections["system"]).substitute(
            instructions=inp.instructions.strip(), output=t.section(output)
        )
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": t.section("user", fields="\n".join(parts))},
        ]
        if output == "score_1_5":
            return RenderedPrompt(t.name, self._version(t), messages, RubricScoreAnswer, None, inp)
        return RenderedPrompt(t.name, self._version(t), messages, RubricPassFailAnswer, None, inp)

    def arguments(self, inp: ArgumentsInput) -> RenderedPrompt[ArgumentsAnswer]:
        """Tool-argument values the lexical check did not find (``pipeline.argument_judge``): the
        conversation fenced by turn, the tool results as numbered passages, each value with how many of
        them came before its call."""
        t = self.arguments_t
        turns = "\n".join(f'<turn role="{u.role}">{neutralise(u.text)}</turn>' for u in inp.turns)
        results = "\n".join(fence("passage", r, i) for i, r in enumerate(inp.results, 1))
        values = "\n".join(
            f'<text id="{i}" results="{v.results_before}">{neutralise(v.text)}</text>'
            for i, v in enumerate(inp.values, 1)
        )
        messages = self._messages(t, turns=turns, results=results, values=values, count=str(len(inp.values)))
        return RenderedPrompt(t.name, self._version(t), messages, ArgumentsAnswer, len(inp.values), inp)

    def reask(self, inp: ReaskInput) -> RenderedPrompt[ReaskAnswer]:
        """Pairs of a conversation's user messages (``pipeline.conversation_judge``): each a case holding
        the earlier message as question 1 and the later as question 2."""
        t = self.reask_t
        fenced = [(fence("question", p.earlier, 1), fence("question", p.later, 2)) for p in inp.pairs]
        pairs = "\n".join(
            t.section("pair", id=str(i), earlier=earlier, later=later)
            for i, (earlier, later) in enumerate(fenced, 1)
        )
        messages = self._messages(t, pairs=pairs, count=str(len(inp.pairs)))
        return RenderedPrompt(t.name, self._version(t), messages, ReaskAnswer, len(inp.pairs), inp)

    def versions(self) -> dict[str, str]:
        templates = (
            self.pronouns_t, self.nli_t, self.nli_cases_t, self.refusal_t, self.rubric_t, self.arguments_t,
            self.reask_t,
        )  # fmt: skip
        return {t.name: self._version(t) for t in templates}


#: the NLI answer's fields the support question asks for (left out of the schema when it is not asked)
SUPPORT_FIELDS = ("supported_by",)


@functools.cache
def _model_schema(model: type[BaseModel]) -> str:
    """pydantic's JSON schema of an output model, generated once (it costs ~1 ms a call, on every request)."""
    return json.dumps(model.model_json_schema())


def strict_json_schema(
    model: type[BaseModel], *, items: int | None = None, omit: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The model's JSON schema in OpenAI's strict form: refs inlined, every property required, no extras.

    With ``items``, each top-level array property must hold exactly that many items; properties named in
    ``omit`` (optional ones) are left out wherever they are.
    """
    schema = json.loads(_model_schema(model))  # a fresh copy: the caller may change it
    defs = schema.pop("$defs", {})

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return fix(defs[node["$ref"].rsplit("/", 1)[-1]])
            out = {k: fix(v) for k, v in node.items() if k not in ("default", "title", "description")}
            if isinstance(node.get("properties"), dict):
                out["properties"] = {k: fix(v) for k, v in node["properties"].items() if k not in omit}
            if out.get("type") == "object" and "properties" in out:
                out["required"] = list(out["properties"])
                out["additionalProperties"] = False
            return out
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    fixed: dict[str, Any] = fix(schema)
    if items is not None:
        for prop in fixed.get("properties", {}).values():
            if isinstance(prop, dict) and prop.get("type") == "array":
                prop["minItems"] = prop["maxItems"] = items
    return fixed
