"""Sentence conversion (docs/method.md), plus list and table handling.

The seed rules (``SplitSettings``: ``max_sentence_chars`` = 500, ``min_sentence_chars`` = 20):

1. ``nltk.sent_tokenize`` splits the text into sentences (punkt data from ``pipeline.punkt``);
   each sentence is stripped of surrounding whitespace and empty ones are dropped.
2. A sentence *exceeding* the maximum (``len(s) > max_sentence_chars``; exactly 500 is kept) is split
   on ``"\\n\\n"``; every part still over the maximum is split on ``"\\n"``; every part still over
   it is cut into consecutive chunks of ``max_sentence_chars`` characters. Parts are stripped and
   empty parts dropped.
3. A sentence *shorter* than the minimum (``len(s) < min_sentence_chars``; exactly 20 stays alone)
   is joined (with one space) to the following sentence; the joined text is checked again, so
   several short sentences in a row accumulate until they reach the minimum. When the short text
   is the last one it is joined to the previous sentence (or stays alone when there is none).
   Joining happens after splitting and a joined sentence is not split again (the seed's order).

Beyond the seeds, so that no hypothesis loses the part that gives it meaning:

* ``keep_lists``: a list stays with the sentence that introduces it.

  - Line lists: consecutive lines starting with ``-``, ``*``, ``+``, ``•``, ``1.`` or ``1)``
    (any indentation, single blank lines between items allowed, indented lines continue the item
    before them). The introducing sentence is the last sentence of the text right before the list;
    the unit is ``intro + "\\n" + items`` (items as written, one a line). A list with no text before
    it (start of the text, or right after a table) has no intro: each item is then a sentence of its
    own and the seed rules apply to it.
  - Inline enumerations after a colon: ``"... are: 1. flour 2. water 3. salt."``. The enumeration
    starts at a ``1.``/``1)`` marker right after a colon and continues with ``2.``, ``3.``, ... in
    order, within the paragraph (up to the next blank line). The unit runs from the start of the
    sentence holding the colon to the end of the first nltk sentence that ends after the last
    marker; items are joined with a space.
  - A list unit longer than the maximum is cut between items, and each piece repeats the intro
    (``intro + items i..j``), packing as many whole items as fit. A single item that does not fit
    with its intro is split by the seed rule 2 into pieces that each carry the intro when the intro
    takes at most half of the maximum; otherwise the combined text is split by seed rule 2.

* ``keep_tables``: a markdown table (a line with ``|``, then a separator line such as
  ``--- | :---:``, then the rows) becomes one sentence per data row carrying its header:
  ``"Model | Price\\n--- | ---\\nX | 5"`` gives ``"Model: X; Price: 5"``. Empty cells are left out,
  a cell with an empty header is given as its value alone, cells beyond the header's count as values
  alone. A table without rows gives its header cells joined with ``"; "``. Table rows are whole
  units: seed rule 2 applies to an over-long row, but rule 3 never joins a row with another
  sentence; rule 3 applies within each run of sentences between tables.

With both settings off the result is exactly the seed's. Everything is deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import nltk

from pipeline.punkt import ensure_punkt
from schemas.settings import SplitSettings

_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+\S")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_ENUM_START = re.compile(r":\s*(1[.)])\s")


@dataclass
class _Piece:
    """A unit before rendering: a sentence, a list (intro + items) or a table row."""

    kind: str  # "sentence" | "list" | "row"
    text: str = ""
    intro: str = ""
    items: list[str] = field(default_factory=list)
    sep: str = "\n"


def _tokenize(text: str) -> list[str]:
    ensure_punkt()
    return nltk.sent_tokenize(text)


def split_long(sentence: str, max_chars: int) -> list[str]:
    """Seed rule 2: split a sentence over ``max_chars`` on blank lines, then lines, then in chunks."""
    if len(sentence) <= max_chars:
        return [sentence] if sentence.strip() else []
    out: list[str] = []
    for part in sentence.split("\n\n"):
        part = part.strip()
        if not part:
            continue
        if len(part) <= max_chars:
            out.append(part)
            continue
        for line in part.split("\n"):
            line = line.strip()
            if not line:
                continue
            if len(line) <= max_chars:
                out.append(line)
                continue
            for i in range(0, len(line), max_chars):
                chunk = line[i : i + max_chars].strip()
                if chunk:
                    out.append(chunk)
    return out


def join_short(sentences: list[str], min_chars: int) -> list[str]:
    """Seed rule 3: a sentence under ``min_chars`` joins the next one (the previous if it is last)."""
    out: list[str] = []
    carry = ""
    for sentence in sentences:
        current = f"{carry} {sentence}" if carry else sentence
        if len(current) < min_chars:
            carry = current
            continue
        out.append(current)
        carry = ""
    if carry:
        if out:
            out[-1] = f"{out[-1]} {carry}"
        else:
            out.append(carry)
    return out


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)]


def _is_table_start(lines: list[str], i: int) -> bool:
    return (
        i + 1 < len(lines)
        and "|" in lines[i]
        and "|" in lines[i + 1]
        and "-" in lines[i + 1]
        and bool(_TABLE_SEPARATOR.match(lines[i + 1]))
    )


def table_rows(header: list[str], rows: list[list[str]]) -> list[str]:
    """Each row as ``"Header: value; ..."``; empty cells left out (see the module docstring)."""
    out: list[str] = []
    for row in rows:
        parts: list[str] = []
        for j, value in enumerate(row):
            if not value:
                continue
            name = header[j] if j < len(header) else ""
            parts.append(f"{name}: {value}" if name else value)
        if parts:
            out.append("; ".join(parts))
    if not rows:
        joined = "; ".join(h for h in header if h)
        if joined:
            out.append(joined)
    return out


def _locate(text: str, sentences: list[str]) -> list[tuple[int, int]] | None:
    spans: list[tuple[int, int]] = []
    pos = 0
    for sentence in sentences:
        start = text.find(sentence, pos)
        if start < 0:
            return None
        spans.append((start, start + len(sentence)))
        pos = start + len(sentence)
    return spans


def _prose_pieces(text: str, keep_lists: bool) -> list[_Piece]:
    sentences = _tokenize(text)
    plain = [_Piece("sentence", text=s.strip()) for s in sentences if s.strip()]
    if not keep_lists or ":" not in text:
        return plain
    spans = _locate(text, sentences)
    if spans is None:  # pragma: no cover - punkt returns slices of the text
        return plain
    starts = list(_ENUM_START.finditer(text))
    pieces: list[_Piece] = []
    covered = -1  # index of the last sentence absorbed into an enumeration
    for k, (start, end) in enumerate(spans):
        if k <= covered:
            continue
        match = next((m for m in starts if start <= m.start() < end), None)
        enum = _enumeration_in(text, spans, k, match) if match is not None else None
        if enum is None:
            if sentences[k].strip():
                pieces.append(_Piece("sentence", text=sentences[k].strip()))
            continue
        last_index, piece = enum
        pieces.append(piece)
        covered = last_index
    return pieces


def _enumeration_in(
    text: str, spans: list[tuple[int, int]], k: int, match: re.Match[str]
) -> tuple[int, _Piece]:
    """The inline enumeration whose colon (``match``) is in sentence ``k``: (its last sentence, piece)."""
    start = spans[k][0]
    paragraph_end = text.find("\n\n", match.end())
    if paragraph_end < 0:
        paragraph_end = len(text)
    markers = [match.start(1)]
    marker_end = match.end(1)
    pos = match.end()
    number = 2
    while True:
        found = re.compile(rf"(?<!\S){number}[.)]\s").search(text, pos, paragraph_end)
        if found is None:
            break
        markers.append(found.start())
        marker_end = found.start() + len(str(number)) + 1
        pos = found.end()
        number += 1
    last = k
    while last < len(spans) and spans[last][1] <= marker_end:
        last += 1
    if last >= len(spans):
        last = len(spans) - 1
    unit_end = spans[last][1]
    intro = text[start : markers[0]].strip()
    bounds = [*markers, unit_end]
    items = [text[bounds[i] : bounds[i + 1]].strip() for i in range(len(markers))]
    return last, _Piece("list", intro=intro, items=[i for i in items if i], sep=" ")


def _blocks(text: str, settings: SplitSettings) -> list[_Piece]:
    """Walk the lines: prose blocks go to nltk, line lists and tables are recognised as such."""
    lines = text.replace("\r\n", "\n").split("\n")
    pieces: list[_Piece] = []
    prose: list[str] = []
    last_block = "none"  # kind of the block just before: "none" | "prose" | "list" | "table"

    def flush_prose() -> None:
        nonlocal last_block
        if any(line.strip() for line in prose):
            pieces.extend(_prose_pieces("\n".join(prose), settings.keep_lists))
            last_block = "prose"
        prose.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if settings.keep_tables and _is_table_start(lines, i):
            flush_prose()
            header = _cells(line)
            i += 2
            rows: list[list[str]] = []
            while i < len(lines) and lines[i].strip() and "|" in lines[i]:
                rows.append(_cells(lines[i]))
                i += 1
            pieces.extend(_Piece("row", text=r) for r in table_rows(header, rows))
            last_block = "table"
            continue
        if settings.keep_lists and _ITEM.match(line):
            flush_prose()
            items: list[str] = []
            while i < len(lines):
                current = lines[i]
                if _ITEM.match(current):
                    items.append(current.strip())
                elif current.strip() and current[:1].isspace() and items:
                    items[-1] = f"{items[-1]} {current.strip()}"
                elif not current.strip() and i + 1 < len(lines) and _ITEM.match(lines[i + 1]):
                    pass
                else:
                    break
                i += 1
            intro_piece = pieces[-1] if pieces and last_block == "prose" else None
            if intro_piece is not None and intro_piece.kind == "sentence":
                pieces.pop()
                pieces.append(_Piece("list", intro=intro_piece.text, items=items, sep="\n"))
            else:
                pieces.extend(_Piece("sentence", text=item) for item in items)
            last_block = "list"
            continue
        prose.append(line)
        i += 1
    flush_prose()
    return pieces


def _render_list(piece: _Piece, max_chars: int) -> list[str]:
    intro, sep = piece.intro, piece.sep
    groups: list[list[str]] = []
    current: list[str] = []
    for item in piece.items:
        candidate = intro + sep + sep.join([*current, item])
        if current and len(candidate) > max_chars:
            groups.append(current)
            current = [item]
        else:
            current.append(item)
    if current:
        groups.append(current)
    if not groups:
        return split_long(intro, max_chars)
    out: list[str] = []
    for group in groups:
        text = intro + sep + sep.join(group)
        if len(text) <= max_chars:
            out.append(text)
            continue
        budget = max_chars - len(intro) - len(sep)
        if len(intro) + len(sep) <= max_chars // 2:
            out.extend(intro + sep + part for part in split_long(sep.join(group), budget))
        else:
            out.extend(split_long(text, max_chars))
    return out


def split_sentences(text: str | None, settings: SplitSettings | None = None) -> list[str]:
    """Split ``text`` into hypotheses/sentences by the rules in the module docstring."""
    settings = settings or SplitSettings()
    if text is None or not text.strip():
        return []
    max_chars, min_chars = settings.max_sentence_chars, settings.min_sentence_chars
    if settings.keep_lists or settings.keep_tables:
        pieces = _blocks(text, settings)
    else:
        pieces = [_Piece("sentence", text=s.strip()) for s in _tokenize(text) if s.strip()]
    out: list[str] = []
    run: list[str] = []  # sentences between table rows, joined by rule 3 as a run
    for piece in pieces:
        if piece.kind == "row":
            out.extend(join_short(run, min_chars))
            run = []
            out.extend(split_long(piece.text, max_chars))
        elif piece.kind == "list":
            run.extend(_render_list(piece, max_chars))
        else:
            run.extend(split_long(piece.text, max_chars))
    out.extend(join_short(run, min_chars))
    return out


def first_sentences(text: str | None, count: int, settings: SplitSettings | None = None) -> str:
    """The first ``count`` converted sentences of ``text`` joined by a space (the refusal input)."""
    return " ".join(split_sentences(text, settings)[:count])
