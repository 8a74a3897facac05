"""Topics found in the questions of a range of traffic, named by their most distinctive words, and
questions assigned to them.

- **Grouping** (``fit_topics``): the questions' embeddings (``pipeline.embeddings``, unit length) are
  grouped with scikit-learn: ``kmeans`` (k-means into ``topics.max_topics`` groups, fewer when there
  are not ``min_topic_size`` questions a group) or ``hdbscan`` (density clusters; its outliers go to
  ``other``, the largest ``max_topics`` clusters are kept). A group under ``min_topic_size`` questions
  is no topic.
- **Names**: class-based TF-IDF (c-TF-IDF, as BERTopic names its topics): the questions of a topic are
  one document; a word scores its frequency in the topic times ``log(1 + A / f)``, ``A`` the mean
  number of words a topic, ``f`` the word's frequency over all topics; English stop words and the words
  of asking (``ASKING``: "tell", "explain", "mean"...) are left out.
- **Stable ids** across refits: a k-means refit from an earlier model starts from its centres, and
  every refit matches its topics to the earlier ones by their centres (Hungarian assignment on cosine,
  ``scipy.optimize.linear_sum_assignment``); a topic whose match is at least ``match_similarity`` keeps
  that id, the others get new ones.
- **Assignment** (``assign``): a question goes to the topic of the nearest centre, or to ``other`` when
  that cosine is under ``min_similarity``.

Pure CPU work on arrays: callers on an event loop run it in a thread or a process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from pipeline.embeddings import TextEncoder, Vectors
from schemas.settings.topics import TopicsSettings
from schemas.topic_model import OTHER, Topic, TopicModel

Labels = npt.NDArray[np.int64]
MAX_WORDS = 10
#: words of how people ask, not of what they ask about: left out of the names beside English stop words
ASKING = frozenset(
    "ask asking does did doing explain help know like mean means meaning need needs please possible "
    "provide tell thing things use used using want way ways".split()
)


@dataclass(frozen=True)
class Assigned:
    """A question's topic: its id ('other' for none), its name, its cosine with the topic's centre and the
    version of the model that assigned it."""

    topic: str
    label: str
    similarity: float
    version: int = 0


def _kmeans(vectors: Vectors, settings: TopicsSettings, previous: TopicModel | None) -> Labels:
    """k-means into ``max_topics`` groups; a refit starts from the previous model's centres (the rest
    from questions drawn at random), so the topics that are still there stay where they were."""
    from sklearn.cluster import KMeans

    k = max(2, min(settings.max_topics, len(vectors) // settings.min_topic_size))
    if previous is None or not previous.topics:
        found = KMeans(n_clusters=k, n_init=4, random_state=settings.seed).fit_predict(vectors)
        return np.asarray(found, dtype=np.int64)
    start = np.array([t.centre for t in previous.topics[:k]], dtype=np.float32)
    rng = np.random.default_rng(settings.seed)
    extra = vectors[rng.choice(len(vectors), k - len(start), replace=False)] if k > len(start) else start[:0]
    init = np.vstack([start, extra]).astype(vectors.dtype)
    found = KMeans(n_clusters=k, init=init, n_init=1, random_state=settings.seed).fit_predict(vectors)
    return np.asarray(found, dtype=np.int64)


def _hdbscan(vectors: Vectors, settings: TopicsSettings) -> Labels:
    from sklearn.cluster import HDBSCAN

    labels = np.asarray(
        HDBSCAN(min_cluster_size=settings.min_topic_size, copy=True).fit_predict(vectors), dtype=np.int64
    )
    sizes = {int(c): int((labels == c).sum()) for c in set(labels.tolist()) if c >= 0}
    kept = sorted(sizes, key=lambda c: -sizes[c])[: settings.max_topics]
    return np.where(np.isin(labels, kept), labels, -1)


def group(vectors: Vectors, settings: TopicsSettings, previous: TopicModel | None = None) -> Labels:
    """Each question's group (-1: none), by ``settings.method``; groups under ``min_topic_size`` are none.
    ``previous``: the model a k-means refit starts from."""
    if len(vectors) < 2 * settings.min_topic_size:
        return np.full(len(vectors), -1, dtype=np.int64)
    if settings.method == "kmeans":
        labels = _kmeans(vectors, settings, previous)
    else:
        labels = _hdbscan(vectors, settings)
    for c in set(labels.tolist()):
        if c >= 0 and int((labels == c).sum()) < settings.min_topic_size:
            labels[labels == c] = -1
    return labels


def distinctive_words(texts: Sequence[str], labels: Labels, groups: Sequence[int]) -> dict[int, list[str]]:
    """Each group's most distinctive words by c-TF-IDF (module docstring), most distinctive first."""
    from sklearn.feature_extraction.text import CountVectorizer

    documents = [" ".join(t for t, c in zip(texts, labels, strict=True) if c == g) for g in groups]
    if not any(d.strip() for d in documents):
        return {g: [] for g in groups}
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    stop = sorted(ENGLISH_STOP_WORDS | ASKING)
    vectorizer = CountVectorizer(stop_words=stop, token_pattern=r"(?u)\b[^\W\d_][\w'-]+\b")
    try:
        counts = vectorizer.fit_transform(documents).toarray().astype(np.float64)
    except ValueError:  # only stop words
        return {g: [] for g in groups}
    words = vectorizer.get_feature_names_out()
    tf = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)
    idf = np.log(1.0 + counts.sum(axis=1).mean() / np.maximum(counts.sum(axis=0), 1.0))
    scores = tf * idf
    return {
        g: [str(words[i]) for i in np.argsort(-scores[row])[:MAX_WORDS] if scores[row, i] > 0]
        for row, g in enumerate(groups)
    }


def _centre(vectors: Vectors) -> npt.NDArray[np.float64]:
    mean = vectors.astype(np.float64).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else mean


def _ids(
    centres: list[npt.NDArray[np.float64]], previous: TopicModel | None, match: float
) -> tuple[list[str], int]:
    """Each new topic's id (a previous topic's when matched, module docstring) and the next free number."""
    next_id = previous.next_id if previous is not None else 1
    ids: list[str | None] = [None] * len(centres)
    if previous is not None and previous.topics and centres:
        from scipy.optimize import linear_sum_assignment

        old = np.array([t.centre for t in previous.topics], dtype=np.float64)
        similarity = np.array(centres) @ old.T
        rows, cols = linear_sum_assignment(-similarity)
        for r, c in zip(rows, cols, strict=True):
            if similarity[r, c] >= match:
                ids[r] = previous.topics[c].id
    out = []
    for found in ids:
        if found is None:
            found, next_id = f"t{next_id}", next_id + 1
        out.append(found)
    return out, next_id


def fit_topics(
    texts: Sequence[str],
    vectors: Vectors,
    settings: TopicsSettings,
    fitted_at: datetime,
    previous: TopicModel | None = None,
) -> TopicModel:
    """The topics of ``texts`` (their embeddings ``vectors``, unit length, one row a text), largest first;
    ``previous``: the model this refits (its ids are kept where topics match)."""
    labels = group(vectors, settings, previous)
    groups = sorted((c for c in set(labels.tolist()) if c >= 0), key=lambda c: -int((labels == c).sum()))
    words = distinctive_words(texts, labels, groups)
    centres = [_centre(vectors[labels == g]) for g in groups]
    ids, next_id = _ids(centres, previous, settings.match_similarity)
    topics = [
        Topic(
            id=topic_id, label=", ".join(words[g][: settings.label_words]) or topic_id, words=words[g],
            size=int((labels == g).sum()), centre=[round(float(x), 6) for x in centre],
        )
        for topic_id, g, centre in zip(ids, groups, centres, strict=True)
    ]  # fmt: skip
    return TopicModel(
        version=previous.version + 1 if previous is not None else 1, fitted_at=fitted_at,
        method=settings.method, questions=len(texts), other=int((labels < 0).sum()),
        min_similarity=settings.min_similarity, next_id=next_id, topics=topics,
    )  # fmt: skip


def discover(
    texts: Sequence[str],
    encoder: TextEncoder,
    settings: TopicsSettings,
    fitted_at: datetime,
    previous: TopicModel | None = None,
) -> tuple[TopicModel, list[Assigned]]:
    """The topics of ``texts`` (embedded by ``encoder``) and each text's topic by them: what ``groundwatch
    topics``, ``groundwatch eval --topics`` and the demo fit with."""
    vectors = encoder.encode(texts)
    model = fit_topics(texts, vectors, settings, fitted_at, previous)
    return model, assign(model, vectors)


def assign(model: TopicModel, vectors: Vectors) -> list[Assigned]:
    """Each question's topic by the model (module docstring)."""
    if not model.topics or len(vectors) == 0:
        return [Assigned(OTHER, OTHER, 0.0, model.version) for _ in range(len(vectors))]
    centres = np.array([t.centre for t in model.topics], dtype=np.float32)
    similarity = vectors @ centres.T
    best = similarity.argmax(axis=1)
    out = []
    for row, column in enumerate(best.tolist()):
        value = float(similarity[row, column])
        topic = model.topics[column]
        out.append(
            Assigned(topic.id, topic.label, value, model.version)
            if value >= model.min_similarity
            else Assigned(OTHER, OTHER, value, model.version)
        )
    return out
