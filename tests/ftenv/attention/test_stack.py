"""ftenv.attention.facts.Stack: the one shape in which `ftenv probe` and `ftenv selfcheck` record
the stack they measured on, with the JSON keys their users read."""

from __future__ import annotations

from ftenv import variables
from ftenv.attention import facts, probe
from ftenv.selfcheck import base

KEYS = ["device", "torch", "cudnn", variables.SDPA_DEPRIORITIZED, "cpu_threads"]


def test_the_json_form_keeps_the_keys_users_read(monkeypatch):
    monkeypatch.setenv(variables.SDPA_DEPRIORITIZED, "1")
    stack = facts.read_stack("cpu")
    d = stack.as_dict()
    assert list(d) == KEYS
    assert d[variables.SDPA_DEPRIORITIZED] == "1" and d["device"] == "cpu" and d["cpu_threads"] >= 1
    gpu = facts.Stack("cuda", "2.11.0+cu130", 91900, None, 8, "NVIDIA H200", "sm_90").as_dict()
    assert list(gpu) == [*KEYS, "gpu", "sm"] and (gpu["gpu"], gpu["sm"]) == ("NVIDIA H200", "sm_90")


def test_the_probe_and_the_selfcheck_record_the_same_shape(monkeypatch):
    monkeypatch.delenv(variables.SDPA_DEPRIORITIZED, raising=False)
    assert base.environment("cpu") == facts.read_stack("cpu").as_dict()
    monkeypatch.setattr(probe, "SHAPES", {"current": [(1, 8)]})
    monkeypatch.setattr(probe, "WARMUP_SHAPE", {"current": (1, 4)})
    result = probe.probe("cpu", heads=2, head_dim=8)
    assert {k: result[k] for k in KEYS} == base.environment("cpu")
