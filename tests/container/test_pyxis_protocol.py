"""pyxis's container start, reproduced against the built image (pyxis and enroot cannot be
installed here).

How pyxis starts a container (NVIDIA/pyxis pyxis_slurmstepd.c, enroot_container_start): it runs
`enroot start ... IMAGE sh -c "kill -STOP $$ ; exit 0"` and waits with waitpid(pid, WUNTRACED)
for THAT process to stop itself; then it joins the container's namespaces for each task. enroot's
/etc/rc (NVIDIA/enroot src/docker.sh) `exec`s the image's ENTRYPOINT with that command when the
entrypoint is to run (`--container-entrypoint`, or the site's `execute_entrypoint=true`), and the
command alone otherwise (pyxis writes `exec "$@"` to /etc/rc.local). So the PID pyxis waits on is
the entrypoint's first program, or the shell itself.

Here a small harness inside the image does what pyxis does: it starts the same chain with `exec`
(fork + execvp, like /etc/rc) and polls waitpid(pid, WNOHANG | WUNTRACED) for a few seconds. With
the image's `tini -g -- ftenv-entrypoint` in front, tini forks the shell: the shell stops, tini
never does, and pyxis would wait forever (the job hangs at container start). Without the
entrypoint, as docs/examples/slurm/finetune-pyxis.sbatch runs it, the shell is the waited PID and
stops at once.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support import ROOT

EXAMPLE = ROOT / "docs/examples/slurm/finetune-pyxis.sbatch"
#: pyxis's start command, verbatim.
PYXIS_START = ["sh", "-c", "kill -STOP $$ ; exit 0"]
#: How long a stop may take: pyxis has no limit, it waits forever.
WAIT_S = 10

HARNESS = r"""
import json, os, sys, time
chain, limit = json.loads(sys.argv[1]), float(sys.argv[2])
pid = os.fork()
if pid == 0:
    os.execvp(chain[0], chain)
start = time.monotonic()
state = "still running"
while time.monotonic() - start < limit:
    got, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
    if got:
        state = "stopped" if os.WIFSTOPPED(status) else f"exited {os.waitstatus_to_exitcode(status)}"
        break
    time.sleep(0.02)
stopped = []
for entry in os.listdir("/proc"):
    try:
        with open(f"/proc/{entry}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        if fields[0] == "T":
            with open(f"/proc/{entry}/comm") as fh:
                stopped.append(fh.read().strip())
    except (OSError, IndexError):
        pass
waited = open(f"/proc/{pid}/comm").read().strip() if state != "exited" else None
print(json.dumps({"state": state, "seconds": time.monotonic() - start, "waited": waited, "stopped": stopped}))
"""


@pytest.fixture(scope="module")
def entrypoint(image) -> list[str]:
    out = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{json .Config.Entrypoint}}", image],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return json.loads(out) or []


def pyxis_start(image: str, chain: list[str], env: dict | None = None) -> dict:
    """Start `chain` as pyxis does and report whether the waited-for PID stopped within WAIT_S."""
    cmd = ["podman", "run", "--rm", "--pull=never", "--entrypoint", "/opt/venv/bin/python"]
    for key, value in (env or {}).items():
        cmd += ["-e", f"{key}={value}"]
    cmd += [image, "-c", HARNESS, json.dumps(chain), str(WAIT_S)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=WAIT_S + 120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def example_runs_the_entrypoint() -> bool:
    opts = {line.strip().rstrip("\\").strip() for line in EXAMPLE.read_text().splitlines()}
    return "--container-entrypoint" in opts and "--no-container-entrypoint" not in opts


def test_the_pyxis_example_starts(image, entrypoint):
    """What the example asks pyxis for: the waited-for PID stops at once, the job goes on."""
    chain = [*entrypoint, *PYXIS_START] if example_runs_the_entrypoint() else PYXIS_START
    result = pyxis_start(image, chain)
    assert result["state"] == "stopped", result
    assert result["seconds"] < WAIT_S / 2, result


def test_with_the_image_entrypoint_pyxis_would_wait_forever(image, entrypoint):
    """`--container-entrypoint` or a site's execute_entrypoint=true: the command stops, but under
    tini, which pyxis waits on and which never stops (docs/launchers-tested.md says so)."""
    assert Path(entrypoint[0]).name == "tini", entrypoint
    result = pyxis_start(image, [*entrypoint, *PYXIS_START], env={"FTENV_REPORT": "0"})
    assert result["state"] == "still running", result
    assert result["waited"] == "tini" and "sh" in result["stopped"], result


def test_the_entrypoint_script_alone_would_stop(image, entrypoint):
    """The script `exec`s the command: it is tini's fork that breaks pyxis's protocol."""
    script = entrypoint[entrypoint.index("--") + 1 :]
    result = pyxis_start(image, [*script, *PYXIS_START], env={"FTENV_REPORT": "0"})
    assert result["state"] == "stopped", result
