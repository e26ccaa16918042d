"""ftenv.attention.facts.Stack: the one shape in which every reader of the stack (the report, the
watchdog, `ftenv probe`, `ftenv selfcheck`) records it, with the JSON keys their users read."""

from __future__ import annotations

import dataclasses

from ftenv import variables
from ftenv.attention import facts, probe, process_settings, sdpa
from ftenv.report import render
from ftenv.selfcheck import runs_on
from ftenv.stack import versions

KEYS = ["device", "torch", "cudnn", variables.SDPA_DEPRIORITIZED, "cpu_threads"]


def test_the_json_form_keeps_the_keys_users_read(monkeypatch):
    monkeypatch.setenv(variables.SDPA_DEPRIORITIZED, "1")
    stack = facts.read_stack("cpu")
    d = stack.as_dict()
    assert list(d) == KEYS
    assert d[variables.SDPA_DEPRIORITIZED] == "1" and d["device"] == "cpu" and d["cpu_threads"] >= 1
    gpu = facts.Stack("2.11.0+cu130", 91900, ((9, 0),), None, "cuda", 8, "NVIDIA H200").as_dict()
    assert list(gpu) == [*KEYS, "gpu", "sm"] and (gpu["gpu"], gpu["sm"]) == ("NVIDIA H200", "sm_90")


def test_the_probe_and_the_selfcheck_record_the_same_shape(monkeypatch):
    monkeypatch.delenv(variables.SDPA_DEPRIORITIZED, raising=False)
    assert runs_on.environment("cpu") == facts.read_stack("cpu").as_dict()
    monkeypatch.setattr(probe, "SHAPES", {"current": [(1, 8)]})
    monkeypatch.setattr(probe, "WARMUP_SHAPE", {"current": (1, 4)})
    result = probe.probe("cpu", heads=2, head_dim=8)
    assert {k: result[k] for k in KEYS} == runs_on.environment("cpu")


def test_the_report_and_the_watchdog_hold_the_same_stack(monkeypatch):
    """The report reads in-process with torch, the watchdog from outside without it: both fill
    one Stack, and agree on what both can read here."""
    monkeypatch.setenv(variables.SDPA_DEPRIORITIZED, "0")
    report = facts.collect(live=False)
    watched = process_settings.read_process_settings(None)
    assert type(report.stack) is type(watched.stack) is facts.Stack
    assert {f.name for f in dataclasses.fields(facts.Facts)} & {
        "torch_version",
        "cudnn_version",
        "env_raw",
    } == set()
    assert {f.name for f in dataclasses.fields(process_settings.AttentionSettings)} & {
        "torch_version",
        "cudnn_version",
        "arches",
        "deprioritized",
    } == set()
    torch_release = versions.public(report.stack.torch_version)
    for stack in (report.stack, watched.stack, facts.read_stack("cpu")):
        assert stack.deprioritized_raw == "0"
        # Package metadata may lack the local tag torch.__version__ has (2.11.0 vs 2.11.0+cu130).
        assert torch_release is not None and versions.public(stack.torch_version) == torch_release
    assert watched.stack.arches == report.stack.arches == ()  # no GPU on this machine: unknown


def test_the_watchdog_says_unknown_for_what_it_cannot_read():
    settings = process_settings.AttentionSettings(
        facts.Stack(), "no NVML or nvidia-smi answer", "environment", None
    )
    assert settings.unknown_facts() == ["GPU arch", "torch version", "cuDNN version"]
    assert settings.line() == (
        f"GPU arch unknown, {variables.SDPA_DEPRIORITIZED} unset, cuDNN attention first: unknown "
        "(torch unknown, cuDNN unknown)"
    )


def test_the_report_json_keeps_its_flat_facts():
    """`ftenv report --json` had torch_version, cudnn_version and env_raw among its facts before
    they moved into Stack: its keys and their order stay, and no Facts field is left out."""
    f = facts.Facts(
        stack=facts.Stack("2.11.0+cu130", 91900, deprioritized_raw="1"),
        gpus=[facts.Gpu(0, "NVIDIA H200", (9, 0), 141 * 2**30)],
    )
    d = f.to_dict()
    assert (d["torch_version"], d["cudnn_version"], d["env_raw"]) == ("2.11.0+cu130", 91900, "1")
    assert list(d)[:6] == ["image", "variant", "min_driver", "torch_version", "torch_cuda", "cudnn_version"]
    fields = {fl.name for fl in dataclasses.fields(facts.Facts)} - {"stack"}
    assert set(d) == fields | {"torch_version", "cudnn_version", "env_raw"}
    assert f.stack.arches == ((9, 0),)
    assert '"env_raw": "1"' in render.render_json(f, render.assess(f))


def test_cudnn_first_on_several_gpus_is_first_on_one_unknown_on_one_or_not():
    """A process or a log with several GPUs: first on one is enough; unknown where it is first on
    none and a fact is missing for one; no GPU to judge is unknown, not "no"."""
    unset, at_1 = sdpa.interpret_deprioritized(None), sdpa.interpret_deprioritized("1")
    assert process_settings.cudnn_first_on([(8, 0), (9, 0)], "2.11.0", 91900, unset) is True
    assert process_settings.cudnn_first_on([(8, 0), (9, 0)], "2.11.0", None, unset) is None
    assert process_settings.cudnn_first_on([(8, 0)], "2.11.0", None, unset) is False
    assert process_settings.cudnn_first_on([(9, 0)], "2.11.0", 91900, at_1) is False
    assert process_settings.cudnn_first_on([], "2.11.0", 91900, unset) is None
