"""The silence alarm of `ftenv watch` (ftenv.watchdog.silence, ftenv.watchdog.hang) and the last word
after a crash (ftenv.watchdog.crash): a trainer that stops printing is named (and, past the hard
limit, stopped with exit HUNG, its Python stacks written where py-spy may read them); a multi-epoch
run with validation rounds, checkpoint saves and epoch starts never is; a failed command's closing
lines lead with the failure. Children are real processes (tests/support/fake_trainer.py) with
short thresholds set through the documented settings."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ftenv import outcome, variables
from ftenv.watchdog import hang
from ftenv.watchdog.silence import STEP, VAL_LINE, Silence, SilenceLimits
from ftenv.watchdog.step import CHECKPOINT, EPOCH, VALIDATION
from support import ROOT, child_env
from support.child_output import read_until

HERE = ROOT / "tests"  # where the support package is
FAKE = [sys.executable, str(HERE / "support/fake_trainer.py")]
WATCH = [sys.executable, "-m", "ftenv.cli", "watch"]
TIMEOUT = 60
HANGS_AFTER_30 = ["--steps", "60", "--scale", "0.01", "--pause-after", "30"]


def _env(min_s: float, limit_s: float, factor: float = 5) -> dict[str, str]:
    """The silence limits; the children run this checkout's ftenv (they run in a temporary folder)."""
    return child_env(
        **{
            variables.WATCH_SILENCE_MIN_S: str(min_s),
            variables.WATCH_HANG_LIMIT_S: str(limit_s),
            variables.WATCH_SILENCE_FACTOR: str(factor),
        }
    )


def _marked(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("[ftenv-watch]")]


# --- the rule, on a clock of its own ---------------------------------------------------------


def test_the_alarm_waits_for_what_the_run_has_shown():
    s = Silence(SilenceLimits(factor=5, min_s=1, hang_limit_s=100))
    t = 0.0
    s.progress(t, EPOCH, 0)
    for i in range(1, 50):
        t += 0.1
        s.progress(t, STEP, 0, i)
    assert s.due(t + 0.9) is None and s.due(t + 1.0) == "alarm"  # the floor: 1 s
    s.progress(t + 1.5, STEP, 0, 50)  # it was a pause after all: the run has shown 1.5 s
    t += 1.5
    assert s.threshold() == pytest.approx(7.5)
    assert s.due(t + 7.4) is None and s.due(t + 7.5) == "alarm"
    assert s.due(t + 99) is None and s.due(t + 100) == "hang"


def test_validation_checkpoint_and_epoch_pauses_count_once_shown():
    s = Silence(SilenceLimits(factor=2, min_s=0.1, hang_limit_s=0))
    s.progress(0.0, STEP, 0, 1)
    s.progress(0.1, STEP, 0, 2)
    s.progress(0.1, VALIDATION, 0)
    s.progress(3.1, VAL_LINE)  # a 3 s validation batch
    s.progress(3.1, CHECKPOINT, 0)
    s.progress(5.0, STEP, 0, 3)
    assert s.threshold() == pytest.approx(6.0)
    assert s.due(10.9) is None and s.due(11.0) == "alarm"
    assert s.due(1e9) is None  # hang limit 0: never ended
    line = s.alarm_line(11.0, "stacks: test")
    assert "longest gap so far, 3.0 s (validation after step 2)" in line and "rank 0: step 3" in line


def test_no_alarm_before_the_first_step_or_when_off():
    s = Silence(SilenceLimits(factor=5, min_s=1, hang_limit_s=2))
    s.progress(0.0, EPOCH, 0)
    assert s.due(1e6) is None  # model loading, compiling: not armed
    off = Silence(SilenceLimits(factor=0, min_s=1, hang_limit_s=2))
    off.progress(0.0, STEP, 0, 1)
    assert off.due(1e6) is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (variables.WATCH_SILENCE_MIN_S, "soon"),
        (variables.WATCH_HANG_LIMIT_S, "-1"),
        (variables.WATCH_SILENCE_FACTOR, "0.5"),
    ],
)
def test_a_bad_setting_names_itself_and_stops_before_the_command(name, value):
    with pytest.raises(ValueError, match=name):
        SilenceLimits.from_env({name: value})
    r = subprocess.run(
        [*WATCH, "--", sys.executable, "-c", "print('ran')"],
        capture_output=True,
        env=child_env(**{name: value}),
        timeout=TIMEOUT,
    )
    assert r.returncode == outcome.UNUSABLE and b"ran" not in r.stdout and name.encode() in r.stderr


# --- real processes ---------------------------------------------------------------------------


def test_a_rank_that_stops_printing_is_named_and_resumes(tmp_path):
    proc = subprocess.Popen(
        [*WATCH, "--", *FAKE, "--steps", "60", "--scale", "0.01", "--pause-after", "40"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=_env(min_s=0.5, limit_s=0),
        cwd=tmp_path,
    )
    try:
        seen = read_until(proc, b"SILENCE", whole_line=True)
    except AssertionError:
        proc.kill()
        raise
    proc.stdin.write(b"go on\n")
    proc.stdin.flush()
    rest, _ = proc.communicate(timeout=TIMEOUT)
    text = (seen + rest).decode()
    assert proc.returncode == 0, text[-3000:]
    alarm = next(line for line in _marked(text) if "SILENCE" in line)
    assert "no trainer line for" in alarm and "rank 0: step 40, " in alarm
    assert "likely: a rank waits in a collective" in alarm and "do: read the stacks" in alarm
    assert "the run is not ended" in alarm
    assert any("trainer lines resumed after" in line for line in _marked(text))
    assert sum("SILENCE" in line for line in _marked(text)) == 1


def test_no_alarm_on_a_multi_epoch_run_with_validation_and_checkpoints(tmp_path):
    # The floor is tiny, so only the pauses the run has shown keep the alarm quiet: a rule on the
    # median step alone (5 x ~5 ms) would fire on every validation round (~0.08 s here).
    r = subprocess.run(
        [*WATCH, "--", *FAKE, "--recipe", "--scale", "0.05"],
        capture_output=True,
        env=_env(min_s=0.02, limit_s=30),
        cwd=tmp_path,
        timeout=TIMEOUT,
    )
    text = (r.stdout + r.stderr).decode()
    assert r.returncode == 0, text[-3000:]
    assert "SUMMARY: 360 training steps" in text and "Validate epoch: 2" in text
    assert "SILENCE" not in text and "HANG" not in text, "\n".join(_marked(text))


#: The fake trainer with what the trainer entry installs in every training process (its own stack
#: dump on the watchdog's signal, the watchdog named its ptracer).
SELF_DUMPING = [
    sys.executable, "-c",
    "import runpy, sys; from ftenv.trainer.runlife import selfdump; selfdump.install(); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
    *FAKE[1:],
]  # fmt: skip


def _hung_run(
    tmp_path: Path, out: Path | None, env: dict[str, str] | None = None, trainer: list[str] = FAKE
) -> subprocess.CompletedProcess:
    """The fake trainer stops after step 30 and waits on a pipe that stays open: a hang."""
    read, write = os.pipe()
    try:
        return subprocess.run(
            [*WATCH, *(["--output-dir", str(out)] if out else []), "--", *trainer, *HANGS_AFTER_30],
            stdin=read,
            capture_output=True,
            env=env or _env(min_s=0.5, limit_s=1.5),
            cwd=tmp_path,
            timeout=TIMEOUT,
        )
    finally:
        os.close(read)
        os.close(write)


def test_the_hard_limit_stops_the_run_with_its_own_exit_code(tmp_path):
    r = _hung_run(tmp_path, tmp_path / "out")
    text = (r.stdout + r.stderr).decode()
    assert r.returncode == outcome.HUNG == 6, text[-3000:]
    marked = _marked(text)
    alarm = next(i for i, line in enumerate(marked) if "SILENCE" in line)
    stop = next(i for i, line in enumerate(marked) if "HANG: no trainer line" in line)
    assert alarm < stop
    assert f"({variables.WATCH_HANG_LIMIT_S}=1.5)" in marked[stop] and "exit 6" in marked[stop]
    closing = marked[stop + 1 :]
    assert (
        closing[0].startswith("[ftenv-watch] the training command was STOPPED")
        and "after step 30" in closing[0]
    )
    assert not any(line.startswith("[ftenv-watch] verdict:") for line in closing)
    assert "training done" not in text  # the trainer never got past its wait


def test_the_stacks_of_a_silent_run_go_to_the_output_folder(tmp_path):
    if hang.py_spy() is None:
        pytest.skip("py-spy is not installed here")
    blocker = hang.ptrace_blocker(os.getpid())
    if blocker:
        pytest.skip(f"py-spy may not read processes here: {blocker}")
    out = tmp_path / "out"
    r = _hung_run(tmp_path, out)
    text = (r.stdout + r.stderr).decode()
    files = list(out.glob("ftenv-hang-stacks-*.txt"))
    assert r.returncode == 6 and len(files) == 1, text[-3000:]
    alarm = next(line for line in _marked(text) if "SILENCE" in line)
    assert str(files[0]) in alarm
    stacks = files[0].read_text()
    assert "fake_trainer.py" in stacks and "main (support/fake_trainer.py:" in stacks, stacks


def test_a_trainer_under_the_watchdog_dumps_its_own_stacks_without_ptrace(tmp_path):
    """Every thread of the stuck process, written by the process itself (faulthandler on the
    watchdog's signal): no py-spy, no ptrace right needed; and the hang is recorded for a batch
    script (srun's exit code cannot tell a hang from a task Slurm ended)."""
    out = tmp_path / "out"
    r = _hung_run(tmp_path, out, trainer=SELF_DUMPING)
    text = (r.stdout + r.stderr).decode()
    files = list(out.glob("ftenv-hang-stacks-*.txt"))
    assert r.returncode == outcome.HUNG and len(files) == 1, text[-3000:]
    stacks = files[0].read_text()
    own_file = hang.stack_file(out / hang.STACKS_DIR, None, 0).with_name(
        next(f.name for f in (out / hang.STACKS_DIR).iterdir())
    )
    own = stacks.split("--- its own dump (faulthandler, most recent call first)\n", 1)
    assert len(own) == 2, stacks
    assert re.search(r'File ".*fake_trainer\.py", line \d+ in main', own[1]), stacks
    assert [f.name for f in (out / hang.STACKS_DIR).iterdir()] == [own_file.name], stacks
    alarm = next(line for line in _marked(text) if "SILENCE" in line)
    assert "own dumps" in alarm and str(files[0]) in alarm, alarm
    record = json.loads((out / hang.HUNG_RECORD).read_text())
    assert record["stacks"] and str(files[0]) in record["stacks"], record
    assert f"[ftenv-watch] hang recorded in {out / hang.HUNG_RECORD}" in _marked(text), _marked(text)


def test_a_rank_may_name_the_watchdog_its_ptracer(tmp_path, monkeypatch):
    """Yama's scope 1 without CAP_SYS_PTRACE: refused, unless the process runs under this watchdog
    (its trainer entry named it with PR_SET_PTRACER); scope 2 refuses anyway."""
    yama = tmp_path / "ptrace_scope"
    monkeypatch.setattr(hang, "_has_cap_sys_ptrace", lambda: False)
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"],
        env=child_env(**hang.command_env(tmp_path)),
    )
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        yama.write_text("1\n")
        assert hang.ptrace_blocker(child.pid, yama) is None
        assert "CAP_SYS_PTRACE" in hang.ptrace_blocker(other.pid, yama)
        yama.write_text("2\n")
        assert "CAP_SYS_PTRACE" in hang.ptrace_blocker(child.pid, yama)
    finally:
        for p in (child, other):
            p.kill()
            p.wait()


def test_without_py_spy_the_alarm_says_so(tmp_path):
    if hang.py_spy() is not None and Path(hang.py_spy()).parent == Path(sys.executable).parent:
        pytest.skip("py-spy sits beside this Python, PATH cannot hide it")
    env = {**_env(min_s=0.5, limit_s=1.5), "PATH": "/usr/bin:/bin"}
    r = _hung_run(tmp_path, None, env)
    alarm = next(line for line in _marked((r.stdout + r.stderr).decode()) if "SILENCE" in line)
    assert "py-spy not installed" in alarm and not list(tmp_path.rglob("ftenv-hang-stacks-*"))


def test_ptrace_rules(tmp_path):
    yama = tmp_path / "ptrace_scope"
    yama.write_text("3\n")
    assert "disabled" in hang.ptrace_blocker(os.getpid(), yama)
    yama.write_text("0\n")
    assert hang.ptrace_blocker(os.getpid(), yama) is None  # our own process, same user
    assert "gone" in hang.ptrace_blocker(2**22 + 7, yama)


# --- the last word after a crash --------------------------------------------------------------


def test_a_crash_is_said_first_and_the_verdict_is_labelled(tmp_path):
    r = subprocess.run(
        [*WATCH, "--", *FAKE, "--fixed", "--steps", "40", "--raise"],
        capture_output=True,
        cwd=tmp_path,
        timeout=TIMEOUT,
    )
    text = (r.stdout + r.stderr).decode()
    assert r.returncode == 1, text[-3000:]
    assert "Traceback (most recent call last):" in r.stderr.decode()
    marked = _marked(r.stdout.decode())
    assert marked[0] == (
        "[ftenv-watch] the training command FAILED (exit code 1) after step 40; "
        "last error: KeyError: 'input_ids'"
    ), marked
    assert any(
        line.startswith("[ftenv-watch] step-time verdict on the steps before the failure: ")
        for line in marked
    )
    assert not any(line.startswith("[ftenv-watch] verdict:") for line in marked)


def test_a_clean_run_keeps_its_plain_verdict(tmp_path):
    r = subprocess.run(
        [*WATCH, "--", *FAKE, "--fixed", "--steps", "40"], capture_output=True, timeout=TIMEOUT
    )
    marked = _marked(r.stdout.decode())
    assert r.returncode == 0 and any(line.startswith("[ftenv-watch] verdict: ") for line in marked)
    assert not any("FAILED" in line for line in marked)


def test_the_stacks_go_to_the_trainers_output_folder(tmp_path, monkeypatch):
    from ftenv.watchdog.watch_command import WatchOptions, checked, output_folder

    monkeypatch.chdir(tmp_path)
    assert output_folder(["torchrun", "train.py", "++output_dir=/out/run1", "++x=1"]) == Path("/out/run1")
    assert output_folder(["python", "train.py", "output_dir=/o"]) == Path("/o")
    assert output_folder(["python", "train.py"]) == tmp_path
    # `ftenv watch` decides it once, before the command starts; a given folder (finetune's) wins.
    asked = WatchOptions(cmd=("--", "torchrun", "++output_dir=/out/run1"))
    assert checked(asked, {})[0].output_dir == Path("/out/run1")
    given = WatchOptions(cmd=("torchrun", "++output_dir=/x"), output_dir=tmp_path / "plan")
    assert checked(given, {})[0].output_dir == tmp_path / "plan"


STOP = (
    "ftenv finetune: stopped on SIGUSR1 at epoch 0 step 40 (batches done in that epoch); saved to "
    "/out/nano/model.pt (and model.pt.ep0.40); run the same command again to continue (exit 75)"
)


@pytest.mark.parametrize("says_where", [True, False], ids=["stop-line-seen", "rank-0-elsewhere"])
def test_a_saved_stop_closes_as_stopped_and_saved_never_failed(tmp_path, says_where):
    """Exit 75 (outcome.STOPPED): where it was saved and how to go on, from the run's stop line, or
    (rank 0 on another node) the output folder; the verdict labelled as before the stop."""
    fake = shlex.join([*FAKE, "--fixed", "--steps", "40"])
    echo = f"echo {shlex.quote(STOP)} >&2; " if says_where else ""
    r = subprocess.run(
        [*WATCH, "--output-dir", str(tmp_path / "run"), "--", "sh", "-c", f"{fake}; {echo}exit 75"],
        capture_output=True,
        timeout=TIMEOUT,
    )
    text = (r.stdout + r.stderr).decode()
    assert r.returncode == outcome.STOPPED, text[-3000:]
    marked = _marked(r.stdout.decode())
    saved = (
        "stopped on SIGUSR1 at epoch 0 step 40, saved to /out/nano/model.pt (and model.pt.ep0.40)"
        if says_where
        else f"rank 0 saved where the run was in its output folder ({tmp_path / 'run'})"
    )
    assert marked[0] == (
        "[ftenv-watch] the training command STOPPED on a signal and SAVED (exit code 75, not a failure) "
        f"after step 40: {saved}; run the same command again to continue (the examples' schedulers "
        "requeue or retry it)"
    ), marked
    label = "[ftenv-watch] step-time verdict on the steps before the stop: "
    assert any(line.startswith(label) for line in marked), marked
    assert not any("FAILED" in line or line.startswith("[ftenv-watch] verdict:") for line in marked), marked
