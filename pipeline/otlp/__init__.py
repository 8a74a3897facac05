"""OpenTelemetry traces and logs (OTLP/JSON) -> interactions: one per final answer of a trace, its
question and answer, the tool calls and results of the trace as its ``steps``, the retrieved passages of
the trace as its context.

**One interaction per final answer** (``convert_trace``; ``pipeline.otlp_join`` holds a trace's pieces
until it is complete):

- a *model call* is an OpenInference LLM span, a GenAI ``chat`` / ``text_completion`` /
  ``generate_content`` span, or a span with input messages that no convention marks as something else:
  chain, agent, workflow and tool spans (``openinference.span.kind``, ``traceloop.span.kind``,
  ``gen_ai.operation.name`` ``invoke_agent``...) carry the messages they were given and are not calls;
- a call whose output is only tool calls is a step of the trace's answer, not an interaction;
- of the calls that answer in text, the interaction is the answer returned to the user: the call whose
  answer is the output of the trace's outermost agent span (``invoke_agent``, OpenInference AGENT,
  OpenLLMetry agent or workflow), else the last to answer; the others (sub-agents, handoffs) are steps
  named by their agent, their question as arguments and their answer as result;
- the steps are the tool calls and results of the answering call's input messages (OpenAI's
  ``tool_calls`` and ``tool`` turns, GenAI ``tool_call`` / ``tool_call_response`` parts, also under role
  ``user`` as Pydantic AI writes them), the outputs of the calls that only asked for tools, and the tool
  spans (GenAI ``execute_tool``, OpenInference TOOL, OpenLLMetry ``tool``; LangChain's serialised
  ToolMessage and ``{"lc": 1, ...}`` form unwrapped), one step per call (``schemas.tool_pairing``
  pairs them); a span's error status or exception event makes its step an error; a call without a
  result has none (``no_result``); a call before the question's turn is ``earlier_turn``;
- a call with neither text nor tool calls is an error with the reason (the worker dead-letters it);
- the conversation id is ``gen_ai.conversation.id``, ``session.id`` or
  ``traceloop.association.properties.session_id`` of the call, else of the spans above it, else of any
  span of the trace.

A model call is read from its span, from its log records (GenAI events), or from both, joined by trace
and span id:

- **span attributes**: the GenAI semantic conventions (``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` and ``gen_ai.system_instructions``, JSON strings or structured values, with
  ``parts``), OpenLLMetry's indexed ``gen_ai.prompt.N.role|content`` / ``gen_ai.completion.N.content``,
  or OpenInference (``llm.input_messages.N.message.role|content`` or ``...message.contents.M.
  message_content.type|text``, ``llm.output_messages.N...``, else ``input.value`` / ``output.value``);
- **log records**: ``gen_ai.client.inference.operation.details`` (the same ``gen_ai.*.messages``
  attributes, structured), or the semantic conventions 1.30 events ``gen_ai.system.message``,
  ``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message`` and ``gen_ai.choice``
  (the content in the body), in the order they were recorded;
- **content** in any layout: a string; an array of parts (``text`` parts joined; images, audio, files
  counted under ``metadata.parts_not_judged``, not judged; tool parts read as steps); a string holding a
  JSON array of parts (OpenLLMetry); a structured value;
- **retrieval**: OpenInference RETRIEVER spans (``retrieval.documents.N.document.content|id``) and GenAI
  ``retrieval`` spans (``gen_ai.retrieval.documents``, a JSON string or structured list of
  ``{id, score, content}``: the specification requires only id and score, which carry no text to judge
  against, so only documents with ``content`` become passages). Each passage becomes the context of
  the final answer its retrieval span belongs to: the first that ends after the span starts (the rule
  that gives tool spans to their answer), so a trace that spans several turns judges each answer
  against what was retrieved for it, not what a later turn retrieved;
- the **conversation**: the input messages become the interaction's ``messages`` (roles user, human or
  none -> user; assistant, ai, model, bot -> assistant; system, developer -> system), so the last user
  message that asks something is the question and the turns before it the history. Tool turns (read as
  steps) and turns without text are left out; ``metadata.turns`` still counts every input message;
- the **app** is the resource's ``service.name``; the model ``gen_ai.response.model``,
  ``gen_ai.request.model`` or ``llm.model_name`` (of the span, else of the records); the ground truth
  ``groundwatch.ground_truth``.

The interaction id is the trace id and the answering call's span id, so a re-exported trace is the same
interaction. A call that cannot be mapped is returned with the reason (the worker dead-letters it).

The package, by job: ``wire`` (the OTLP/JSON wire format, a request read into a ``Batch``),
``conventions`` (message content, tool parts and documents across GenAI, OpenInference and OpenLLMetry),
``kinds`` (``span_kind``: what a span is), ``spans`` (tool spans and the trace's other spans), ``trace``
(a trace's interactions, its steps paired by ``schemas.tool_pairing``, the rule the chat-message reader
uses), ``model`` (the shapes they share).
"""

from __future__ import annotations

from pipeline.otlp.conventions import Call, content, documents, messages, record_messages
from pipeline.otlp.kinds import SpanKind, span_kind
from pipeline.otlp.model import NO_CONTENT, NO_CONTENT_IN_RECORDS, Batch, CallError, Message, Passage
from pipeline.otlp.trace import Trace, TraceOutcome, convert_trace, reason
from pipeline.otlp.wire import attribute_value, attributes, check_shape, read_batch

__all__ = [
    "NO_CONTENT", "NO_CONTENT_IN_RECORDS", "Batch", "Call", "CallError", "Message", "Passage", "SpanKind",
    "Trace", "TraceOutcome", "attribute_value", "attributes", "check_shape", "content", "convert_trace",
    "documents", "messages", "read_batch", "reason", "record_messages", "span_kind",
]  # fmt: skip
