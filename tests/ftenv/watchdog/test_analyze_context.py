"""`ftenv analyze` reads what a saved log holds besides its steps: the start-up report that the
image's entrypoint prints into the same stream (rendered here by the report's own code, then read
back: ftenv.report.logged) and the traceback a crashed run ends with (ftenv.watchdog.crash). The fix
never names what the report shows is already in place, and comes as one short line with the full
text below it; a log that ends in a traceback says so before a labelled verdict."""

from __future__ import annotations

import json

import pytest

from ftenv import cli, variables
from ftenv.attention import sdpa
from ftenv.attention.facts import Facts, Gpu, Stack
from ftenv.report import render
from ftenv.report.logged import ReportReader
from ftenv.trainer import compile_setting
from support.steplogs import field_report_log

B200, A100 = (10, 0), (8, 0)
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.12/site-packages/funasr/bin/train_ds.py", line 244, in main',
    "    trainer.validate_epoch(",
    '  File "/opt/venv/lib/python3.12/site-packages/funasr/datasets/audio_datasets/index_ds.py", in collator',
    "    batch['input_ids']",
    "KeyError: 'input_ids'",
]


def report(monkeypatch, raw: str | None, sm=B200, compiled: str | None = None) -> list[str]:
    """The start-up report's lines as the image prints them, for a run with these settings."""
    if compiled is None:
        monkeypatch.delenv(variables.COMPILE, raising=False)
    else:
        monkeypatch.setenv(variables.COMPILE, compiled)
    f = Facts(
        image="ghcr.io/funasr-nano-images/funasr-nano:test",
        stack=Stack("2.11.0+cu130", 91900, deprioritized_raw=raw),
        torch_cuda="13.0",
        gpus=[Gpu(0, "NVIDIA B200", sm, 179 * 2**30)],
    )
    return render.render_text(f, render.assess(f), compile_setting.report_line()).splitlines()


def analyze(tmp_path, capsys, lines: list[str], *args: str) -> tuple[int, str]:
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    rc = cli.main(["analyze", *args, str(log)])
    return rc, capsys.readouterr().out


def fix_lines(out: str) -> tuple[str, str]:
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("fix: "))
    return lines[at], lines[at + 1]


def issue_run() -> list[str]:
    return field_report_log()[0]


def test_with_the_variable_at_1_the_fix_is_not_to_set_it(tmp_path, capsys, monkeypatch):
    rc, out = analyze(tmp_path, capsys, [*report(monkeypatch, "1"), *issue_run()])
    assert rc == 1
    assert (
        "start-up report in the log: NVIDIA B200 (sm_100); torch 2.11.0+cu130, cuDNN 9.19.0; "
        "TORCH_CUDNN_SDPA_DEPRIORITIZED=1; compile off"
    ) in out.splitlines()
    short, detail = fix_lines(out)
    assert short.startswith(f"fix: {sdpa.FIX} is already set") and len(short) < 140, short
    assert detail.startswith(f"  {sdpa.FIX} is already set") and "ftenv probe" in detail
    assert f"set {sdpa.FIX}" not in out


def test_with_the_variable_unset_the_fix_is_to_set_it(tmp_path, capsys, monkeypatch):
    rc, out = analyze(tmp_path, capsys, [*report(monkeypatch, None), *issue_run()])
    assert rc == 1 and "TORCH_CUDNN_SDPA_DEPRIORITIZED unset; compile off" in out
    short, detail = fix_lines(out)
    assert short == f"fix: set {sdpa.FIX} in the training process's environment before it starts"
    assert detail.startswith(f"  set {sdpa.FIX}") and sdpa.RULE_TEXT in detail
    assert "is already set" not in out


def test_compile_on_with_the_variable_at_1_points_at_recompiling(tmp_path, capsys, monkeypatch):
    rc, out = analyze(tmp_path, capsys, [*report(monkeypatch, "1", compiled="1"), *issue_run()])
    assert rc == 1 and "compile on: regional, audio, nosync, lmhead" in out
    short, detail = fix_lines(out)
    assert "already set and the decoder is compiled" in short and "recompiling" in short
    assert "FTENV_COMPILE=0" in detail


def test_where_cudnn_is_not_first_the_fix_is_padding(tmp_path, capsys, monkeypatch):
    rc, out = analyze(tmp_path, capsys, [*report(monkeypatch, None, sm=A100), *issue_run()])
    assert rc == 1 and "NVIDIA B200 (sm_80)" in out
    short, _ = fix_lines(out)
    assert short.startswith("fix: pad batches to a few fixed lengths") and f"set {sdpa.FIX}" not in short


def test_without_a_report_it_says_so_and_keeps_the_general_fix(tmp_path, capsys):
    rc, out = analyze(tmp_path, capsys, issue_run())
    assert rc == 1 and "start-up report: none in the log" in out
    short, detail = fix_lines(out)
    assert short.startswith(f"fix: set {sdpa.FIX}") and "if it is already 1" in detail


def test_the_last_report_counts_and_json_carries_it(tmp_path, capsys, monkeypatch):
    lines = [*report(monkeypatch, "0"), *report(monkeypatch, "1"), *issue_run()]
    rc, out = analyze(tmp_path, capsys, lines, "--json")
    data = json.loads(out)
    assert rc == 1
    assert data["report"]["env"] == {"raw": "1", "state": "deprioritized"}
    assert data["report"]["gpus"] == [{"name": "NVIDIA B200", "sm": "sm_100"}]
    assert data["summary"]["fix_short"].startswith(f"{sdpa.FIX} is already set") and data["crash"] is None


@pytest.mark.parametrize("raw", ["1", "0", " 1", "true", None])
def test_the_report_reads_back_what_it_printed(monkeypatch, raw):
    reader = ReportReader()
    for line in report(monkeypatch, raw):
        reader.feed(line)
    r = reader.latest
    assert r.deprioritized == sdpa.interpret_deprioritized(raw) and r.gpus == [("NVIDIA B200", B200)]
    assert (r.torch_version, r.cudnn_version, r.compiled) == ("2.11.0+cu130", 91900, ())


# --- a log that ends in a traceback -----------------------------------------------------------


def test_a_log_that_ends_in_a_traceback_says_so_before_the_verdict(tmp_path, capsys):
    fixed = field_report_log(fixed=True)[0]
    rc, out = analyze(tmp_path, capsys, [*fixed, *TRACEBACK])
    lines = out.splitlines()
    failed = lines.index("the run FAILED after step 382; last error: KeyError: 'input_ids'")
    assert lines[failed + 1] == "step-time verdict on the steps before the failure: PASS"
    assert not any(line.startswith("verdict:") for line in lines) and rc == 0


def test_a_traceback_with_steps_after_it_is_not_the_end(tmp_path, capsys):
    fixed = field_report_log(fixed=True)[0]
    rc, out = analyze(tmp_path, capsys, [*fixed[:100], *TRACEBACK, *fixed[100:]])
    assert rc == 0 and "FAILED" not in out and "verdict: PASS" in out.splitlines()


def test_torchrun_prefixes_and_chained_tracebacks(tmp_path, capsys):
    """A worker's traceback with torchrun's prefix, chained: the exception raised last (Python prints
    it last); then another rank's traceback, a consequence: not taken."""
    chained = [f"[rank1]: {line}" for line in TRACEBACK]
    chained += ["[rank1]: ", "[rank1]: During handling of the above exception, another exception occurred:"]
    chained += ["[rank1]: ", "[rank1]: Traceback (most recent call last):", '[rank1]:   File "x.py", line 1']
    chained += ["[rank1]: RuntimeError: the batch is empty"]
    other = [
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "y.py"',
        "[rank0]: DistBackendError: x",
    ]
    rc, out = analyze(tmp_path, capsys, [*field_report_log(fixed=True)[0], *chained, *other])
    assert rc == 0 and "the run FAILED after step 382; last error: RuntimeError: the batch is empty" in out


# --- a log that ends in a saved stop ----------------------------------------------------------

STOP = (
    "ftenv: stopped on SIGTERM at epoch 0 step 382 (batches done in that epoch); saved to /out/model.pt "
    "(and model.pt.ep0.382); run the same command again to continue"
)
SIGNAL_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "torch/distributed/elastic/multiprocessing/api.py", line 84, in _terminate_process_handler',
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 7 got signal: 15",
]


def test_a_log_that_ends_in_a_saved_stop_says_stopped_and_saved(tmp_path, capsys):
    """Even with a launcher's traceback about the signal after it: a stop is not a failure."""
    fixed = field_report_log(fixed=True)[0]
    rc, out = analyze(tmp_path, capsys, [*fixed, STOP, *SIGNAL_TRACEBACK])
    lines = out.splitlines()
    at = lines.index(
        "the training command STOPPED on a signal and SAVED (exit code 75, not a failure) after step 382: "
        "stopped on SIGTERM at epoch 0 step 382, saved to /out/model.pt (and model.pt.ep0.382); run the "
        "same command again to continue (the examples' schedulers requeue or retry it)"
    )
    assert lines[at + 1] == "step-time verdict on the steps before the stop: PASS"
    assert "FAILED" not in out and rc == 0
    rc, out = analyze(tmp_path, capsys, [*fixed, STOP], "--json")
    data = json.loads(out)
    assert data["stop"]["signal"] == "SIGTERM" and data["crash"] is None


def test_a_stop_with_steps_after_it_was_resumed(tmp_path, capsys):
    """A requeued job appends to the same log: the stop in the middle is not how it ended."""
    fixed = field_report_log(fixed=True)[0]
    rc, out = analyze(tmp_path, capsys, [*fixed[:100], STOP, *fixed[100:]])
    assert rc == 0 and "STOPPED" not in out and "verdict: PASS" in out.splitlines()
