"""Judges: openai (any OpenAI-compatible endpoint), local (a llama.cpp server), lexical, cascade."""

from pipeline.judges.base import Judge, JudgeError, JudgeOutput, NliOutput, Premise

__all__ = ["Judge", "JudgeError", "JudgeOutput", "NliOutput", "Premise"]
