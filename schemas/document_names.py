"""Where a document's name is in JSON: a document in a tool's result, a citation annotation (OpenAI's
file and URL citations, Anthropic's document titles), a GenAI retrieval document. One list of keys, in
order of preference, read by the evidence splitter, the citation reader and the OTLP reader."""

from __future__ import annotations

from typing import Any

#: the keys a document's name sits under, most specific first
DOCUMENT_NAME_KEYS = (
    "id", "source", "document_id", "doc_id", "url", "title", "file_id", "filename", "document_title",
)  # fmt: skip


def document_names(item: dict[str, Any]) -> list[str]:
    """Every name ``item`` gives (a non-blank string or an integer under a DOCUMENT_NAME_KEYS key), in
    the keys' order."""
    out = []
    for key in DOCUMENT_NAME_KEYS:
        value = item.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            out.append(str(value))
    return out


def document_name(item: dict[str, Any]) -> str | None:
    """The first name ``item`` gives, else its ``metadata`` object's (a LangChain document's); None when
    neither gives one."""
    names = document_names(item)
    if names:
        return names[0]
    metadata = item.get("metadata")
    if isinstance(metadata, dict):
        return document_name({k: v for k, v in metadata.items() if k != "metadata"})
    return None
