"""A slice of the traffic: which interactions a comparison side or a documents ranking reads.

A slice is a small parameter object: every field that is set must match. In a query string it is given as
repeated ``key:value`` terms (``a=app:wiki-qa&a=model:beta``), so a new kind of field (a metadata
dimension) is one more key, not a new parameter. ``streams.dashboard.slice_sql`` turns it into SQL.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

_NAME = 200  # longest app or model name accepted in a filter


class SliceFilter(BaseModel):
    """Interactions whose every given field matches; an empty filter is all of them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    app: str | None = Field(None, min_length=1, max_length=_NAME, description="one app")
    model: str | None = Field(None, min_length=1, max_length=_NAME, description="one model")

    @classmethod
    def from_terms(cls, terms: list[str]) -> SliceFilter:
        """``["app:wiki-qa", "model:beta"]`` -> the filter; a key given twice or unknown is refused."""
        data: dict[str, str] = {}
        for term in terms:
            key, sep, value = term.partition(":")
            if not sep:
                raise ValueError(f"{term!r}: write key:value (keys: {', '.join(cls.model_fields)})")
            if key not in cls.model_fields:
                raise ValueError(f"{key!r}: not a slice key (keys: {', '.join(cls.model_fields)})")
            if key in data:
                raise ValueError(f"{key!r} given twice")
            data[key] = value
        return cls.model_validate(data)

    def terms(self) -> list[str]:
        return [f"{k}:{v}" for k, v in self.model_dump(exclude_none=True).items()]

    def describe(self) -> str:
        return ", ".join(self.terms()) or "all traffic"
