"""What a span is (``span_kind``), by the conventions' kind attributes."""

from __future__ import annotations

from typing import Any, Literal

MODEL_OPERATIONS = ("chat", "text_completion", "generate_content")
AGENT_KINDS = {"invoke_agent", "AGENT", "agent", "workflow"}
INPUT_MESSAGE_KEYS = ("gen_ai.prompt.", "gen_ai.input.messages", "llm.input_messages.")
SpanKind = Literal["model", "tool", "agent", "retrieval", "other"]


def span_kind(attrs: dict[str, Any]) -> SpanKind:
    """What a span is, by the conventions' kind attributes (OpenInference ``openinference.span.kind``,
    GenAI ``gen_ai.operation.name``, OpenLLMetry ``traceloop.span.kind``), in this order: a model call
    (an OpenInference LLM span, a GenAI ``chat``-like operation), a tool's execution (GenAI
    ``execute_tool``, OpenInference TOOL, OpenLLMetry ``tool``), an agent (or a workflow), a retrieval
    (GenAI ``retrieval``, OpenInference RETRIEVER); a span that no convention marks is a model call when
    it carries input messages (chain, agent, workflow and tool spans of LangChain, LangGraph and the agent
    SDKs carry the messages they were given, and are marked)."""
    kind = attrs.get("openinference.span.kind")
    operation = attrs.get("gen_ai.operation.name")
    traceloop = attrs.get("traceloop.span.kind")
    if kind == "LLM" or operation in MODEL_OPERATIONS:
        return "model"
    if operation == "execute_tool" or kind == "TOOL" or traceloop == "tool":
        return "tool"
    if {operation, kind, traceloop} & AGENT_KINDS:
        return "agent"
    if operation == "retrieval" or kind == "RETRIEVER":
        return "retrieval"
    if not (kind or operation or traceloop) and any(k.startswith(INPUT_MESSAGE_KEYS) for k in attrs):
        return "model"
    return "other"
