"""The stacks of a stuck trainer process in the built image run as the restricted profile runs it:
every capability dropped (no SYS_PTRACE), no privilege escalation, the image's non-root user. The
process dumps its own stacks (faulthandler, on the watchdog's signal), which needs no ptrace right;
the watchdog puts them in its stacks file and ends the run (exit 6, the hang record beside it)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

from conftest import ROOT
from ftenv import outcome, variables
from ftenv.watchdog import hang

#: The fake trainer (FunASR's line format) with what the trainer entry installs in each training
#: process; it stops after step 30 and waits on stdin, which stays open: a hang.
STUCK = [
    "python3", "-c",
    "import runpy, sys; from ftenv.trainer.runlife import selfdump; selfdump.install(); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
    "/t/fake_trainer.py", "--steps", "60", "--scale", "0.01", "--pause-after", "30",
]  # fmt: skip


def test_a_stuck_process_leaves_its_stacks_with_every_capability_dropped(image, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o777)  # the image's user writes it
    env = {
        "FTENV_REPORT": "0",
        "RANK": "0",
        variables.WATCH_SILENCE_MIN_S: "1",
        variables.WATCH_HANG_LIMIT_S: "4",
        variables.WATCH_SILENCE_FACTOR: "5",
    }
    cmd = ["podman", "run", "--rm", "-i", "--pull=never", "--cap-drop", "ALL"]
    cmd += [
        "--security-opt",
        "no-new-privileges",
        "-v",
        f"{ROOT / 'tests/support'}:/t:ro",
        "-v",
        f"{out}:/out",
    ]
    cmd += [arg for k, v in env.items() for arg in ("-e", f"{k}={v}")]
    script = f"grep CapEff /proc/self/status; exec ftenv watch --output-dir /out -- {shlex.join(STUCK)}"
    read, write = os.pipe()
    try:
        r = subprocess.run(
            [*cmd, image, "sh", "-c", script], stdin=read, capture_output=True, text=True, timeout=300
        )
    finally:
        os.close(read)
        os.close(write)
    text = r.stdout + r.stderr
    assert re.search(r"^CapEff:\s+0+$", r.stdout, re.M), text[-3000:]  # no capability at all
    assert r.returncode == outcome.HUNG, text[-3000:]
    files = list(out.glob("ftenv-hang-stacks-*.txt"))
    assert len(files) == 1, text[-3000:]
    stacks = files[0].read_text()
    own = stacks.split("--- its own dump (faulthandler, most recent call first)\n", 1)
    assert len(own) == 2 and re.search(r'File "/t/fake_trainer\.py", line \d+ in main', own[1]), stacks
    record = json.loads((out / hang.HUNG_RECORD).read_text())
    assert files[0].name in record["stacks"], record
    print(stacks)
