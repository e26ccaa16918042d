"""CA_BUNDLE (docs/building-here.md): a CA bundle for pip behind a TLS-intercepting proxy reaches
the pip steps as a build secret and nowhere else.

The rebuild changes only FunASR's entry of the lock (as the layer check does), so the rest-of-lock
pip step runs again, now with a bundle made of the host's CAs plus a dummy CA made here: pip must
still reach PyPI through it, and afterwards no trace of the dummy CA may be in the image's history,
its configuration or its filesystem.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from imagetools.local import layers, local

REBUILT = "localhost/ftenv-ca-check:rebuilt"
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


@pytest.fixture(scope="module")
def dummy_ca(tmp_path_factory) -> tuple[str, str]:
    """(bundle path, a line of the dummy CA's PEM body that nothing else contains)."""
    work = tmp_path_factory.mktemp("ca")
    key, cert = work / "dummy.key", work / "dummy.pem"
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subject = ["-subj", "/CN=ftenv-ca-check", "-keyout", str(key), "-out", str(cert)]
    subprocess.run([*request, *subject], check=True, capture_output=True)
    body = cert.read_text().splitlines()[5]  # a line of base64 from the middle of the certificate
    bundle = work / "bundle.pem"
    bundle.write_text(Path(HOST_CA_BUNDLE).read_text() + cert.read_text())
    return str(bundle), body


def _podman(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=900)


def test_the_ca_bundle_reaches_pip_as_a_secret_and_is_not_in_the_image(image, dummy_ca):
    bundle, marker = dummy_ca
    variant = json.loads(_podman("image", "inspect", image).stdout)[0]["Config"]["Labels"]["ftenv.variant"]
    built = layers.rebuild(variant, REBUILT, options=("--ca-bundle", bundle))
    try:
        out = built.stdout + built.stderr
        assert built.returncode == 0, out[-4000:]
        assert f"--secret=id={local.CA_SECRET_ID},src={bundle}" in out
        # the rest-of-lock step ran again (not from the cache), so pip ran with the secret mounted
        step = next(line for line in out.splitlines() if "rest.txt" in line and "pip install" in line)
        assert "--mount=type=secret" in step
        assert "Using cache" not in out[out.index(step) :].splitlines()[1]
        history = _podman("history", "--no-trunc", "--format", "{{.CreatedBy}}", REBUILT)
        config = _podman("image", "inspect", REBUILT)
        assert history.returncode == 0 and config.returncode == 0
        for text in (history.stdout, config.stdout):
            assert marker not in text and "BEGIN CERTIFICATE" not in text and bundle not in text
        env = json.loads(config.stdout)[0]["Config"]["Env"]  # the RUN lines in the history may name them
        assert not [e for e in env if e.startswith(("PIP_CERT=", "SSL_CERT_FILE="))], env
        # nothing at the secret's path, and the dummy CA in no file of the image
        found = _podman(
            "run", "--rm", "--pull=never", "--network=none", "--entrypoint", "sh", REBUILT, "-c",
            f"find / -xdev -name {local.CA_SECRET_ID} 2>/dev/null;"
            f" grep -rlF -e '{marker}' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null;"
            " echo searched",
        )  # fmt: skip
        assert found.stdout == "searched\n", found.stdout
    finally:
        _podman("rmi", REBUILT)
