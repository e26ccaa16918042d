"""Training needs a GPU: `ftenv finetune` without one refuses before the data check, with the fix and
exit 2, unless the CPU test aid is set; a dry run still checks the inputs (ftenv.launch.gpu_gate)."""

from __future__ import annotations

from ftenv import cli, outcome, variables
from ftenv.launch import gpu_gate
from support.finetune_launch import cmdline

NO_GPU = {variables.CUDA_VISIBLE_DEVICES: ""}


def test_no_gpu_is_refused_unless_the_cpu_aid_is_set():
    assert gpu_gate.refusal(NO_GPU) == gpu_gate.MESSAGE
    assert "training needs one" in gpu_gate.MESSAGE and "--dry-run" in gpu_gate.MESSAGE
    assert gpu_gate.refusal({**NO_GPU, variables.FUNASR_CPU_SHIM: "1"}) is None


def test_a_gpu_count_torch_cannot_give_is_not_a_refusal(monkeypatch):
    monkeypatch.setattr(gpu_gate, "gpu_count", lambda env: None)
    assert gpu_gate.refusal({}) is None
    monkeypatch.setattr(gpu_gate, "gpu_count", lambda env: 2)
    assert gpu_gate.refusal({}) is None


def test_finetune_refuses_before_the_data_check(work, monkeypatch, capsys):
    monkeypatch.delenv(variables.FUNASR_CPU_SHIM, raising=False)
    monkeypatch.setenv(variables.CUDA_VISIBLE_DEVICES, "")
    monkeypatch.setenv(variables.REPORT, "0")
    assert cli.main(cmdline(work, "--gpus-per-node", "1")) == outcome.UNUSABLE
    err = capsys.readouterr().err
    assert f"ftenv finetune: {gpu_gate.MESSAGE}" in err
    assert not (work / "out/data-check.json").exists() and "data check" not in err.split(gpu_gate.MESSAGE)[1]
    # The dry run checks the inputs without a GPU, and prints the command.
    assert cli.main(cmdline(work, "--gpus-per-node", "1", "--dry-run")) == 0
    assert "--nproc_per_node 1" in capsys.readouterr().out
