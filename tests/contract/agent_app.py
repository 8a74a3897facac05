"""A small tool-calling support bot on one agent framework (or the plain OpenAI client), instrumented with
one OpenTelemetry instrumentation, run as its own process in the environment that framework needs
(``make dev`` builds them: see the Makefile):

    python -m tests.contract.agent_app --framework NAME --base-url URL --out DIR

It answers two turns of one conversation; each turn the model (the fake OpenAI server, scripted by
``tests/contract/test_agents.py``) calls the knowledge-base tool ``search_kb`` first, then answers from
its result. What the SDK recorded is written as OTLP/JSON the way the Collector's file exporter does
(``tests.contract.rag_app.Recorder``): DIR/traces.jsonl and DIR/logs.jsonl. Nothing of groundwatch is
imported here.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.contract.rag_app import APP, MODEL, SESSION, Recorder, session

SYSTEM = "You are the X200 support bot. Answer from the knowledge base."
#: (question, the fake model's answer, the document the tool returns)
TURNS = [
    ("Which battery does the X200 use?", "The X200 uses the B7 lithium battery.", "specs.pdf"),
    ("How long is its warranty?", "The B7 battery is covered for 8 years or 100,000 miles.", "warranty.pdf"),
]
DOCUMENTS = {
    "specs.pdf": "The X200 uses the B7 lithium battery, 75 kWh.",
    "warranty.pdf": "The B7 battery is covered for 8 years or 100,000 miles, whichever comes first.",
}
TOOL = "search_kb"
TOOL_DESCRIPTION = "Search the X200 knowledge base."


def search_kb(query: str) -> str:
    """The knowledge-base tool: a JSON list of the matching documents."""
    doc = "warranty.pdf" if "warranty" in query.lower() else "specs.pdf"
    return json.dumps([{"id": doc, "content": DOCUMENTS[doc]}])


#: framework -> (instrumentation, mode): what ``run`` sets up
FRAMEWORKS = (
    "openai-v2",
    "openai-v2-events",
    "openinference-openai",
    "openllmetry-openai",
    "openinference-langgraph",
    "openllmetry-langgraph",
    "openinference-agents",
    "openllmetry-agents",
    "pydantic-ai",
    "pydantic-ai-v6",
)
OPENAI_TOOLS = [{"type": "function", "function": {
    "name": TOOL, "description": TOOL_DESCRIPTION,
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
}}]  # fmt: skip


def plain_client(name: str, base_url: str, tracer: Any) -> Callable[[list[tuple[str, str]], str], str]:
    """A function-calling loop on the OpenAI client; the app records each tool execution in its
    instrumentation's convention (GenAI ``execute_tool``, OpenInference TOOL, OpenLLMetry ``tool``)."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="sk-test")

    def tool_span(call: Any) -> str:
        arguments = call.function.arguments
        with tracer.start_as_current_span(
            f"execute_tool {TOOL}" if name.startswith("openai-v2") else TOOL
        ) as span:
            result = search_kb(**json.loads(arguments))
            if name.startswith("openai-v2"):
                span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": TOOL,
                                     "gen_ai.tool.call.id": call.id, "gen_ai.tool.call.arguments": arguments,
                                     "gen_ai.tool.call.result": result})  # fmt: skip
            elif name == "openinference-openai":
                span.set_attributes({"openinference.span.kind": "TOOL", "tool.name": TOOL,
                                     "input.value": arguments, "output.value": result})  # fmt: skip
            else:
                span.set_attributes({"traceloop.span.kind": "tool", "traceloop.entity.name": TOOL,
                                     "traceloop.entity.input": arguments,
                                     "traceloop.entity.output": result})  # fmt: skip
        return result

    def turn(history: list[tuple[str, str]], question: str) -> str:
        chat: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            *({"role": role, "content": text} for role, text in history),
            {"role": "user", "content": question},
        ]
        with tracer.start_as_current_span(f"invoke_agent {APP}") as root:
            root.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": APP,
                                 "gen_ai.conversation.id": SESSION})  # fmt: skip
            reply = client.chat.completions.create(model=MODEL, messages=chat, tools=OPENAI_TOOLS)  # type: ignore[arg-type]
            while reply.choices[0].message.tool_calls:
                message = reply.choices[0].message
                chat.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls or []:
                    chat.append({"role": "tool", "tool_call_id": call.id, "content": tool_span(call)})
                reply = client.chat.completions.create(model=MODEL, messages=chat, tools=OPENAI_TOOLS)  # type: ignore[arg-type]
            return reply.choices[0].message.content or ""

    return turn


def langgraph(base_url: str) -> Callable[[list[tuple[str, str]], str], str]:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    @tool(TOOL, description=TOOL_DESCRIPTION)
    def kb(query: str) -> str:
        return search_kb(query)

    model = ChatOpenAI(model=MODEL, base_url=base_url, api_key="sk-test")  # type: ignore[arg-type]
    agent = create_react_agent(model, [kb], prompt=SYSTEM, name=APP)

    def turn(history: list[tuple[str, str]], question: str) -> str:
        state = agent.invoke({"messages": [*history, ("user", question)]})
        return str(state["messages"][-1].content)

    return turn


def openai_agents(base_url: str) -> Callable[[list[tuple[str, str]], str], str]:
    from agents import Agent, Runner, function_tool, set_default_openai_client
    from openai import AsyncOpenAI

    set_default_openai_client(AsyncOpenAI(base_url=base_url, api_key="sk-test"), use_for_tracing=False)

    @function_tool(name_override=TOOL, description_override=TOOL_DESCRIPTION)
    def kb(query: str) -> str:
        return search_kb(query)

    agent = Agent(name=APP, instructions=SYSTEM, tools=[kb], model=MODEL)

    def turn(history: list[tuple[str, str]], question: str) -> str:
        items: list[Any] = [{"role": role, "content": text} for role, text in history]
        result = Runner.run_sync(agent, [*items, {"role": "user", "content": question}])
        return str(result.final_output)

    return turn


def pydantic_ai(base_url: str) -> Callable[[list[tuple[str, str]], str], str]:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=base_url, api_key="sk-test"))
    agent = Agent(model, instructions=SYSTEM, name=APP)

    @agent.tool_plain(name=TOOL, description=TOOL_DESCRIPTION)
    def kb(query: str) -> str:
        return search_kb(query)

    messages: list[Any] = []

    def turn(history: list[tuple[str, str]], question: str) -> str:
        result = agent.run_sync(question, message_history=list(messages))
        messages[:] = result.all_messages()
        return str(result.output)

    return turn


def instrument(name: str, tracer_provider: Any, logger_provider: Any) -> None:
    providers = {"tracer_provider": tracer_provider}
    if name.startswith("openai-v2"):
        mode = "EVENT_ONLY" if name.endswith("-events") else "SPAN_ONLY"
        os.environ.update({"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                           "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": mode})  # fmt: skip
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as OpenAIv2

        OpenAIv2().instrument(**providers, logger_provider=logger_provider)
    elif name == "openinference-openai":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInference

        OpenInference().instrument(**providers)
    elif name == "openllmetry-openai":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry

        OpenLLMetry().instrument(**providers)
    elif name == "openinference-langgraph":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(**providers)
    elif name == "openllmetry-langgraph":
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(**providers)
    elif name.endswith("-agents"):
        from agents import set_trace_processors

        set_trace_processors([])  # (not OpenAI's exporter: nothing leaves this machine)
        if name == "openinference-agents":
            from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

            OpenAIAgentsInstrumentor().instrument(**providers)
        else:
            from opentelemetry.instrumentation.openai_agents import (
                OpenAIAgentsInstrumentor as OpenLLMetryAgents,
            )

            OpenLLMetryAgents().instrument(**providers)
    else:
        from pydantic_ai import Agent
        from pydantic_ai.models.instrumented import InstrumentationSettings

        version = 6 if name == "pydantic-ai-v6" else 5
        Agent.instrument_all(InstrumentationSettings(tracer_provider=tracer_provider, version=version))


def run(name: str, base_url: str, out: Path) -> None:
    recorder = Recorder(APP)
    instrument(name, recorder.tracer_provider, recorder.logger_provider)
    tracer = recorder.tracer_provider.get_tracer("support-app")
    if name.endswith("-openai") or name.startswith("openai-v2"):
        turn = plain_client(name, base_url, tracer)
    elif name.endswith("-langgraph"):
        turn = langgraph(base_url)
    elif name.endswith("-agents"):
        turn = openai_agents(base_url)
    else:
        turn = pydantic_ai(base_url)
    history: list[tuple[str, str]] = []
    for question, expected, _ in TURNS:
        with session(name.startswith("openinference")):
            answer = turn(history, question)
        if answer != expected:
            raise SystemExit(f"the app got {answer!r} for {question!r}, not {expected!r}")
        history += [("user", question), ("assistant", answer)]
    recorder.write(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", required=True, choices=FRAMEWORKS)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    run(args.framework, args.base_url, args.out)


if __name__ == "__main__":
    main()
