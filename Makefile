# Entry points for people and CI. `make test` is the one command CI runs (via .ci/run):
# it installs what it needs (apt and pip), builds the default image and runs every test.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
FTENV := PYTHONPATH=scripts python3 -m ftenv.cli
VARIANT ?= $(shell $(FTENV) versions name)
VENV ?= .venv
PY := $(VENV)/bin/python
# Local builds and runs choose the engine, the base and the GPUs for this machine
# (scripts/imagetools/local.py): `make run GPUS=none` keeps the GPUs out, ENGINE=docker|podman and
# BASE=standin|upstream force a choice.
LOCAL := PYTHONPATH=scripts python3 -m imagetools local
ENGINE ?= auto
BASE ?= auto
GPUS ?= auto
IMAGE = $(shell $(LOCAL) tag --variant $(VARIANT))
# tini: tests/test_watch.py runs `ftenv watch` under it as the image does.
ENGINE_PKGS := tini buildah podman debootstrap runc fuse-overlayfs slirp4netns uidmap containernetworking-plugins
# A one-machine Slurm for tests/test_slurm.py (the test starts and stops its daemons itself).
SLURM_PKGS := slurm-wlm munge

.PHONY: help run test unit lint release-check bake generate image standin-base engine venv lock clean mutation scan layer-check

help:
	@echo "make run      build the $(VARIANT) image and run it on its default (GPUs passed when found)"
	@echo "make image    build the $(VARIANT) image ($(IMAGE))"
	@echo "make test     install tools, lint, build the image, run all tests (what CI runs)"
	@echo "make unit     fast tests only (no image build)"
	@echo "make lock     recompile docker/locks/ from versions.toml"
	@echo "make bake     regenerate docker/docker-bake.json from versions.toml"
	@echo "make generate after editing versions.toml: locks, bake file, versions in README.md and docs/"
	@echo "make release-check  actionlint + bake file, tags, labels, action pins (docs/releasing.md)"
	@echo "make mutation  mutation score of the pure-logic modules (docs/testing.md; slow, not in CI)"
	@echo "make scan     known vulnerabilities in the lock and the image (grype; exit 2: not scanned)"
	@echo "make layer-check  the torch layer survives a change to the rest of the lock (rebuilds)"

venv: $(VENV)/.installed
# The host venv holds the same locked stack as the default image (torch runs on the CPU here),
# plus ftenv (editable) and the test tools.
$(VENV)/.installed: pyproject.toml docker/locks/$(VARIANT).txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --no-deps --require-hashes -r docker/locks/$(VARIANT).txt
	$(PY) -m pip install -q -e '.[test]'
	touch $@

engine:
	@command -v podman >/dev/null && command -v debootstrap >/dev/null && command -v tini >/dev/null \
	  && command -v slurmctld >/dev/null && command -v munged >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(ENGINE_PKGS) $(SLURM_PKGS) >/dev/null; }

# The stand-in base for machines that cannot pull the real one (`make image` makes it when needed).
standin-base:
	$(LOCAL) standin --engine $(ENGINE)

# Docker (bake) when its daemon answers, else podman; the real base when it can be pulled, else the
# stand-in. Tagged $(IMAGE) only.
image:
	flock /tmp/ftenv-build.lock python3 scripts/build_image.py $(VARIANT) --engine $(ENGINE) --base $(BASE)

# The main job: the image on its built-in default, with the GPUs passed where there are any.
run: image
	$(LOCAL) run --variant $(VARIANT) --engine $(ENGINE) --gpus $(GPUS)

lint: venv
	$(VENV)/bin/ruff check scripts tests benchmarks
	$(VENV)/bin/ruff format --check scripts tests benchmarks
	$(VENV)/bin/hadolint docker/Dockerfile
	$(VENV)/bin/shellcheck docker/entrypoint.sh scripts/*.sh .ci/run

unit: venv
	$(VENV)/bin/pytest -m "not container" $(PYTEST_ARGS)

# The container tests drive podman: the image is built with it even where a Docker daemon answers.
test: ENGINE = podman
test: engine venv lint release-check image
	FTENV_TEST_IMAGE=$(IMAGE) $(VENV)/bin/pytest $(PYTEST_ARGS)

# What can be checked of the release pipeline without GitHub (docs/releasing.md): the workflows
# (actionlint, with shellcheck on their scripts), then the bake file, tags, labels and action pins.
release-check: venv
	$(VENV)/bin/actionlint -shellcheck $(VENV)/bin/shellcheck
	$(PY) -m imagetools release check

# Mutation testing of the pure-logic modules, each against its own tests (docs/testing.md). Minutes
# per module on 2 cores, so not part of `make test`. One module: make mutation MUTATION_ARGS=sdpa
mutation: venv
	$(PY) scripts/mutation.py $(MUTATION_ARGS)

# docker/docker-bake.json is generated from versions.toml (release-check fails when it is stale).
bake:
	PYTHONPATH=scripts python3 -m imagetools release bake --write

# A version bump is one edit of versions.toml plus this: the locks, the bake file, and the versions
# README.md and docs/ spell (scripts/imagetools/generated.py says which parts are generated).
generate: lock bake
	PYTHONPATH=scripts python3 -m imagetools.generated --write

# Recompile the locks from versions.toml (needs network; uv resolves for Linux, Python 3.11+).
LOCK_COMPILE ?= uvx --from uv==0.13.9 uv pip compile
lock:
	for v in $$($(FTENV) versions variants); do \
	  $(FTENV) versions requirements $$v | $(LOCK_COMPILE) - \
	    --universal --fork-strategy fewest --python-version 3.11 --generate-hashes \
	    --custom-compile-command 'make lock' -o docker/locks/$$v.txt; \
	done
	PYTHONPATH=scripts python3 -m imagetools locks split --write

# Known vulnerabilities (docs/releasing.md, "Known vulnerabilities"): the lock's SBOM and the built
# image, with the release's policy. Exit 1: a critical finding with a fix; 2: not scanned (no grype,
# or its database unreachable).
scan:
	PYTHONPATH=scripts python3 -m imagetools scan $(VARIANT) --image $(IMAGE)

# Rebuilds the image with a changed rest-of-lock and fails if the torch layer changed with it.
layer-check: image
	flock /tmp/ftenv-build.lock env PYTHONPATH=scripts python3 -m imagetools layers rebuild-check \
	  $(VARIANT) --image $(IMAGE)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

# The wheel kit for a GPU machine that has torch but not FunASR (docs/gpu-results.md): .whl/ holds
# the lock's packages that machine lacks; prints the exact call to make there.
.PHONY: gpu-kit
gpu-kit: venv
	PYTHONPATH=scripts $(PY) -m imagetools gpukit build
