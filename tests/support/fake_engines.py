"""Stand-in `docker`, `podman` and `debootstrap` commands that log what they are asked to do (one JSON
list a line in $FAKE_LOG), for the build and run paths of `make run` without an engine.

- `info` answers for docker only when DAEMON is set; `pull` fails unless PULL_OK is set;
- `image inspect` finds only FAKE_LOCAL_IMAGE, a stand-in's config (no CUDA_VERSION);
- `import` reads its tarball; `buildx bake -f FILE` copies FILE next to the log;
- `buildx version` answers only when BUILDX is set; `version --format ...` prints
  "$DOCKER_CLIENT $DOCKER_SERVER" (default 20.10.24 20.10.24).
"""

from __future__ import annotations

import json
from pathlib import Path

FAKE_ENGINE = r"""#!/usr/bin/env python3
import json, os, shutil, sys
from pathlib import Path
log = Path(os.environ["FAKE_LOG"])
with log.open("a") as f:
    f.write(json.dumps([Path(sys.argv[0]).name, *sys.argv[1:]]) + "\n")
a = sys.argv[1:]
if a[0] == "info":
    if not os.environ.get("DAEMON"):
        sys.exit(1)
    print("27.0")
elif a[0] == "pull":
    if not os.environ.get("PULL_OK"):
        print("Error: pinging container registry: no such host", file=sys.stderr)
        sys.exit(125)
elif a[:2] == ["image", "inspect"]:
    if a[-1] != os.environ.get("FAKE_LOCAL_IMAGE"):
        sys.exit(1)
    print(json.dumps(["PATH=/usr/bin"]))
elif a[0] == "import":
    sys.stdin.buffer.read()
elif a[:2] == ["buildx", "version"]:
    if not os.environ.get("BUILDX"):
        print("docker: 'buildx' is not a docker command.", file=sys.stderr)
        sys.exit(1)
    print("github.com/docker/buildx v0.20.0")
elif a[0] == "version":
    print(os.environ.get("DOCKER_CLIENT", "20.10.24"), os.environ.get("DOCKER_SERVER", "20.10.24"))
elif a[:2] == ["buildx", "bake"]:
    shutil.copy(a[a.index("-f") + 1], log.with_name("bake.json"))
elif a[0] == "build":
    log.with_name("build.env").write_text(os.environ.get("DOCKER_BUILDKIT", ""))
"""
FAKE_DEBOOTSTRAP = '#!/bin/sh\nmkdir -p "$4/etc" && echo stand-in > "$4/etc/os-release"\n'
#: Variables the fakes read; a test sets what it needs.
SETTINGS = ("DAEMON", "PULL_OK", "FAKE_LOCAL_IMAGE", "BUILDX", "DOCKER_CLIENT", "DOCKER_SERVER")


def install(bin_dir: Path) -> None:
    """Write the fakes into bin_dir (put it first on PATH, and set FAKE_LOG)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in [("podman", FAKE_ENGINE), ("docker", FAKE_ENGINE), ("debootstrap", FAKE_DEBOOTSTRAP)]:
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
