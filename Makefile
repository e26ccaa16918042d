# Entry points for people and CI. `make test` is the one command CI runs (via .ci/run):
# it installs what it needs (apt and pip), builds the default image and runs every test.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
FTENV := PYTHONPATH=scripts python3 -m ftenv.cli
VARIANT ?= $(shell $(FTENV) versions name)
VENV ?= .venv
PY := $(VENV)/bin/python
export CONTAINERS_CONF := $(CURDIR)/scripts/containers.conf
IMAGE = $(shell $(FTENV) versions image $(VARIANT))
BASE_IMAGE = $(shell $(FTENV) versions build-args $(VARIANT) | sed -n 's/^--build-arg=BASE_IMAGE=//p')
ENGINE_PKGS := buildah podman debootstrap runc fuse-overlayfs slirp4netns uidmap containernetworking-plugins
# A one-machine Slurm for tests/test_slurm.py (the test starts and stops its daemons itself).
SLURM_PKGS := slurm-wlm munge

.PHONY: help run test unit lint release-check bake image standin-base engine venv lock clean scan layer-check

help:
	@echo "make run      build the $(VARIANT) image and run it on its default"
	@echo "make image    build the $(VARIANT) image ($(IMAGE))"
	@echo "make test     install tools, lint, build the image, run all tests (what CI runs)"
	@echo "make unit     fast tests only (no image build)"
	@echo "make lock     recompile docker/locks/ from versions.toml"
	@echo "make bake     regenerate docker/docker-bake.json from versions.toml"
	@echo "make release-check  actionlint + bake file, tags, labels, action pins (docs/releasing.md)"
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
	@command -v podman >/dev/null && command -v debootstrap >/dev/null \
	  && command -v slurmctld >/dev/null && command -v munged >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(ENGINE_PKGS) $(SLURM_PKGS) >/dev/null; }

standin-base: engine
	scripts/make-standin-base.sh $(BASE_IMAGE)

image: standin-base
	flock /tmp/ftenv-build.lock python3 scripts/build_image.py $(VARIANT) --tag ftenv:$(VARIANT)

# The main job: the image on its built-in default (GPUs are used where podman/CDI exposes them).
run: image
	podman run --rm --pull=never $(IMAGE)

lint: venv
	$(VENV)/bin/ruff check scripts tests benchmarks
	$(VENV)/bin/ruff format --check scripts tests benchmarks
	$(VENV)/bin/hadolint docker/Dockerfile
	$(VENV)/bin/shellcheck docker/entrypoint.sh scripts/*.sh .ci/run

unit: venv
	$(VENV)/bin/pytest -m "not container" $(PYTEST_ARGS)

test: venv lint release-check image
	FTENV_TEST_IMAGE=$(IMAGE) $(VENV)/bin/pytest $(PYTEST_ARGS)

# What can be checked of the release pipeline without GitHub (docs/releasing.md): the workflows
# (actionlint, with shellcheck on their scripts), then the bake file, tags, labels and action pins.
release-check: venv
	$(VENV)/bin/actionlint -shellcheck $(VENV)/bin/shellcheck
	$(PY) -m imagetools release check

# docker/docker-bake.json is generated from versions.toml (release-check fails when it is stale).
bake:
	PYTHONPATH=scripts python3 -m imagetools release bake --write

# Recompile the locks from versions.toml (needs network; uv resolves for Linux, Python 3.11+).
lock:
	for v in $$($(FTENV) versions variants); do \
	  $(FTENV) versions requirements $$v | uvx --from uv==0.13.9 uv pip compile - \
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
