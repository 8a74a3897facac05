"""Citations: the answer's references to the passages it was judged against (docs/citations.md).

Numbering: a citation names an evidence passage (``pipeline.evidence.evidence``: the interaction's
contexts in their order, then the passages of the tool results that count as evidence, in step order) by
its 1-based position in that list, by its document name (``Passage.document``: a context's name as given,
a tool document's id or source) or, for a link, by its URL. ``[1]`` is the first context; with three
contexts, ``[4]`` is the first tool passage.

In: ``Interaction.citations``, structured citations (``Citation``), besides the markers written in the
answer text (``[1]``, ``[1][3]``, ``[1, 2]``, ``[^1]``, ``【4†source】``, ``[doc2]``, markdown links; the
parser is ``pipeline.citations``). A ``Citation`` is read from any of these shapes:

- groundwatch's own: ``{"start": 0, "end": 41, "passages": [1, 2]}`` or ``{"start": 0, "end": 41,
  "documents": ["manual.pdf"]}`` (``start``/``end``: a character span of the answer, end exclusive);
- an OpenAI Responses annotation: ``{"type": "file_citation", "index": 41, "file_id": "file-1",
  "filename": "manual.pdf"}``, ``{"type": "url_citation", "start_index": 0, "end_index": 41, "url":
  "https://...", "title": "..."}`` (``container_file_citation`` like ``file_citation``);
- an Anthropic content-block citation: ``{"type": "char_location", "document_index": 0,
  "document_title": "...", "cited_text": "..."}`` (also ``page_location``, ``content_block_location``,
  ``search_result_location`` with ``search_result_index``); Anthropic's indices are 0-based positions of
  the documents it was given, the contexts' order. The text block it was attached to is given as
  ``start``/``end`` (the block's span in the answer).

A citation without a position in the answer (no ``start``, ``end`` or ``index``) applies to every
sentence of the answer.

Out: each answer sentence's citations (``SentenceCitations``, in ``Converted.citations``) and, per
statement, what the judge found of them (``StatementCitations``, in ``StatementVerdict.citations``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.document_names import document_names

CitationSource = Literal["marker", "span", "file_citation", "url_citation", "anthropic"]

#: the Anthropic citation types (content-block citations)
ANTHROPIC_TYPES = frozenset(
    {"char_location", "page_location", "content_block_location", "search_result_location"}
)
#: the OpenAI Responses annotation types that cite
OPENAI_TYPES = frozenset({"file_citation", "url_citation", "container_file_citation"})


class Citation(BaseModel):
    """One structured citation of the event (module docstring: the shapes it is read from)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: CitationSource = Field("span", description="the shape it came in")
    start: int | None = Field(None, ge=0, description="where in the answer it applies (characters)")
    end: int | None = Field(None, ge=0, description="end of that span, exclusive; None: at start only")
    passages: list[int] = Field(
        default_factory=list, max_length=100, description="cited passages by 1-based position"
    )
    documents: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="cited passages by document name, id, file name or URL",
    )

    @model_validator(mode="before")
    @classmethod
    def _shapes(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "type" not in data:
            return data
        kind = data.get("type")
        rest = {k: v for k, v in data.items() if v is not None}
        documents = document_names(rest)
        if kind in OPENAI_TYPES:
            start = rest.get("start_index", rest.get("index"))
            end = rest.get("end_index")
            source = "url_citation" if kind == "url_citation" else "file_citation"
            return {"source": source, "start": start, "end": end, "documents": documents}
        if kind in ANTHROPIC_TYPES:
            index = rest.get("document_index", rest.get("search_result_index"))
            passages = [index + 1] if isinstance(index, int) and not isinstance(index, bool) else []
            return {
                "source": "anthropic",
                "start": rest.get("start"),
                "end": rest.get("end"),
                "passages": passages,
                "documents": [] if passages else documents,
            }
        raise ValueError(
            f"citation type {kind!r} is not one groundwatch reads (file_citation, url_citation, "
            "container_file_citation, char_location, page_location, content_block_location, "
            "search_result_location; or give start, end and passages or documents without a type)"
        )

    @model_validator(mode="after")
    def _something(self) -> Citation:
        if not self.passages and not self.documents:
            raise ValueError("a citation names at least one passage (passages) or document (documents)")
        if self.start is not None and self.end is not None and self.end < self.start:
            raise ValueError(f"citation end {self.end} is before its start {self.start}")
        return self


class SentenceCitations(BaseModel):
    """What one answer sentence cites: evidence passages (0-based indices into the evidence, the
    contexts then the tool passages) and the references that name no passage (dangling)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    passages: list[int] = Field(
        default_factory=list, description="0-based indices into the evidence, in citation order, no repeats"
    )
    dangling: list[str] = Field(
        default_factory=list,
        description="references naming no passage, as written ('[7]', 'doc:manual.pdf', 'passage 9')",
    )


class AnswerCitations(BaseModel):
    """The citations of one answer, per sentence of the answer as split and judged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sentences: list[SentenceCitations] = Field(
        default_factory=list, description="one per answer sentence, in order (Converted.answer_sentences)"
    )
    markers: int = Field(0, ge=0, description="markers found in the answer text")
    structured: int = Field(0, ge=0, description="structured citations on the event")
    truncated: bool = Field(False, description="more markers than citations.max_markers: the rest ignored")

    @property
    def cites(self) -> bool:
        """Whether the answer cites anything (a passage, or a reference to none)."""
        return any(s.passages or s.dangling for s in self.sentences)


class StatementCitations(BaseModel):
    """A statement's citations and what the judge found of them (stored with the statement)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cited: list[int] = Field(
        default_factory=list, description="the evidence passages its sentence cites (0-based indices)"
    )
    precise: list[bool] = Field(
        default_factory=list,
        description="per cited passage: it supports the statement alone or is one of those needed together "
        "(the judge's supported_by holds it)",
    )
    supported: bool | None = Field(
        None,
        description="the cited passages together support the statement (citation recall); None when it "
        "cites no passage, or the judge named no supporting passages",
    )
    dangling: list[str] = Field(
        default_factory=list, description="its sentence's references that name no passage"
    )
    factual: bool = Field(True, description="the statement states something evidence could support")
