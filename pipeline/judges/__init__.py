"""Judges: openai (any OpenAI-compatible endpoint), local (llama.cpp server started here), lexical, cascade."""

from pipeline.judges.base import Judge, JudgeError, JudgeOutput, NliOutput, Premise

__all__ = ["Judge", "JudgeError", "JudgeOutput", "NliOutput", "Premise"]
