"""`make image` and `make run` on a real Docker daemon without buildx: Debian's docker.io.

The check starts its own dockerd (by PID, stopped by PID) with flags that leave this machine alone:
no iptables rules, no bridge, and its own data root, exec root, pid file and socket under a
temporary directory. The stand-in base goes into it from podman's store (`podman save | docker
load`) where podman has it; the image is built by scripts/build_image.py, which must choose
`docker build` with BuildKit (no buildx here), with the host's CA bundle as CA_BUNDLE (pip reaches
PyPI through this machine's TLS-intercepting proxy) and `--network=host` (no bridge); then the
image's default runs with `--network=none` and must PASS.

Minutes (a cold pip download of the stack): `make docker-check` runs it (FTENV_DOCKER_CHECK=1),
`make test` does not.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from imagetools.local import build_and_run
from support import ROOT, child_env

TAG = "localhost/ftenv-docker-check:cu130"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")

pytestmark = [
    pytest.mark.docker_daemon,
    pytest.mark.skipif(
        os.environ.get("FTENV_DOCKER_CHECK") != "1",
        reason="the real-Docker check takes minutes: `make docker-check` runs it (FTENV_DOCKER_CHECK=1)",
    ),
]


def _debian_docker() -> tuple[Path, Path]:
    dockerd = shutil.which("dockerd")
    if os.geteuid() != 0 or not dockerd:
        pytest.fail("the Docker check needs root and dockerd: run `make docker-check` (installs docker.io)")
    # the client of the same package (Debian: /usr/sbin/dockerd, /usr/bin/docker), not another on PATH
    beside = [Path(dockerd).with_name("docker"), Path(dockerd).parent.parent / "bin" / "docker"]
    client = next((c for c in beside if c.exists()), None)
    if client is None:
        pytest.fail(f"no docker client beside {dockerd} ({', '.join(map(str, beside))})")
    return Path(dockerd), client


@pytest.fixture(scope="module")
def daemon():
    """(environment whose `docker` is Debian's client talking to our own dockerd, timings)."""
    dockerd, client = _debian_docker()
    work = Path(tempfile.mkdtemp(prefix="ftenv-dockerd-", dir="/tmp"))  # short: a socket path is <108
    (work / "bin").mkdir()
    (work / "bin" / "docker").symlink_to(client)
    sock = f"unix://{work}/docker.sock"
    log = (work / "dockerd.log").open("w")
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            str(dockerd),
            "--iptables=false",
            "--ip6tables=false",
            "--bridge=none",
            "--storage-driver=overlay2",
            f"--data-root={work}/data",
            f"--exec-root={work}/exec",
            f"--pidfile={work}/dockerd.pid",
            f"--host={sock}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    path = f"{work / 'bin'}{os.pathsep}{os.environ['PATH']}"
    env = child_env(unset=["DOCKER_BUILDKIT"], PATH=path, DOCKER_HOST=sock)
    try:
        for _ in range(60):
            info = subprocess.run(
                ["docker", "info", "--format", "{{.ServerVersion}}"], env=env, capture_output=True
            )
            if info.returncode == 0:
                break
            assert proc.poll() is None, (work / "dockerd.log").read_text()[-3000:]
            time.sleep(1)
        else:
            pytest.fail("dockerd did not answer within 60 s: " + (work / "dockerd.log").read_text()[-3000:])
        timings = {"dockerd up": time.monotonic() - started}
        yield env, timings
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        subprocess.run(["umount", "-R", str(work / "data")], capture_output=True)  # nothing left mounted
        shutil.rmtree(work, ignore_errors=True)


def _tool_versions(env: dict[str, str]) -> dict[str, str]:
    def out(*cmd: str) -> str:
        r = subprocess.run(list(cmd), env=env, capture_output=True, text=True)
        return r.stdout.strip() or r.stderr.strip()

    return {
        "dockerd --version": out("dockerd", "--version"),
        "docker version": out(
            "docker", "version", "--format", "client {{.Client.Version}}, server {{.Server.Version}}"
        ),
        "docker buildx version": out("docker", "buildx", "version").splitlines()[0],
        "containerd --version": out("containerd", "--version"),
        "runc --version": out("runc", "--version").splitlines()[0],
    }


def test_debian_docker_builds_without_buildx_and_the_default_run_passes(daemon):
    env, timings = daemon
    versions_seen = _tool_versions(env)
    t = time.monotonic()
    standin = subprocess.run(
        f"podman image exists {build_and_run.STANDIN_BASE} "
        f"&& podman save {build_and_run.STANDIN_BASE} | docker load",
        shell=True,
        env=env,
        capture_output=True,
        text=True,
    )
    timings["stand-in loaded"] = time.monotonic() - t
    t = time.monotonic()
    cmd = [
        sys.executable,
        str(ROOT / "scripts/build_image.py"),
        "cu130",
        "--engine",
        "docker",
        "--base",
        "standin",
    ]
    cmd += ["--no-default-tag", "--tag", TAG, "--ca-bundle", str(HOST_CA_BUNDLE), "--", "--network=host"]
    built = subprocess.run(cmd, env=env, capture_output=True, text=True)
    timings["build"] = time.monotonic() - t
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    assert "builder docker build with BuildKit (DOCKER_BUILDKIT=1): no buildx plugin answers" in built.stderr
    assert "+ DOCKER_BUILDKIT=1 docker build " in built.stderr
    t = time.monotonic()
    ran = subprocess.run(
        ["docker", "run", "--rm", "--network=none", TAG], env=env, capture_output=True, text=True, timeout=900
    )
    timings["default run"] = time.monotonic() - t
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-4000:]
    assert "== ftenv report:" in ran.stderr
    assert ran.stdout.strip().splitlines()[-1].startswith("PASS"), ran.stdout[-2000:]
    # the CA bundle was a build secret: nowhere in the history, the config or the filesystem
    history = subprocess.run(
        ["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", TAG],
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    config = subprocess.run(
        ["docker", "image", "inspect", TAG], env=env, capture_output=True, text=True
    ).stdout
    assert "BEGIN CERTIFICATE" not in history + config
    env = json.loads(config)[0]["Config"]["Env"]  # the RUN lines in the history may name PIP_CERT
    assert not [e for e in env if e.startswith(("PIP_CERT=", "SSL_CERT_FILE="))], env
    found = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network=none",
            "--entrypoint",
            "find",
            TAG,
            "/run",
            "/tmp",
            "-name",
            "ca_bundle",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert (found.returncode, found.stdout) == (0, "")
    size = json.loads(config)[0]["Size"]
    print(
        json.dumps(
            {
                "versions": versions_seen,
                "seconds": timings,
                "image bytes": size,
                "standin": standin.returncode,
            },
            indent=2,
        )
    )
