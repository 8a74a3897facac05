"""Citations: read the answer's markers and structured citations, remove the markers, and say which
evidence passages each answer sentence cites (``schemas.citations``, docs/citations.md).

Markers read from the answer text (at most ``citations.max_markers``):

- ``[1]``, ``[1][3]``, ``[1, 2]``, ``[1-3]``: 1-based positions over the evidence (the contexts, then
  the tool passages: ``pipeline.evidence.evidence``);
- ``[doc2]``, ``[Document 2]``, ``[source 2]``, ``[passage 2]``, ``[ref 2]``, ``[context 2]``: the same;
- ``[^1]`` footnotes: a footnote whose definition (``[^1]: ...`` on its own line, removed from the text)
  names a passage's document or URL cites that passage; else a numeric label is a position;
- ``【4†source】`` (OpenAI's file-search markers): the name after ``†`` when it is a passage's document,
  else ``【M:K†...】`` is the result K (0-based, so position K+1) and ``【N†...】`` position N;
- markdown links ``[text](url)`` whose URL or text is a passage's document name (``[1](url)``: the
  number); a link to anything else is no citation and stays as written. A link that cites keeps its text
  in the answer unless that text is only a reference ("1", "source");
- ``[name]`` where ``name`` is a passage's document name.

A document name matches case-insensitively; a URL also without its scheme, ``www.`` and a trailing
``/``. A name shared by several passages (a document cut into passages) cites each of them. A reference
that names no passage (a position past the evidence, a name no passage has) is dangling: kept as
written in ``SentenceCitations.dangling``, never an error.

Removal: a marker is cut from the text (with the parentheses around it when it is all they hold) and
with the spaces before it when punctuation, a space or the end follows ("Paris is in France [1]." ->
"Paris is in France."). The cleaned answer is what is split into sentences and judged.

Sentences: a marker cites the sentence it follows: the last sentence that starts before the marker's
place in the cleaned text ("France.[1] It is ..." cites "France."), the first sentence for a marker
before any text. A structured citation with a span cites every sentence the span overlaps; with only a
start (OpenAI's ``index``) it is placed like a marker; without a position it cites every sentence.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.sentences import split_sentences
from schemas.citations import AnswerCitations, Citation, SentenceCitations
from schemas.interaction import Passage
from schemas.settings import SplitSettings

_FOOTNOTE_DEF = re.compile(r"^[ \t]*\[\^([^\]\s]{1,40})\]:[ \t]*(.*)$", re.MULTILINE)
_LINK = re.compile(r"\[([^\[\]\n]{1,300})\]\((<?[^()\s]{1,2000}>?)(?:\s+\"[^\"\n]*\")?\)")
_OPENAI = re.compile(r"【([^】\n]{0,300})】")
_OPENAI_INNER = re.compile(r"^\s*(\d{1,6})(?::(\d{1,6}))?\s*(?:†(.*))?$", re.DOTALL)
_FOOTNOTE = re.compile(r"\[\^([^\]\s]{1,40})\]")
_NUMBERS = re.compile(r"(?<![\w\\])\[\s*(\d+(?:\s*(?:[,;–-]|and)\s*\d+){0,49})\s*\](?!\()")
_NAMED_NUMBER = re.compile(
    r"\[\s*(?:doc(?:ument)?|source|passage|ref(?:erence)?|context)[\s_#:-]*(\d+)\s*\](?!\()",
    re.IGNORECASE,
)
_BRACKETED = re.compile(r"\[([^\[\]\n^]{1,200})\](?!\()")
_REFERENCE_TEXT = re.compile(
    r"^\s*\^?(?:(?:doc(?:ument)?|source|passage|ref(?:erence)?|context)[\s_#:-]*)?\d*\s*$",
    re.IGNORECASE,
)
_FOLLOWS_MARKER = re.compile(r"[\s.,;:!?)\]】]")
_URL_PREFIX = re.compile(r"^(?:https?://)?(?:www\.)?", re.IGNORECASE)
_RANGE_MAX = 50
_NO_PASSAGE = 10**9  # a marker's number past any passage count: it cites nothing (dangling)


def _number(digits: str) -> int:
    """A marker's number, however many digits it has (one past any passage count stays dangling)."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) < 10 else _NO_PASSAGE


_LIST_SEPARATOR = re.compile(r"\s*(?:[,;]|and)\s*")
_RANGE_SEPARATOR = re.compile(r"\s*[–-]\s*")


@dataclass(frozen=True)
class Ref:
    """One reference: a 1-based position, or a name (a document name, id, file name or URL)."""

    position: int | None = None
    names: tuple[str, ...] = ()
    written: str = ""


@dataclass
class Marker:
    """A span of the answer to cut (``start``, ``end``), what replaces it, and what it cites."""

    start: int
    end: int
    refs: list[Ref] = field(default_factory=list)
    keep: str = ""  # text left in place of the span (a citing link's own text)


def _key(name: str) -> str:
    folded = name.strip().casefold().strip("<>")
    return _URL_PREFIX.sub("", folded).rstrip("/")


class PassageIndex:
    """The evidence passages by document name (``_key``)."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.count = len(passages)
        self.by_name: dict[str, list[int]] = {}
        for i, passage in enumerate(passages):
            if passage.document and passage.document.strip():
                self.by_name.setdefault(_key(passage.document), []).append(i)

    def named(self, name: str) -> list[int]:
        return self.by_name.get(_key(name), []) if name.strip() else []

    def resolve(self, ref: Ref) -> list[int]:
        """The 0-based evidence indices the reference cites ([] when it names none: dangling)."""
        for name in ref.names:
            found = self.named(name)
            if found:
                return found
        if ref.position is not None and 1 <= ref.position <= self.count:
            return [ref.position - 1]
        return []


def _positions(text: str) -> list[int]:
    """The positions of "1, 2", "1-3", "1 and 4" (a range longer than _RANGE_MAX is its two ends)."""
    out: list[int] = []
    for part in _LIST_SEPARATOR.split(text.strip()):
        bounds = _RANGE_SEPARATOR.split(part)
        if len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit():
            lo, hi = _number(bounds[0]), _number(bounds[1])
            out.extend(range(lo, hi + 1) if 0 <= hi - lo <= _RANGE_MAX else (lo, hi))
        elif part.isdigit():
            out.append(_number(part))
    return out


def _footnotes(text: str, index: PassageIndex) -> tuple[dict[str, Ref], list[Marker]]:
    """The footnote definitions: label -> what it cites, and their lines as markers to cut."""
    refs: dict[str, Ref] = {}
    markers: list[Marker] = []
    for match in _FOOTNOTE_DEF.finditer(text):
        label, body = match.group(1), match.group(2).strip()
        names = [body, *re.findall(r"\((\S+?)\)", body), *re.findall(r"https?://\S+", body)]
        named = tuple(n for n in names if index.named(n))
        position = _number(label) if label.isdecimal() else None
        refs[label] = Ref(position=position, names=named or (() if position else (body or label,)))
        end = match.end() + 1 if match.end() < len(text) and text[match.end()] == "\n" else match.end()
        markers.append(Marker(match.start(), end))
    return refs, markers


def find_markers(text: str, index: PassageIndex, max_markers: int) -> tuple[list[Marker], bool]:
    """The citation markers of an answer, in order and not overlapping, and whether there were more than
    ``max_markers`` (those after it are left in the text)."""
    definitions, markers = _footnotes(text, index)
    taken = bytearray(len(text))  # 1 where a marker already is: markers never overlap
    for definition in markers:
        taken[definition.start : definition.end] = b"\x01" * (definition.end - definition.start)

    def add(marker: Marker) -> None:
        if taken.find(1, marker.start, marker.end) == -1:
            markers.append(marker)
            taken[marker.start : marker.end] = b"\x01" * (marker.end - marker.start)

    for m in _LINK.finditer(text):
        label, url = m.group(1), m.group(2).strip("<>")
        bare = _REFERENCE_TEXT.match(label) is not None
        if index.named(url) or index.named(label):
            add(
                Marker(
                    m.start(), m.end(), [Ref(names=(url, label), written=m.group(0))], "" if bare else label
                )
            )
        elif bare and re.search(r"\d", label):
            number = _number(re.sub(r"\D", "", label))
            add(Marker(m.start(), m.end(), [Ref(position=number, written=m.group(0))]))
    for m in _OPENAI.finditer(text):
        inner = _OPENAI_INNER.match(m.group(1))
        if inner is None:
            add(Marker(m.start(), m.end(), [Ref(names=(m.group(1),), written=m.group(0))]))
            continue
        first, second, name = inner.group(1), inner.group(2), (inner.group(3) or "").strip()
        position = int(second) + 1 if second is not None else int(first)
        add(Marker(m.start(), m.end(), [Ref(position, (name,) if name else (), m.group(0))]))
    for m in _FOOTNOTE.finditer(text):
        label = m.group(1)
        numbered = label.isdecimal()
        ref = definitions.get(label) or Ref(
            position=_number(label) if numbered else None, names=() if numbered else (label,)
        )
        add(Marker(m.start(), m.end(), [Ref(ref.position, ref.names, m.group(0))]))
    for m in _NAMED_NUMBER.finditer(text):
        add(Marker(m.start(), m.end(), [Ref(position=_number(m.group(1)), written=m.group(0))]))
    for m in _NUMBERS.finditer(text):
        written = m.group(0)
        add(Marker(m.start(), m.end(), [Ref(position=p, written=written) for p in _positions(m.group(1))]))
    for m in _BRACKETED.finditer(text):
        if index.named(m.group(1)):
            add(Marker(m.start(), m.end(), [Ref(names=(m.group(1),), written=m.group(0))]))
    markers.sort(key=lambda mk: mk.start)
    cited = [mk for mk in markers if mk.refs]
    if len(cited) <= max_markers:
        return markers, False
    cut = {id(mk) for mk in cited[max_markers:]}
    return [mk for mk in markers if id(mk) not in cut], True


@dataclass
class Cleaned:
    """The answer without its markers, where each marker was in it, and original -> cleaned offsets."""

    text: str
    anchors: list[int]  # per marker (of those given), its place in ``text``
    offsets: list[int]  # per original character index (and its end), the cleaned index


def remove_markers(text: str, markers: Sequence[Marker]) -> Cleaned:
    """The text with each marker cut (with the spaces before it when punctuation, a space or the end
    follows) or replaced by its kept text."""
    out: list[str] = []
    length = 0
    anchors: list[int] = []
    offsets = [0] * (len(text) + 1)
    at = 0
    for i, marker in enumerate(markers):
        start, end = marker.start, marker.end
        if not marker.keep and start > at and text[start - 1 : start] == "(" and text[end : end + 1] == ")":
            start, end = start - 1, end + 1  # "([source](url))": the parentheses go too
        next_start = markers[i + 1].start if i + 1 < len(markers) else -1
        follows = text[end : end + 1]
        if not marker.keep and (not follows or _FOLLOWS_MARKER.match(follows) or end == next_start):
            while start > at and text[start - 1] in " \t":
                start -= 1
        for j in range(at, start):
            offsets[j] = length + (j - at)
        out.append(text[at:start])
        length += start - at
        anchors.append(length)
        for j in range(start, end):
            offsets[j] = length
        out.append(marker.keep)
        length += len(marker.keep)
        at = end
    for j in range(at, len(text) + 1):
        offsets[j] = length + (j - at)
    out.append(text[at:])
    return Cleaned("".join(out), anchors, offsets)


def sentence_starts(text: str, sentences: Sequence[str]) -> list[int]:
    """Where each sentence starts in ``text`` (searched in order from the previous one; a sentence the
    splitter rewrote, such as a table row, starts where the previous one did)."""
    starts: list[int] = []
    cursor = 0
    for sentence in sentences:
        body = sentence.strip()
        found = -1
        for probe in (body[:40], body[:12], body.split()[0] if body.split() else ""):
            if probe:
                found = text.find(probe, cursor)
                if found >= 0:
                    break
        start = found if found >= 0 else (starts[-1] if starts else 0)
        starts.append(start)
        cursor = max(cursor, start + (1 if found >= 0 else 0))
    return starts


def _sentence_at(anchor: int, starts: Sequence[int]) -> int:
    """The sentence a marker at ``anchor`` cites: the last one starting before it, else the first
    (``starts`` never decrease)."""
    return max(bisect_left(starts, anchor) - 1, 0)


def _overlapping(start: int, end: int, starts: Sequence[int], length: int) -> list[int]:
    bounds = [*starts[1:], length]
    return [i for i, s in enumerate(starts) if s < end and start < bounds[i]] or [_sentence_at(start, starts)]


def _citation_refs(citation: Citation) -> list[Ref]:
    written = f"{citation.source}"
    refs = [Ref(position=p, written=f"{written} passage {p}") for p in citation.passages]
    if citation.documents:
        names = tuple(citation.documents)
        refs.append(Ref(names=names, written=f"{written} document {citation.documents[0]!r}"))
    return refs


#: at most this many distinct dangling references are kept per sentence (a marker or citation naming
#: thousands of missing passages would otherwise copy itself into every statement it reaches)
MAX_DANGLING_PER_SENTENCE = 20


@dataclass
class _Accumulator:
    passages: list[list[int]]
    dangling: list[list[str]]

    def cite(self, sentence: int, refs: Sequence[Ref], index: PassageIndex) -> None:
        """Add what ``refs`` cite to ``sentence``; a reference naming no passage is kept once per sentence
        as written (one marker naming several missing positions is one dangling reference), up to
        ``MAX_DANGLING_PER_SENTENCE``."""
        for ref in refs:
            found = index.resolve(ref)
            dangling = self.dangling[sentence]
            if not found and ref.written not in dangling and len(dangling) < MAX_DANGLING_PER_SENTENCE:
                dangling.append(ref.written)
            for i in found:
                if i not in self.passages[sentence]:
                    self.passages[sentence].append(i)


def read_citations(
    answer: str,
    citations: Sequence[Citation],
    passages: Sequence[Passage],
    split: SplitSettings,
    max_markers: int,
) -> tuple[list[str], AnswerCitations]:
    """The answer's sentences with their markers removed, and what each cites (module docstring)."""
    index = PassageIndex(passages)
    markers, truncated = find_markers(answer, index, max_markers)
    cleaned = remove_markers(answer, markers)
    sentences = split_sentences(cleaned.text, split)
    if not sentences:
        return sentences, AnswerCitations(markers=sum(1 for m in markers if m.refs), truncated=truncated)
    starts = sentence_starts(cleaned.text, sentences)
    acc = _Accumulator([[] for _ in sentences], [[] for _ in sentences])
    for marker, anchor in zip(markers, cleaned.anchors, strict=True):
        if marker.refs:
            acc.cite(_sentence_at(anchor, starts), marker.refs, index)
    for citation in citations:
        refs = _citation_refs(citation)
        if citation.start is None:
            targets = list(range(len(sentences)))
        else:
            start = cleaned.offsets[min(citation.start, len(answer))]
            if citation.end is None or citation.end <= citation.start:
                targets = [_sentence_at(start, starts)]
            else:
                end = cleaned.offsets[min(citation.end, len(answer))]
                targets = _overlapping(start, end, starts, len(cleaned.text))
        for target in targets:
            acc.cite(target, refs, index)
    return sentences, AnswerCitations(
        sentences=[
            SentenceCitations(passages=p, dangling=d) for p, d in zip(acc.passages, acc.dangling, strict=True)
        ],
        markers=sum(1 for m in markers if m.refs),
        structured=len(citations),
        truncated=truncated,
    )
