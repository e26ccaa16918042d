"""CA_BUNDLE (docs/building-here.md): a CA bundle for pip behind a TLS-intercepting proxy reaches
the pip steps as a build secret and nowhere else.

The rebuild (conftest.py's `rebuilt`, the one the layer check reads) changes only FunASR's entry of
the lock, so the rest-of-lock pip step runs again, now with a bundle made of the host's CAs plus a
dummy CA: pip must still reach PyPI through it, and afterwards no trace of the dummy CA may be in the
image's history, its configuration or its filesystem.
"""

from __future__ import annotations

import json
import subprocess

from imagetools.local import build_and_run


def _podman(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=900)


def test_the_ca_bundle_reaches_pip_as_a_secret_and_is_not_in_the_image(rebuilt):
    bundle, marker, tag = rebuilt.bundle, rebuilt.marker, rebuilt.tag
    built = rebuilt.built
    out = built.stdout + built.stderr
    assert built.returncode == 0, out[-4000:]
    assert f"--secret=id={build_and_run.CA_SECRET_ID},src={bundle}" in out
    # the rest-of-lock step ran again (not from the cache), so pip ran with the secret mounted
    step = next(line for line in out.splitlines() if "rest.txt" in line and "pip install" in line)
    assert "--mount=type=secret" in step
    assert "Using cache" not in out[out.index(step) :].splitlines()[1]
    history = _podman("history", "--no-trunc", "--format", "{{.CreatedBy}}", tag)
    config = _podman("image", "inspect", tag)
    assert history.returncode == 0 and config.returncode == 0
    for text in (history.stdout, config.stdout):
        assert marker not in text and "BEGIN CERTIFICATE" not in text and bundle not in text
    env = json.loads(config.stdout)[0]["Config"]["Env"]  # the RUN lines in the history may name them
    assert not [e for e in env if e.startswith(("PIP_CERT=", "SSL_CERT_FILE="))], env
    # nothing at the secret's path, and the dummy CA in no file of the image
    found = _podman(
        "run", "--rm", "--pull=never", "--network=none", "--entrypoint", "sh", tag, "-c",
        f"find / -xdev -name {build_and_run.CA_SECRET_ID} 2>/dev/null;"
        f" grep -rlF -e '{marker}' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null;"
        " echo searched",
    )  # fmt: skip
    assert found.stdout == "searched\n", found.stdout
