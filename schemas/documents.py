"""The Documents page and ``report --documents``: per context document, how often it was retrieved and
how the answer statements judged against it fared (``StatementVerdict.passage``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from schemas.dashboard import TimeRange
from schemas.slice_filter import SliceFilter, SliceTerms


class DocumentsQuery(TimeRange):
    slice: SliceTerms = Field(
        default_factory=SliceFilter,
        description="only this slice: repeated key:value terms (app, model, dimensions); all when none",
    )
    limit: int = Field(100, ge=1, le=5000, description="documents returned, worst first")


class DocumentRow(BaseModel):
    document: str = Field(description="the passages' document name; '' for passages without one")
    retrieved: int = Field(description="judged interactions whose context held a passage of it")
    statements: int = Field(description="answer statements judged against one of its passages")
    supported: int = Field(description="of those, entailed")
    not_stated: int
    contradicted: int
    unsupported_share: float | None = Field(description="(not stated + contradicted) / statements")
    lower: float | None = Field(description="Wilson 95 % lower bound of unsupported_share")
    upper: float | None = Field(description="Wilson 95 % upper bound of unsupported_share")
    never_supporting: bool = Field(description="retrieved, yet no statement it was judged against entailed")
    cited: int = Field(0, description="answer statements citing one of its passages (docs/citations.md)")
    miscited: int = Field(
        0,
        description="of those, the statements the cited passage does not support (the judge did not name it "
        "among the supporting passages); a citation whose support is unknown is in neither",
    )


class DocumentReport(BaseModel):
    start: datetime
    end: datetime
    slice: SliceFilter
    documents: list[DocumentRow] = Field(
        description="worst first: by the lower bound of the unsupported share, then never supporting"
    )
    total: int = Field(description="documents in the range (the list may be cut at the limit)")
    statements_without_passage: int = Field(
        description="answer statements whose judge named no passage (not counted against any document)"
    )
