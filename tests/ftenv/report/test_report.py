"""The report's assessment and rendering on injected facts, and fact collection without a GPU; the
last section runs on a real GPU (skipped without one)."""

import json
import os
import subprocess
import sys
import types

import pytest

from ftenv import variables
from ftenv.attention import facts as facts_mod
from ftenv.attention import sdpa
from ftenv.attention.facts import Facts, Gpu, Stack
from ftenv.report import render
from ftenv.stack import versions
from ftenv.trainer import compile_setting
from imagetools import tags
from support import child_env

GIB = 2**30


def _facts(sms=((9, 0),), raw="1", cudnn=91900, order=None, choice=None, torch_version="2.11.0+cu130", **kw):
    gpus = [Gpu(i, f"GPU{i}", sm, 141 * GIB) for i, sm in enumerate(sms)]
    base = dict(
        image="ghcr.io/x/y:tag",
        stack=Stack(torch_version, cudnn, deprioritized_raw=raw),
        torch_cuda="13.0",
        libcuda_found=bool(sms),
        driver_version="580.126.20" if sms else None,
        driver_cuda=13000 if sms else None,
        gpus=gpus,
        live_order=order,
        padded_choice=choice,
        shm_bytes=16 * GIB,
        min_driver="580",
    )
    base.update(kw)
    return Facts(**base)


@pytest.mark.parametrize(
    "sm, raw, cudnn, level",
    [
        ((8, 0), None, 91900, "ok"),
        ((9, 0), None, 91900, "exposed"),
        ((10, 0), None, 91900, "exposed"),
        ((10, 3), "0", 91900, "exposed"),
        ((12, 0), None, 91900, "ok"),
        ((9, 0), None, 91002, "ok"),
        ((9, 0), "1", 91900, "ok"),
        ((9, 0), "true", 91900, "exposed"),
        ((9, 0), "", 91900, "exposed"),
    ],
)
def test_matrix_without_the_sdpa_call(sm, raw, cudnn, level):
    a = render.assess(_facts(sms=[sm], raw=raw, cudnn=cudnn))
    assert a.exposure.level == level


def test_text_block_has_each_fact():
    f = _facts(order=[1, 2, 0, 3, 4], choice=2)
    text = render.render_text(f, render.assess(f), compile_setting.report_line())
    assert "torch 2.11.0+cu130 (CUDA 13.0), cuDNN 9.19.0" in text
    assert "driver  580.126.20 (CUDA 13.0)" in text
    assert "GPU 0   GPU0, sm_90, 141.0 GiB" in text
    assert "live order: flash > efficient > math > cudnn > overrideable" in text
    assert "takes: efficient" in text
    assert "verdict OK" in text
    assert len(text.splitlines()) <= 8  # one short block


def test_ignored_value_is_explained_with_the_fix():
    f = _facts(raw="true")
    text = render.render_text(f, render.assess(f), compile_setting.report_line())
    assert "WARNING: TORCH_CUDNN_SDPA_DEPRIORITIZED='true': torch ignores 'true'" in text
    assert "Fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in text


def test_unsupported_gpu_warns():
    notes = render.assess(_facts(sms=[(8, 0), (9, 0)])).notes
    assert any("GPU 0" in n and "sm_80" in n for n in notes)
    assert not any("GPU 1" in n for n in notes)


def test_no_gpu_says_so_and_warns_about_the_driver():
    f = _facts(sms=[])
    a = render.assess(f)
    text = render.render_text(f, a, compile_setting.report_line())
    assert "GPU     none visible" in text and "verdict NO GPU" in text
    assert any(
        n.startswith("WARNING: The NVIDIA driver was not detected") and "--gpus all" in n for n in a.notes
    )


def test_driver_too_old_is_an_error_naming_the_fix():
    notes = render.assess(_facts(driver_cuda=12080, driver_version="570.86")).notes
    assert notes[0].startswith("ERROR:") and "R580" in notes[0] and "12.8" in notes[0] and "cu128" in notes[0]
    assert not any(n.startswith("ERROR") for n in render.assess(_facts()).notes)


def test_shm_default_gets_the_ngc_advice():
    notes = render.assess(_facts(shm_bytes=64 * 2**20)).notes
    assert any(n.startswith("NOTE: /dev/shm is 64 MiB") and "--ipc=host" in n for n in notes)
    assert not any("/dev/shm" in n for n in render.assess(_facts()).notes)


def test_json_is_complete_and_parses():
    f = _facts(order=[3, 1, 2, 0, 4], choice=3, raw="0")
    data = json.loads(render.render_json(f, render.assess(f)))
    assert data["verdict"]["level"] == "exposed"
    assert data["env"] == {"raw": "0", "state": "prefer-cudnn", "meaning": data["env"]["meaning"]}
    assert data["live_order_names"][0] == "cudnn" and data["padded_choice_name"] == "cudnn"
    assert data["facts"]["gpus"][0]["sm"] == [9, 0]


class _FakeTensor:
    def __getitem__(self, key):
        return self

    def __setitem__(self, key, value):
        pass


def _fake_torch(private_apis: bool, sm=(9, 0)):
    """A torch stand-in with a visible GPU, with or without the private SDPA helpers."""
    props = types.SimpleNamespace(name="NVIDIA H200", major=sm[0], minor=sm[1], total_memory=141 * GIB)
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: 1,
        get_device_properties=lambda i: props,
        synchronize=lambda: None,
    )
    torch = types.SimpleNamespace(
        cuda=cuda,
        bfloat16="bf16",
        bool="bool",
        randn=lambda *a, **k: _FakeTensor(),
        ones=lambda *a, **k: _FakeTensor(),
        nn=types.SimpleNamespace(
            functional=types.SimpleNamespace(scaled_dot_product_attention=lambda *a: None)
        ),
        _C=types.SimpleNamespace(),
    )
    if private_apis:
        torch._C._get_sdp_priority_order = lambda: [3, 1, 2, 0, 4]
        torch._fused_sdp_choice = lambda *a, **k: 3
    return torch


def test_missing_private_apis_give_unknown_and_the_rule_still_decides():
    f = _facts(raw=None)
    f.gpus = []
    torch = _fake_torch(private_apis=False)
    facts_mod._gpus(f, torch)
    facts_mod._sdpa(f, torch)
    assert f.gpus[0].sm == (9, 0)
    assert f.live_order is None and f.padded_choice is None
    assert any("_get_sdp_priority_order" in p for p in f.problems)
    assert any("_fused_sdp_choice" in p for p in f.problems)
    a = render.assess(f)
    assert a.exposure.level == "exposed" and "by torch's rule" in a.exposure.reason
    text = render.render_text(f, a, compile_setting.report_line())
    assert "live order: unknown" in text and "takes: unknown" in text


def test_private_apis_present_are_read():
    f = _facts(raw="0")
    f.gpus = []
    torch = _fake_torch(private_apis=True)
    facts_mod._gpus(f, torch)
    facts_mod._sdpa(f, torch)
    assert f.live_order == [3, 1, 2, 0, 4] and f.padded_choice == 3
    assert render.assess(f).exposure.level == "exposed"


def test_a_raising_cuda_is_recorded_not_raised():
    torch = _fake_torch(private_apis=True)
    torch.cuda.is_available = lambda: (_ for _ in ()).throw(RuntimeError("driver too old"))
    f = Facts()
    facts_mod._gpus(f, torch)
    assert f.gpus == [] and any("driver too old" in p for p in f.problems)


def test_no_gpu_probe_still_lists_the_gpus_and_runs_no_kernel(monkeypatch):
    """`ftenv report --no-gpu-probe` on a GPU host: the GPU is named, only the SDPA call is left out
    (it once listed no GPU, judged "no GPU" and warned that torch saw none)."""
    torch = _fake_torch(private_apis=True)

    def no_kernel(*a, **k):
        raise AssertionError("--no-gpu-probe ran a kernel")

    torch.randn = no_kernel
    monkeypatch.setitem(sys.modules, "torch", torch)
    torch.__version__, torch.version = "2.11.0+cu130", types.SimpleNamespace(cuda="13.0")
    torch.backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(version=lambda: 91900))
    f = facts_mod.collect(live=False)
    assert [g.name for g in f.gpus] == ["NVIDIA H200"] and f.live_order is None
    a = render.assess(f)
    assert a.exposure.level != "no-gpu"
    assert not any("torch sees no GPU" in n for n in a.notes)


def test_collect_on_this_machine_never_raises_and_report_exits_0(capsys, monkeypatch):
    monkeypatch.setenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", "true")
    f = facts_mod.collect()
    assert f.stack.deprioritized_raw == "true"
    from ftenv.cli import main

    assert main(["report", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["env"]["state"] == "ignored"


@pytest.mark.parametrize(
    "raw, shown",
    [
        (None, "TORCH_CUDNN_SDPA_DEPRIORITIZED unset"),
        ("1", "TORCH_CUDNN_SDPA_DEPRIORITIZED=1:"),
        ("", "TORCH_CUDNN_SDPA_DEPRIORITIZED='':"),
        (" 1", "TORCH_CUDNN_SDPA_DEPRIORITIZED=' 1':"),
    ],
)
def test_the_variable_is_shown_unambiguously(raw, shown):
    f = _facts(raw=raw)
    assert shown in render.render_text(f, render.assess(f), compile_setting.report_line())


@pytest.mark.parametrize("raw", ["0", None, "yes"])
def test_the_report_names_the_nan_risk_next_to_the_speed_cost(raw):
    f = _facts(raw=raw, order=[3, 1, 2, 0, 4], choice=3)
    lines = render.render_text(f, render.assess(f), compile_setting.report_line()).splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("verdict EXPOSED"))
    assert "new batch shapes" in lines[verdict]  # the speed cost...
    assert "NaN gradients" in lines[verdict + 1] and "pytorch/pytorch#196678" in lines[verdict + 1]
    assert json.loads(render.render_json(f, render.assess(f)))["verdict"]["risk"]


def test_no_nan_risk_line_with_the_variable_at_1():
    f = _facts(raw="1", order=[1, 2, 0, 3, 4], choice=2)
    assert "NaN" not in render.render_text(f, render.assess(f), compile_setting.report_line())


@pytest.mark.parametrize("cudnn_h, fixed", [((9, 25, 1), False), ((9, 26, 0), True)])
def test_the_report_reads_the_loaded_cudnn_and_names_the_note_of_its_side(monkeypatch, cudnn_h, fixed):
    """The version as the report reads it: torch.backends.cudnn.version() returns cudnn_version.h's
    CUDNN_VERSION (major * 10000 + minor * 100 + patch): 9.26.0.51 is 92600."""
    major, minor, patch = cudnn_h
    torch = _fake_torch(private_apis=True)
    monkeypatch.setitem(sys.modules, "torch", torch)
    torch.__version__, torch.version = "2.15.0", types.SimpleNamespace(cuda="13.2")
    cudnn = types.SimpleNamespace(version=lambda: major * 10000 + minor * 100 + patch)
    torch.backends = types.SimpleNamespace(cudnn=cudnn)
    monkeypatch.setenv(variables.SDPA_DEPRIORITIZED, "0")
    f = facts_mod.collect()
    text = render.render_text(f, render.assess(f), compile_setting.report_line())
    also = next(line for line in text.splitlines() if line.strip().startswith("also:"))
    assert f"cuDNN {major}.{minor}.{patch}," in text
    assert ("NVIDIA/cudnn-frontend#1072" in also) is fixed and ("pytorch/pytorch#196678" in also) is not fixed


def test_a_torch_2_9_report_is_not_ok_when_the_build_is_unknown():
    f = _facts(raw="1", torch_version="2.9.1+cu130", torch_cuda="13.0")
    text = render.render_text(f, render.assess(f), compile_setting.report_line())
    assert "verdict UNKNOWN: possibly affected on sm_90" in text and "TORCH_CUDNN_SDPA_PREFERRED=0" in text


def test_on_torch_2_9_the_sdpa_line_says_the_variable_is_not_read():
    f = _facts(raw="1", torch_version="2.9.1+cu130", torch_cuda="13.0")
    sdpa_line = next(
        x
        for x in render.render_text(f, render.assess(f), compile_setting.report_line()).splitlines()
        if x.startswith("SDPA")
    )
    assert "not read by torch 2.9" in sdpa_line and "TORCH_CUDNN_SDPA_PREFERRED=0" in sdpa_line
    f = _facts(raw="1")
    assert "not moved to the front" in render.render_text(f, render.assess(f), compile_setting.report_line())


# --- on a real GPU (skipped without CUDA; each setting in a fresh process) ---------------------------


def _report(value: str | None) -> dict:
    env = child_env(unset=[variables.SDPA_DEPRIORITIZED])
    if value is not None:
        env[variables.SDPA_DEPRIORITIZED] = value
    out = subprocess.run(
        [sys.executable, "-m", "ftenv.cli", "report", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def reports() -> dict:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    return {value: _report(value) for value in ("1", "0")}


@pytest.mark.gpu
def test_the_sdpa_call_reads_the_order_and_the_choice(reports):
    facts = reports["1"]["facts"]
    assert facts["gpus"] and facts["live_order"] and facts["padded_choice"] is not None, facts["problems"]


@pytest.mark.gpu
def test_deprioritized_never_takes_cudnn(reports):
    assert reports["1"]["facts"]["padded_choice"] != sdpa.CUDNN
    assert reports["1"]["verdict"]["level"] == "ok"


@pytest.mark.gpu
def test_at_0_the_verdict_follows_the_rule(reports):
    facts = reports["0"]["facts"]
    sm = tuple(facts["gpus"][0]["sm"])
    expected = sdpa.cudnn_first_by_rule(
        facts["torch_version"], facts["cudnn_version"], sm, sdpa.interpret_deprioritized("0")
    )
    assert (facts["live_order"][0] == sdpa.CUDNN) is expected
    assert (facts["padded_choice"] == sdpa.CUDNN) is expected
    assert reports["0"]["verdict"]["level"] == ("exposed" if expected else "ok")


def test_the_report_names_the_build_by_its_immutable_tag(monkeypatch):
    """Two nodes of one job on different builds of a moving `<stack>` tag show different lines; the
    digest is said to be out of sight, with where to read it, never guessed."""
    ref = tags.image_ref(versions.load().default)  # versions.toml's default variant, by its stack tag
    monkeypatch.setenv(variables.IMAGE, ref)
    monkeypatch.setenv(variables.IMAGE_REVISION, "3F2A9C81D0E4" + "7" * 28)
    f = _facts()
    lines = render.render_text(f, render.assess(f), compile_setting.report_line()).splitlines()
    assert lines[1].startswith(
        f"build   {ref}-3f2a9c81d0e4 (this build's immutable tag; commit 3F2A9C81D0E4{'7' * 28}); "
        "digest: not visible inside a container ("
    ), lines
    monkeypatch.setenv(variables.IMAGE_REVISION, "unknown")
    assert render.build_line(os.environ).startswith(
        "build   commit unknown (a local build: no immutable tag); "
    )
    monkeypatch.delenv(variables.IMAGE_REVISION)
    assert render.build_line(os.environ) is None  # an image built before it set the commit
