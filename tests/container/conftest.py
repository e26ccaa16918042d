"""Container tests: run the image built by `make image` (podman, no Docker daemon needed).

`make test` builds the image and sets FTENV_TEST_IMAGE; without it these tests are skipped
(`make unit`). Use the `run` fixture: run(*command, env={...}, user=..., extra=[...]).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
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


@pytest.fixture(scope="session")
def compiled_selfcheck(run, tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """(the run, its output folder): `ftenv selfcheck --compile --json` once (minutes: Inductor
    compiles on the CPU), for the two tests of its verdict. As an arbitrary UID with group 0,
    offline, on a read-only root with Inductor's cache set under HOME, as the image sets Triton's
    (TRITON_CACHE_DIR): on the CPU, Inductor's cache stands in for the kernel cache a GPU run writes."""
    from support.read_only_root import read_only

    out = tmp_path_factory.mktemp("compiled") / "out"
    out.mkdir()
    os.chmod(out, 0o777)  # the container's uid 12345 writes it
    r = run(
        "ftenv",
        "selfcheck",
        "--compile",
        "--json",
        env={"TORCHINDUCTOR_CACHE_DIR": "/home/ftenv/.cache/torchinductor"},
        extra=[*read_only(out), "--network=none"],
        user="12345:12345",  # the enroot/pyxis case: the user's own uid and gid
        timeout=1500,
    )
    return r, out


#: The tag of the one rebuild the layer and CA checks share.
REBUILT = "localhost/ftenv-rebuild-check:rebuilt"
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


@dataclass(frozen=True)
class Rebuild:
    variant: str  # the image's `ftenv.variant` label
    built: subprocess.CompletedProcess  # build_image.py's run, output captured
    tag: str
    bundle: str  # the CA bundle passed as CA_BUNDLE
    marker: str  # a line of the dummy CA's PEM body that nothing else contains


@pytest.fixture(scope="session")
def rebuilt(image, tmp_path_factory):
    """The image rebuilt once (minutes) from a copy of the checkout whose lock differs in FunASR's
    entry only, as a FunASR bump does, with a CA bundle (the host's CAs plus a dummy CA made here)
    passed as CA_BUNDLE: test_layers.py reads which layers changed, test_ca_bundle.py where the
    bundle went. Removed at the end of the run."""
    from imagetools.local import layers

    work = tmp_path_factory.mktemp("ca")
    key, cert = work / "dummy.key", work / "dummy.pem"
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subject = ["-subj", "/CN=ftenv-ca-check", "-keyout", str(key), "-out", str(cert)]
    subprocess.run([*request, *subject], check=True, capture_output=True)
    marker = cert.read_text().splitlines()[5]  # a line of base64 from the middle of the certificate
    bundle = work / "bundle.pem"
    bundle.write_text(Path(HOST_CA_BUNDLE).read_text() + cert.read_text())
    label = '{{index .Config.Labels "ftenv.variant"}}'
    inspect = ["podman", "image", "inspect", "--format", label, image]
    variant = subprocess.run(inspect, capture_output=True, text=True).stdout.strip()
    built = layers.rebuild(variant, REBUILT, options=("--ca-bundle", str(bundle)))
    try:
        yield Rebuild(variant, built, REBUILT, str(bundle), marker)
    finally:
        subprocess.run(["podman", "rmi", REBUILT], capture_output=True)
