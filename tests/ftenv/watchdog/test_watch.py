"""`ftenv watch`: pass-through (byte for byte, prompt, both streams, 100 MB), the hint (where, when,
what it says, how often), exit codes, signals (directly and under tini), FTENV_WATCH=0, and that
the watchdog never imports torch. Children are real processes printing real FunASR lines with
real delays (tests/support/fake_trainer.py); nothing here measures time."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from ftenv import variables
from ftenv.attention import process_settings
from ftenv.watchdog import detector, funasr_log
from ftenv.watchdog import step as step_types
from ftenv.watchdog.slow_step_lines import SlowStepLines
from support import ROOT, child_env
from support.child_output import read_until
from support.steplogs import ddp_log, field_report_run, flood

HERE = ROOT / "tests"  # where the support package is
FAKE = [sys.executable, str(HERE / "support/fake_trainer.py")]
WATCH = [sys.executable, "-m", "ftenv.cli", "watch"]
MARKED = re.compile(rb"(?m)^\[ftenv-watch\][^\n]*\n")
TIMEOUT = 120


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, **kw)


def first_flagged(ranks: int = 1):
    """The generated step the watchdog flags first, ranks interleaved step by step as logged."""
    d = detector.Detector()
    runs = [field_report_run(rank=r) for r in range(ranks)]
    for steps in zip(*runs, strict=True):
        for s in steps:
            _, event = d.observe(step_types.Step(s.index, s.seconds, s.batch, s.padded, s.rank))
            if event:
                return s
    raise AssertionError("no slow step")


def slow_lines(out: bytes) -> tuple[str, str]:
    """The first SLOW STEP line and the explanation line under it."""
    lines = out.decode("utf-8", "replace").splitlines()
    at = next(i for i, line in enumerate(lines) if "SLOW STEP" in line)
    assert lines[at + 1].startswith("[ftenv-watch]   "), lines[at + 1]
    return lines[at], lines[at + 1]


# --- output ---------------------------------------------------------------------------------

CHILD = textwrap.dedent(
    r"""
    import sys, time
    sys.path.insert(0, {here!r})
    from support.steplogs import field_report_log
    out, err = sys.stdout.buffer, sys.stderr.buffer
    lines, _ = field_report_log(ranks=2)
    err.write(b"\xff\xfe not utf-8 \xc3\x28\n")
    for i, line in enumerate(lines):
        data = line.encode() + b"\n"
        if i % 7 == 3:  # a line in two writes, with a pause between: a partial line must pass
            out.write(data[:50]); out.flush(); time.sleep(0.002); out.write(data[50:])
        else:
            out.write(data)
        out.flush()
        if i % 40 == 0:
            err.write(b"".join(b" %d%%|###| %d/100\r" % (p, p) for p in range(0, 100, 10)))
            err.flush()
        if i == 200:
            out.write(b"x" * 300_000 + b"\n"); out.flush()
    out.write(b"last line without newline")
    err.write(b"stderr ends with a newline\n")
    """
)


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    path = tmp_path_factory.mktemp("child") / "child.py"
    path.write_text(CHILD.format(here=str(HERE)))
    return [sys.executable, str(path)]


@pytest.fixture(scope="module")
def direct(child):
    return run(child)


@pytest.fixture(scope="module")
def watched(child):
    return run([*WATCH, "--", *child], env=child_env(**{variables.SDPA_DEPRIORITIZED: "0"}))


def test_output_is_the_childs_byte_for_byte_plus_marked_lines(direct, watched):
    assert watched.returncode == direct.returncode == 0
    assert MARKED.sub(b"", watched.stderr) == direct.stderr
    assert MARKED.sub(b"", watched.stdout) == direct.stdout
    assert b"[ftenv-watch] SLOW STEP" in watched.stdout


def test_hints_follow_their_step_line_and_say_it_once(watched):
    lines = watched.stdout.split(b"\n")
    marked = [i for i, line in enumerate(lines) if line.startswith(b"[ftenv-watch]")]
    slow = [i for i in marked if re.match(rb"\[ftenv-watch\] (SLOW STEP|slow step) rank", lines[i])]
    assert slow
    for i in slow:
        rank, step = re.search(rb"rank (\d+) step (\d+):", lines[i]).groups()
        prev = lines[i - 1]
        assert b"train, rank: " + rank + b"," in prev and b"total step: " + step + b"," in prev
    # 2 ranks x 59 slow steps: one full line, short ones up to the repeat count, one pattern line.
    assert sum(b"SLOW STEP" in lines[i] for i in marked) == 1
    assert sum(b"PATTERN" in lines[i] for i in marked) == 1
    before_summary = [i for i in marked if b"SUMMARY" not in lines[i] and b"verdict" not in lines[i]]
    assert len(before_summary) == 4  # first, its explanation, short, pattern (repeat=3)
    explanation = [i for i in marked if lines[i].startswith(b"[ftenv-watch]   ")]
    assert len(explanation) == 1 and explanation[0] - 1 in slow  # once, right under the first


def test_the_first_line_is_short_and_names_step_shape_cause_and_fix(watched):
    first, detail = slow_lines(watched.stdout)
    s = first_flagged(ranks=2)
    assert len(first) <= 200, len(first)
    assert first.startswith(f"[ftenv-watch] SLOW STEP rank {s.rank} step {s.index}: {s.seconds:.3f} s = ")
    assert re.search(r"= 1\d\.\dx median 0\.09\d s", first)
    assert f"batch {s.batch} x {s.padded}, new to this rank" in first
    assert "likely: cuDNN attention plan build" in first
    assert "fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in first
    full = f"{first} {detail}"
    # This machine has no GPU: the arch is unknown, the variable is read from the child.
    assert "TORCH_CUDNN_SDPA_DEPRIORITIZED=0" in full and "GPU arch unknown" in full
    assert "cuDNN attention first: unknown" in full
    assert "Cause: " in full and "builds a new execution plan for every (batch, padded length)" in full
    assert "Fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in full


def test_summary_at_the_end(watched):
    # stdout ended in the middle of a line: the summary went to stderr, after the child's bytes.
    assert watched.stderr.split(b"[ftenv-watch]")[0].endswith(b"stderr ends with a newline\n")
    text = watched.stderr.decode("utf-8", "replace")
    summary = re.search(r"\[ftenv-watch\] SUMMARY: (\d+) training steps, ranks 0,1, (\d+) validation", text)
    assert summary and summary.groups() == ("764", "12")
    # 2 x 59 new shapes; each rank's first step is start-up, set apart: 2 x 58 slow.
    assert "116 slow steps" in text and "116 on new shapes (100%)" in text
    assert "mean 0.243 s" in text and "mean without them 0.098 s" in text
    assert "[ftenv-watch] 2 start-up steps set apart, not judged: 2 x run start" in text
    assert "[ftenv-watch] verdict: FAIL" in text
    assert "[ftenv-watch] fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in text


def test_fixed_run_gets_no_hint_and_a_pass():
    r = run([*WATCH, "--summary-every", "100", "--", *FAKE, "--fixed", "--ranks", "2"])
    out = r.stdout.decode()
    assert r.returncode == 0
    assert not re.search(r"SLOW STEP|slow step rank|PATTERN", out)
    assert out.count("[ftenv-watch] summary so far") == 7  # every 100 of 764 steps
    assert "[ftenv-watch] verdict: PASS" in out and "0 slow steps" in out


@pytest.mark.parametrize(
    ("settings", "expect", "absent"),
    [
        (
            (((10, 0),), "0", "2.11.0", 91900),
            [
                "sm_100, TORCH_CUDNN_SDPA_DEPRIORITIZED=0, cuDNN attention first: yes",
                "=0 asks for it",
                "Fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1",
            ],
            [],
        ),
        (
            (((9, 0),), "true", "2.11.0", 91900),
            [
                "sm_90",
                "first: yes",
                "is ignored by torch: only 1 works",
                "Fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1",
            ],
            [],
        ),
        (
            (((10, 0),), "1", "2.11.0", 91900),
            [
                "first: no",
                "not first here (TORCH_CUDNN_SDPA_DEPRIORITIZED=1 is set)",
                "Fix: TORCH_CUDNN_SDPA_DEPRIORITIZED=1 is already set, so the per-shape cost comes from",
                "`ftenv probe`",
                "phases",
            ],
            ["Fix: set TORCH"],
        ),
        (
            (((8, 0),), None, "2.11.0", 91900),
            ["sm_80, TORCH_CUDNN_SDPA_DEPRIORITIZED unset, cuDNN attention first: no", "sm_80 is not one of"],
            ["Fix: set TORCH"],
        ),
    ],
)
def test_hint_follows_the_training_process_settings(settings, expect, absent):
    arches, raw, torch_version, cudnn = settings
    driver = textwrap.dedent(
        f"""
        import sys
        from ftenv.attention import sdpa
        from ftenv.attention.facts import Stack
        from ftenv.attention.process_settings import AttentionSettings
        from ftenv.watchdog.watch import watch
        from ftenv.watchdog.watch_command import WatchOptions
        env = sdpa.interpret_deprioritized({raw!r})
        first = sdpa.cudnn_first_by_rule({torch_version!r}, {cudnn}, {arches[0]!r}, env)
        s = AttentionSettings(Stack({torch_version!r}, {cudnn}, {arches!r}, {raw!r}), "test", "test", first)
        sys.exit(watch(WatchOptions(cmd={(*FAKE, "--steps", "40")!r}), settings=lambda: s))
        """
    )
    r = run([sys.executable, "-c", driver])
    full = " ".join(slow_lines(r.stdout))
    for words in expect:
        assert words in full
    for words in absent:
        assert words not in full


def test_a_hanging_settings_read_never_holds_the_output():
    driver = (
        "import sys, time; from ftenv.watchdog.watch import watch; "
        "from ftenv.watchdog.watch_command import WatchOptions; "
        f"options = WatchOptions(cmd={(*FAKE, '--steps', '40')!r}); "
        "sys.exit(watch(options, settings=lambda: time.sleep(600)))"
    )
    r = run([sys.executable, "-c", driver])  # would time out if the hint waited for the read
    full = " ".join(slow_lines(r.stdout))
    assert r.returncode == 0 and "attention: unknown" in full and "Fix: set TORCH" in full


def test_validation_and_noise_lines_are_not_steps():
    r = run([*WATCH, "--", *FAKE, "--fixed"])
    text = r.stdout.decode()
    assert "382 training steps, ranks 0, 6 validation lines" in text
    assert "4 lines began like a training step but had no rank or no usable time" in text
    assert "e.g. no readable rank: train, rank: zero" in text


def test_hint_to_stderr_when_asked():
    r = run([*WATCH, "--hint-stream", "stderr", "--", *FAKE])
    assert b"[ftenv-watch]" not in r.stdout
    assert b"[ftenv-watch] SLOW STEP" in r.stderr and b"[ftenv-watch] SUMMARY" in r.stderr


# --- promptness -------------------------------------------------------------------------------


def test_hint_arrives_while_the_child_is_still_running():
    """The child stops right after the first flagged step's line and waits: the hint must already
    be out, not held until the child writes more or exits."""
    step = first_flagged().index
    proc = subprocess.Popen(
        [*WATCH, "--", *FAKE, "--scale", "0.01", "--pause-after", str(step)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        got = read_until(proc, b"[ftenv-watch] SLOW STEP", whole_line=True)
        assert proc.poll() is None  # still paused
        before = got.split(b"[ftenv-watch] SLOW STEP")[0].splitlines()[-1]
        assert b"total step: %d," % step in before
        rest, _ = proc.communicate(b"go\n", timeout=TIMEOUT)
        assert proc.returncode == 0 and b"[ftenv-watch] SUMMARY" in rest
    finally:
        proc.kill()


def test_a_partial_line_passes_at_once():
    code = "import sys; sys.stdout.write('progress 50%\\r'); sys.stdout.flush(); sys.stdin.readline()"
    proc = subprocess.Popen(
        [*WATCH, "--", sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert read_until(proc, b"progress 50%\r") == b"progress 50%\r"
        proc.stdin.close()
        assert proc.wait(TIMEOUT) == 0
    finally:
        proc.kill()


# --- exit codes and signals -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code"), [([], 0), (["--exit", "1"], 1), (["--kill"], 137), (["--exit", "137"], 137)]
)
def test_exit_code_is_the_commands(args, code):
    r = run([*WATCH, "--", *FAKE, "--steps", "20", *args])
    assert r.returncode == code
    assert b"training done" in r.stderr


def test_command_not_found_and_no_command():
    r = run([*WATCH, "--", "no-such-command-ftenv"])
    assert r.returncode == 127 and b"command not found" in r.stderr and b"Traceback" not in r.stderr
    r = run(WATCH)
    assert r.returncode == 2 and b"no command given" in r.stderr


SIGNALLED = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    def handler(signum, frame):
        print(f"{sys.argv[1]} got signal {signum}", flush=True)
        time.sleep(0.2)  # clean-up takes a moment; the watchdog must wait for it
        print(f"{sys.argv[1]} cleaned up", flush=True)
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    if sys.argv[1] == "child":
        kid = subprocess.Popen([sys.executable, __file__, "grandchild"])
        time.sleep(0.5)
    print(f"{sys.argv[1]} READY", flush=True)
    while True:
        time.sleep(0.1)
    """
)


def _signal_run(tmp_path, prefix: list[str], sig: int, target_is_tini: bool = False):
    script = tmp_path / "sig.py"
    script.write_text(SIGNALLED)
    proc = subprocess.Popen(
        [*prefix, *WATCH, "--", sys.executable, str(script), "child"], stdout=subprocess.PIPE
    )
    try:
        read_until(proc, b"child READY")
        os.kill(proc.pid, sig)
        out, _ = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
    return proc.returncode, out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_reach_the_whole_process_group(tmp_path, sig):
    rc, out = _signal_run(tmp_path, [], sig)
    assert f"child got signal {int(sig)}".encode() in out
    assert f"grandchild got signal {int(sig)}".encode() in out
    assert b"child cleaned up" in out
    assert rc == 128 + sig


@pytest.mark.skipif(shutil.which("tini") is None, reason="tini not installed (apt-get install tini)")
def test_signals_under_tini(tmp_path):
    """As in the image: tini (PID 1 there) -> ftenv watch -> the command."""
    # -g: the image's flag (signals go to the child's process group); -s stands in for PID 1 here.
    rc, out = _signal_run(tmp_path, [shutil.which("tini"), "-s", "-g", "--"], signal.SIGTERM)
    assert b"child got signal 15" in out and b"grandchild got signal 15" in out
    assert rc == 143


def test_a_reader_that_goes_away_ends_the_command_as_without_the_watchdog():
    """`ftenv watch -- yes | head -c 100`: yes gets SIGPIPE, nobody hangs."""
    r = subprocess.run(
        f"{' '.join(WATCH)} --no-summary -- yes | head -c 100 > /dev/null; echo ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert r.stdout.strip() == b"141"  # 128 + SIGPIPE, what `yes | head` gives too


def test_a_leftover_grandchild_holding_the_pipe_does_not_hold_the_watchdog():
    leftover_s = 60  # well below TIMEOUT: a watchdog that waits for the pipe's EOF returns after it
    start = time.monotonic()
    r = run([*WATCH, "--", "sh", "-c", f"sleep {leftover_s} & echo started $!"])
    elapsed = time.monotonic() - start
    pid = int(r.stdout.split()[1])
    try:
        assert r.returncode == 0 and r.stdout.startswith(b"started")
        assert elapsed < leftover_s / 2, f"the watchdog waited {elapsed:.0f} s for the leftover's pipe"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# --- volume ---------------------------------------------------------------------------------


def test_100_mb_through_both_streams_without_loss_or_deadlock():
    mb = 50  # per stream
    expected = []
    for which in (0, 1):
        h, n = hashlib.sha256(), 0
        for piece in flood(which, mb << 20):
            h.update(piece)
            n += len(piece)
        expected.append((n, h.hexdigest()))
    proc = subprocess.Popen(
        [*WATCH, "--no-summary", "--", *FAKE, "--flood", str(mb)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    got = [None, None]

    def drain(i, pipe):
        h, n, marked, tail = hashlib.sha256(), 0, False, b""
        while chunk := pipe.read(1 << 16):
            h.update(chunk)
            n += len(chunk)
            marked = marked or b"[ftenv-watch]" in tail + chunk
            tail = chunk[-16:]
        got[i] = (n, h.hexdigest(), marked)

    threads = [threading.Thread(target=drain, args=(i, p)) for i, p in enumerate((proc.stdout, proc.stderr))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT * 2)
    assert proc.wait(TIMEOUT) == 0
    assert expected[0][0] + expected[1][0] > 100 << 20
    for (n, digest), (m, digest2, marked) in zip(expected, got, strict=True):
        assert (m, digest2) == (n, digest)
        assert not marked  # steady steps: nothing added


# --- the launcher's entry and the no-torch promise -------------------------------------------


def test_ftenv_watch_0_execs_the_command_plainly():
    driver = (
        "import os, sys; from ftenv.watchdog.watch_command import WatchOptions; "
        "from ftenv.watchdog.watch import run; "
        "print('driver', os.getpid(), file=sys.stderr, flush=True); "
        "sys.exit(run(WatchOptions(cmd=('sh', '-c', 'echo child $$ >&2; "
        + " ".join(FAKE)
        + " --steps 60 --exit 3'))))"
    )
    off = run([sys.executable, "-c", driver], env=child_env(FTENV_WATCH="0"))
    assert off.returncode == 3 and b"[ftenv-watch]" not in off.stdout
    pids = re.findall(rb"(?:driver|child) (\d+)", off.stderr)
    assert len(pids) == 2 and pids[0] == pids[1]  # exec: the same process
    on = run([sys.executable, "-c", driver], env=child_env(unset=["FTENV_WATCH"]))
    assert on.returncode == 3 and b"[ftenv-watch] SLOW STEP" in on.stdout
    pids = re.findall(rb"(?:driver|child) (\d+)", on.stderr)
    assert pids[0] != pids[1]


def test_the_watchdog_never_imports_torch():
    driver = (
        "import sys; from ftenv.watchdog.watch import watch; "
        "from ftenv.watchdog.watch_command import WatchOptions; "
        f"rc = watch(WatchOptions(cmd={(*FAKE, '--steps', '40')!r})); "
        "print('TORCH LOADED' if 'torch' in sys.modules else 'no torch', file=sys.stderr)"
    )
    r = run([sys.executable, "-c", driver])
    assert b"SLOW STEP" in r.stdout  # the settings were read
    assert r.stderr.strip().endswith(b"no torch")


def test_an_internal_error_stops_the_watching_not_the_output(direct, child):
    driver = (
        "import sys; from ftenv.watchdog import funasr_log, watch, watch_command\n"
        "def boom(*a, **k): raise RuntimeError('injected')\n"
        "funasr_log.parse_line = boom\n"
        f"sys.exit(watch.watch(watch_command.WatchOptions(cmd={tuple(child)!r})))"
    )
    r = run([sys.executable, "-c", driver])
    assert r.returncode == 0
    assert MARKED.sub(b"", r.stdout) == direct.stdout and MARKED.sub(b"", r.stderr) == direct.stderr
    assert b"[ftenv-watch] internal error, watching stopped: injected" in r.stdout


# --- the training process's settings without CUDA -----------------------------------------------


def test_settings_come_from_the_training_process_environment():
    env = child_env(unset=[variables.SDPA_DEPRIORITIZED])
    proc = subprocess.Popen(
        ["sh", "-c", f"export {variables.SDPA_DEPRIORITIZED}=0 CUDNN_VERSION=9.19.0.56; exec sleep 30"],
        env=env,
    )
    try:
        for _ in range(100):  # until sh has exec'd into sleep with the exported variables
            values, source = process_settings.process_env(
                proc.pid, (variables.SDPA_DEPRIORITIZED, "CUDNN_VERSION")
            )
            if values[variables.SDPA_DEPRIORITIZED] is not None:
                break
            time.sleep(0.05)
        assert (
            values == {variables.SDPA_DEPRIORITIZED: "0", "CUDNN_VERSION": "9.19.0.56"}
            and source == "training process"
        )
        s = process_settings.read_process_settings(proc.pid)
        assert s.deprioritized.state == "prefer-cudnn" and s.stack.cudnn_version == 91900
    finally:
        proc.kill()
        proc.wait()


def test_settings_without_gpu_say_unknown_and_never_raise(monkeypatch):
    monkeypatch.setattr(process_settings, "gpu_arches", lambda: ((), "none"))
    monkeypatch.setenv(variables.SDPA_DEPRIORITIZED, "1")
    assert process_settings.read_process_settings(None).cudnn_first is False
    monkeypatch.setenv(variables.SDPA_DEPRIORITIZED, "0")
    s = process_settings.read_process_settings(None)
    assert s.cudnn_first is None and "GPU arch unknown" in s.line() and "first: unknown" in s.line()
    monkeypatch.setattr(process_settings, "gpu_arches", lambda: (((10, 0),), "nvml"))
    monkeypatch.setenv("CUDNN_VERSION", "9.19.0.56")
    monkeypatch.setattr(process_settings, "package_version", lambda *n: "2.11.0" if "torch" in n else None)
    assert process_settings.read_process_settings(None).cudnn_first is True
    monkeypatch.setattr(process_settings, "proc_environ", lambda pid: None)
    assert process_settings.read_process_settings(12345).variable_source == "environment"


# --- DDP: a rank waiting for another rank's new shape ------------------------------------------


def _watch_lines(lines: list[str]) -> tuple[list[str], SlowStepLines]:
    slow_lines = SlowStepLines(repeat=1000, settings=lambda: None)
    out = []
    for line in lines:
        out += slow_lines.observe_values(*funasr_log.fast_fields(line.encode()))
    return out, slow_lines


def test_the_watchdog_names_a_ddp_wait_for_another_ranks_new_shape():
    lines, _ = ddp_log(ranks=2)  # every rank logged, rank 0's line first at each step
    said, slow_lines = _watch_lines(lines)
    # Rank 1's line comes after rank 0's: its wait lines up with rank 0's new shape.
    assert any("waits for rank 0's new shape (DDP all-reduce)" in x for x in said)
    # Rank 0 is judged before rank 1 logs the step: the backward-only signature tells.
    assert any("rank 0 step" in x and "waits for another rank's new shape" in x for x in said)
    assert not any("not shape-related" in x or "seen-shape" in x for x in said)
    s = slow_lines.summary()
    assert s.slow_causes == {step_types.NEW_SHAPE: 70} and s.slow_waiting == 32  # each rank's step 1 apart
    assert any(
        "32 waiting for another rank's new shape (DDP) (100%)" in x for x in slow_lines.summary_lines()
    )


def test_a_first_slow_step_that_waits_says_so_in_its_short_line():
    lines, _ = ddp_log(ranks=2, only_rank=1)
    said, _ = _watch_lines(lines)
    waits = [x for x in said if "waits for another rank's new shape" in x]
    assert waits and all(len(x) <= 200 for x in waits if "SLOW STEP" in x)


@pytest.mark.parametrize("repeat", [2, 3, 4])
def test_repeat_prints_short_lines_up_to_the_pattern_line(repeat):
    slow_lines = SlowStepLines(repeat=repeat, settings=lambda: None)
    said = []
    for i in range(1, 31):  # steady seen-shape steps, then slow ones on new shapes
        said += slow_lines.observe(step_types.Step(i, 0.125, 8, 100))
    for i in range(31, 41):
        said += slow_lines.observe(step_types.Step(i, 1.0, 8, 100 + 4 * i))
    kinds = [x.split()[1] for x in said if not x.startswith("[ftenv-watch]   ")]
    assert kinds == ["SLOW"] + ["slow"] * (repeat - 2) + ["PATTERN:"]
