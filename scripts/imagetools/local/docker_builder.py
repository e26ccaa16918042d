"""Which of Docker's two ways builds docker/Dockerfile on this machine, and the `docker build` that
stands in for bake: `docker buildx bake` where the buildx plugin answers, else one `docker build`
with BuildKit (Debian's and Ubuntu's docker.io ship no buildx) made from the same resolved bake
target, so the two paths cannot drift apart; a Docker that can do neither is refused with the fix.
"""

from __future__ import annotations

from ftenv.stack import versions
from imagetools.local.machine import Refusal, _answers

#: The first Docker whose built-in BuildKit builds docker/Dockerfile (RUN --mount and COPY --chmod
#: without a `# syntax=` frontend: dockerfile 1.2, in BuildKit 0.8).
DOCKER_BUILDKIT_MIN = (20, 10)
#: From this client on, `docker build` with BuildKit goes through the buildx plugin; without it the
#: client refuses ("BuildKit is enabled but the buildx component is missing or broken").
DOCKER_CLIENT_NEEDS_BUILDX = (23, 0)
BUILDX_FIX = "install the buildx plugin (https://docs.docker.com/go/buildx/)"
#: Bake attributes that one `docker build` carries, and those it leaves out (a cache import from a
#: registry is only an optimization, which `docker build --cache-from` spells differently).
_BUILD_ATTRIBUTES = {
    "context",
    "dockerfile",
    "platforms",
    "args",
    "labels",
    "tags",
    "pull",
    "target",
    "secret",
}
_BUILD_LEFT_OUT = {"cache-from"}


def docker_builder(buildx: bool, client: str | None, server: str | None) -> tuple[str, str]:
    """("bake" or "build", the line that says which and why); a Refusal that names the fix where
    this Docker cannot build docker/Dockerfile. Versions that cannot be read are not held against it."""
    if buildx:
        return "bake", "builder docker buildx bake (the buildx plugin answers)"
    server_version = versions.release(server, 2)
    if server_version and server_version < DOCKER_BUILDKIT_MIN:
        need = ".".join(map(str, DOCKER_BUILDKIT_MIN))
        raise Refusal(
            f"Docker {server} is older than {need}, the first whose built-in BuildKit builds this "
            f"Dockerfile (RUN --mount, COPY --chmod): upgrade Docker to {need}+, or {BUILDX_FIX}, "
            "or build with podman (ENGINE=podman)"
        )
    client_version = versions.release(client, 2)
    if client_version and client_version >= DOCKER_CLIENT_NEEDS_BUILDX:
        raise Refusal(
            f"the docker client {client} builds with BuildKit only through buildx, which is missing: "
            f"{BUILDX_FIX}, or build with podman (ENGINE=podman)"
        )
    return "build", "builder docker build with BuildKit (DOCKER_BUILDKIT=1): no buildx plugin answers"


def docker_build(target: dict, extra: list[str]) -> list[str]:
    """One `docker build` for a resolved bake target (local_bake's): the same Dockerfile, build
    args, labels, tags and secrets, so the two Docker paths cannot drift apart."""
    unknown = target.keys() - _BUILD_ATTRIBUTES - _BUILD_LEFT_OUT
    if unknown:
        raise ValueError(f"bake attributes with no `docker build` spelling: {sorted(unknown)}")
    cmd = ["docker", "build", "-f", target["dockerfile"]]
    cmd += [f"--platform={p}" for p in target.get("platforms", [])[:1]]
    cmd += ["--pull"] if target.get("pull") else []
    cmd += ["--target", target["target"]] if target.get("target") else []
    cmd += [f"--build-arg={k}={v}" for k, v in target.get("args", {}).items()]
    cmd += [f"--label={k}={v}" for k, v in target.get("labels", {}).items()]
    for secret in target.get("secret", []):
        cmd += ["--secret", secret]
    for tag in target.get("tags", []):
        cmd += ["-t", tag]
    return [*cmd, *extra, target["context"]]


def docker_versions() -> tuple[bool, str | None, str | None]:
    """(buildx answers, client version, server version) of the docker on PATH."""
    buildx = _answers(["docker", "buildx", "version"])
    r = _answers(["docker", "version", "--format", "{{.Client.Version}} {{.Server.Version}}"])
    client, server = [*r.stdout.split(), None, None][:2] if r and r.returncode == 0 else (None, None)
    return bool(buildx and buildx.returncode == 0), client, server
