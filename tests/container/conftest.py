"""Container tests: run the image built by `make image` (podman, no Docker daemon needed).

`make test` builds the image and sets FTENV_TEST_IMAGE; without it these tests are skipped
(`make unit`). Use the `run` fixture: run(*command, env={...}, user=..., extra=[...]).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import ROOT

IMAGE = os.environ.get("FTENV_TEST_IMAGE")


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.container)


@pytest.fixture(scope="session")
def image() -> str:
    if not IMAGE:
        pytest.skip("FTENV_TEST_IMAGE not set: build with `make image` (or run `make test`)")
    if not shutil.which("podman"):
        pytest.fail("FTENV_TEST_IMAGE is set but podman is missing: run `make engine`")
    os.environ.setdefault("CONTAINERS_CONF", str(ROOT / "scripts/containers.conf"))
    return IMAGE


@pytest.fixture(scope="session")
def run(image):
    """Run a command in a fresh container; returns CompletedProcess (text, both streams kept)."""

    def _run(*command, env=None, user=None, extra=(), timeout=600, entrypoint=None):
        cmd = ["podman", "run", "--rm", "--pull=never"]
        for key, value in (env or {}).items():
            cmd += ["-e", f"{key}={value}"]
        if user is not None:
            cmd += ["--user", user]
        if entrypoint is not None:
            cmd += ["--entrypoint", entrypoint]
        cmd += [*extra, image, *command]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    return _run
