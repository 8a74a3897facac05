"""Judges: openai (any OpenAI-compatible endpoint), local (a llama.cpp server), lexical, cascade."""

from pipeline.judges.base import Judge, JudgeOutput, NliOutput, Premise
from schemas.errors import JudgeError

__all__ = ["Judge", "JudgeError", "JudgeOutput", "NliOutput", "Premise"]
