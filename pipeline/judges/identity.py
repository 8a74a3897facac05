"""Which judge produced an evaluation: the model behind its verdicts and the NLI prompt's version.

People's agreement with the judge is measured per judge identity (``pipeline.metrics.agreement``): when a
provider updates the model behind a name, or the NLI prompt changes, the new verdicts start a series of
their own instead of blurring into the old one. The identity comes from the judge's configuration, not
from the calls one interaction happened to need, so every evaluation of one configuration carries the
same identity (a cascade is ``lexical-v1+<its LLM>`` even where the LLM was not asked).
"""

from __future__ import annotations

import functools

from schemas.settings import JudgeSettings

#: the lexical judge's model name (its JudgeCalls and the verdict cache use it too)
LEXICAL_MODEL = "lexical-v1"


def _llm_model(js: JudgeSettings, kind: str) -> str:
    if kind == "local":
        from pipeline.judges.local_model import QWEN_CODER_1_5B, model_identity

        return model_identity(QWEN_CODER_1_5B.file_name, QWEN_CODER_1_5B.sha256)
    return js.model


def judge_model(js: JudgeSettings) -> str:
    """The model behind the configured judge's verdicts."""
    if js.kind == "lexical":
        return LEXICAL_MODEL
    if js.kind == "cascade":
        return f"{LEXICAL_MODEL}+{_llm_model(js, js.cascade_llm)}"
    return _llm_model(js, js.kind)


@functools.cache
def prompt_version(kind: str) -> str:
    """The NLI prompt's version and fingerprint for a judge kind that prompts an LLM; '' for lexical."""
    if kind == "lexical":
        return ""
    from prompts import Prompts

    return Prompts().versions()["nli"]
