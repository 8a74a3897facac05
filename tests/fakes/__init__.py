"""Test doubles that speak real protocols (never offered as production components).

openai_server: FakeOpenAIServer, a fake OpenAI-compatible HTTP server
(``python -m tests.fakes.openai_server``).
"""
