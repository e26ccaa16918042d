# Entry points for people and CI. `make test` is the one command CI runs (via .ci/run):
# it installs what it needs (apt and pip), builds the default image and runs every test.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
# versions.toml's values, read by ftenv.stack.versions alone (the host's stock python3 has no torch).
VERSIONS := PYTHONPATH=scripts python3 -m ftenv.stack.versions
VARIANT ?= $(shell $(VERSIONS) name)
VENV ?= .venv
PY := $(VENV)/bin/python
# Local builds and runs choose the engine, the base and the GPUs for this machine
# (scripts/imagetools/local/machine.py): `make run GPUS=none` keeps the GPUs out, ENGINE=docker|podman and
# BASE=standin|upstream force a choice. The host side runs on a distribution's stock python3 (3.9+,
# standard library only; below 3.11 with tomli, which `make engine`/`make run` install where they can).
# CA_BUNDLE=/path/ca.pem: a CA bundle for pip behind a TLS-intercepting proxy, passed to the build as
# a secret (docs/building-here.md), never written into the image.
TOOLS := PYTHONPATH=scripts python3 -m imagetools
LOCAL := $(TOOLS) local
ENGINE ?= auto
BASE ?= auto
GPUS ?= auto
CA_BUNDLE ?=
IMAGE = $(shell $(LOCAL) tag --variant $(VARIANT))

.PHONY: help run test unit lint release-check bake generate image standin-base engine venv lock clean mutation scan layer-check docker-check

help: ## this list (every target, from its `##` comment; starts no Python)
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z0-9-]+):.*## /\1\t/' | \
	  awk -F'\t' '{ printf "make %-14s %s\n", $$1, $$2 }'

venv: $(VENV)/.installed ## the host venv: the default image's locked stack, ftenv (editable), test tools
# The host venv holds the same locked stack as the default image (torch runs on the CPU here),
# plus ftenv (editable) and the test tools.
# Every lock as a prerequisite: naming the default one would start Python to read it at parse time.
# Last, the released-layout fixture's sources (versions.toml's [layout_sources]), files only: --no-deps.
$(VENV)/.installed: pyproject.toml versions.toml $(wildcard docker/locks/*.txt)
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --no-deps --require-hashes -r docker/locks/$(VARIANT).txt
	$(PY) -m pip install -q -e '.[test]'
	$(PY) -m pip install -q --no-deps $$(PYTHONPATH=scripts $(PY) -m imagetools released-layout --requirements)
	touch $@

engine: ## install podman, its tools, tini and Slurm for the tests (root with apt-get; scripts/imagetools/local/engine.py)
	$(TOOLS) engine --for test

# The stand-in base for machines that cannot pull the real one (`make image` makes it when needed).
standin-base: ## make the stand-in base (for machines that cannot pull the real one)
	$(LOCAL) standin --engine $(ENGINE)

# Docker when its daemon answers (bake with buildx, else `docker build` with BuildKit), else podman;
# the real base when it can be pulled, else the stand-in. Tagged $(IMAGE) only.
image: ## build the default image (localhost/ftenv:VARIANT); CA_BUNDLE=PEM for a TLS-intercepting proxy
	flock /tmp/ftenv-build.lock python3 scripts/build_image.py $(VARIANT) --engine $(ENGINE) --base $(BASE) \
	  $(if $(CA_BUNDLE),--ca-bundle '$(CA_BUNDLE)')

# The main job: the image on its built-in default, with the GPUs passed where there are any. On a
# machine without an engine it installs podman first where it can (root with apt-get), else says how.
run: ## build the default image and run its default (report, then self-check); installs podman if needed
	$(TOOLS) engine --for run
	$(MAKE) --no-print-directory image
	$(LOCAL) run --variant=$(VARIANT) --engine $(ENGINE) --gpus $(GPUS)

# The linux/arm64 image (GH200, GB200) built and started on this machine's CPU under qemu-user-static
# (scripts/imagetools/local/emulated.py; docs/building-here.md, "linux/arm64 under emulation"). An hour or
# more on 2 cores, so not part of `make test`; emulated times say nothing about speed.
EMULATED := $(TOOLS) emulated
.PHONY: image-arm64 check-arm64
image-arm64: ## build the linux/arm64 image under qemu emulation (slow; not in `make test`)
	$(TOOLS) engine --for emulate
	flock /tmp/ftenv-build.lock env $(EMULATED) build --variant $(VARIANT) --platform linux/arm64

check-arm64: ## start the linux/arm64 image under emulation: its CPU, `ftenv report`, the self-check
	$(EMULATED) check --variant $(VARIANT) --platform linux/arm64

# Every tracked Python file (ruff honours .gitignore; tests/test_lint.py checks that its file list
# covers `git ls-files '*.py'`), the import contracts of pyproject.toml ([tool.importlinter]: the
# layers of docs/architecture.md) and every tracked shell file.
lint: venv ## ruff, ruff format, the import contracts (lint-imports), hadolint, shellcheck
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	PYTHONPATH=scripts $(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/hadolint docker/Dockerfile
	$(VENV)/bin/shellcheck $$(git ls-files '*.sh' '*.sbatch') .ci/run

unit: venv ## fast tests only (no image build, no slow test)
	$(VENV)/bin/pytest -m "not container and not slow" $(PYTEST_ARGS)

# The container tests drive podman: the image is built with it even where a Docker daemon answers.
test: ENGINE = podman
test: engine venv lint release-check image ## what CI runs: installs its tools (apt, pip), lints, builds the image, runs every test
	FTENV_TEST_IMAGE=$(IMAGE) $(VENV)/bin/pytest --junit-xml=build/test-results.xml $(PYTEST_ARGS)

# What can be checked of the release pipeline without GitHub (docs/releasing.md): the workflows
# (actionlint, with shellcheck on their scripts), then the bake file, tags, labels and action pins.
release-check: venv ## actionlint, then the bake file, tags, labels, action pins (docs/releasing.md)
	$(VENV)/bin/actionlint -shellcheck $(VENV)/bin/shellcheck
	$(PY) -m imagetools release check

# Mutation testing of the pure-logic modules, each against its own tests (docs/testing.md). Minutes
# per module on 2 cores, so not part of `make test`. One module: make mutation MUTATION_ARGS=sdpa
mutation: venv ## mutation score of the pure-logic modules (docs/testing.md; slow, not in CI)
	$(PY) scripts/mutation.py $(MUTATION_ARGS)

# docker/docker-bake.json is generated from versions.toml (release-check fails when it is stale).
bake: ## regenerate docker/docker-bake.json from versions.toml
	PYTHONPATH=scripts python3 -m imagetools release bake --write

# A version bump is one edit of versions.toml plus this: the locks, the bake file, and the versions
# README.md and docs/ spell (scripts/imagetools/release/generated.py says which parts are generated).
# The generated parts are rendered by the report's own code, which needs the lock (packaging, at
# least): they run in the venv (`make venv` first), never on a distribution's bare python3.
generate: lock bake ## after editing versions.toml (and `make venv`): locks, bake file, versions in README.md and docs/
	@test -x $(PY) || { echo "make generate: $(PY) missing: run \`make venv\` first (the docs are rendered with the locked stack)" >&2; exit 2; }
	PYTHONPATH=scripts $(PY) -m imagetools.release.generated --write

# Recompile the locks from versions.toml (needs network; uv resolves for Linux, Python 3.11+).
# uv keeps the versions of the lock it writes over where they still fit, so a lock is stable; a new
# variant's lock starts from the default variant's, so it shares every version of the rest it can
# (and with it the image's rest layer: docs/releasing.md, "Layers"). LOCK_VARIANTS=cu132: only those.
LOCK_COMPILE ?= uvx --from uv==0.13.9 uv pip compile
LOCK_VARIANTS ?= $(shell $(VERSIONS) variants)
lock: ## recompile docker/locks/ from versions.toml (needs network; a new variant starts from the default's)
	for v in $(LOCK_VARIANTS); do \
	  test -f docker/locks/$$v.txt || cp docker/locks/$$($(VERSIONS) name).txt docker/locks/$$v.txt; \
	  $(VERSIONS) requirements $$v | $(LOCK_COMPILE) - \
	    --universal --fork-strategy fewest --python-version 3.11 --generate-hashes \
	    --custom-compile-command 'make lock' -o docker/locks/$$v.txt; \
	done
	PYTHONPATH=scripts python3 -m imagetools locks split --write

# What each torch wheel pins (its cuDNN) and whether its libtorch_cuda.so holds the cuDNN-first rule and
# its switch, read from the wheels and recorded with their file names and sha256 in
# scripts/imagetools/release/wheelfacts.json; the guide's per-version rows are generated from it (`make
# generate`). Fetch the wheels first, outside the repository:
# `pip download --no-deps --only-binary=:all: torch==2.15.0 -d DIR`, then WHEELS='DIR/*.whl'.
.PHONY: wheel-facts
wheel-facts: venv ## record torch wheels' cuDNN pins and libtorch_cuda.so strings (WHEELS='DIR/*.whl')
	@test -n "$(WHEELS)" || { echo "make wheel-facts: name the wheels: WHEELS='DIR/torch-*.whl'" >&2; exit 2; }
	PYTHONPATH=scripts $(PY) -m imagetools wheelfacts --write $(WHEELS)

# Known vulnerabilities (docs/releasing.md, "Known vulnerabilities"): the lock's SBOM and the built
# image, with the release's policy. Exit 1: a critical finding with a fix; 2: not scanned (no grype,
# or its database unreachable).
scan: ## known vulnerabilities in the lock and the image (grype; exit 2: not scanned)
	PYTHONPATH=scripts python3 -m imagetools scan $(VARIANT) --image $(IMAGE)

# A real Docker daemon without buildx (Debian's docker.io, installed by the engine step where no
# dockerd is): started and stopped by the check itself, the image built through `docker build` with
# BuildKit on the stand-in and its default run to PASS (docs/building-here.md; minutes, not in `make test`).
docker-check: venv ## build and run the image on Debian's dockerd without buildx (installs docker.io; minutes)
	$(TOOLS) engine --for docker-check
	FTENV_DOCKER_CHECK=1 flock /tmp/ftenv-build.lock $(VENV)/bin/pytest tests/docker_check -rP $(PYTEST_ARGS)

# Rebuilds the image with a changed rest-of-lock and fails if the torch layer changed with it.
layer-check: image ## the torch layer survives a change to the rest of the lock (rebuilds)
	flock /tmp/ftenv-build.lock env PYTHONPATH=scripts python3 -m imagetools layers rebuild-check \
	  $(VARIANT) --image $(IMAGE)

clean: ## remove the host venv and tool caches
	rm -rf $(VENV) .pytest_cache .ruff_cache

# The wheel kit for a GPU machine that has torch but not FunASR (docs/gpu-results.md): .whl/ holds
# the lock's packages that machine lacks; prints the exact call to make there.
.PHONY: gpu-kit
gpu-kit: venv ## the wheel kit for a GPU machine with torch but no FunASR (docs/gpu-results.md)
	PYTHONPATH=scripts $(PY) -m imagetools gpukit build
