"""The GPU kit, rehearsed on a CPU machine: the wheel kit, the one GPU script, the results page.

The rehearsal builds a venv that looks like the lent GPU machine (of this environment's packages
only those that machine has: torch, transformers and the like, FunASR and its own dependencies
absent), installs the kit with the same `pip --no-index --no-deps --target` the GPU machine uses,
and runs scripts/gpu_checks.py with no network. The GPU machine has Python 3.12; torch for 3.12 is
not in this environment (gigabytes to download), so the rehearsal uses this Python and a kit built
for it from the same lock by the same code. It needs the package index (or pip's cache) to build
the kit, as `make gpu-kit` does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from importlib import metadata
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name, parse_wheel_filename

from ftenv import variables
from ftenv.attention import sdpa
from ftenv.stack import versions
from imagetools.__main__ import main as imagetools_main
from imagetools.gpukit import command, gpu_run, gpu_setup, gpu_steps, gpu_variant_steps
from support import ROOT, child_env

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
GPU_STEPS = {
    "selfcheck-1",
    "selfcheck-0",
    "recipe-1",
    "recipe-0",
    "probe",
    "batched-decode",
    "nccl-network",
    "selfcheck-compile",
}
#: Left out of the kit to show the rehearsal fails: FunASR's config layer, imported by its trainer.
LEFT_OUT = "omegaconf"
#: The steps that rank after the compile matrix (docs/gpu-results.md): the variant with cuDNN 9.26's
#: self-check at 1 and 0 (they need its torch) and the NaN reproducer of pytorch#196678.
AFTER_THE_MATRIX = ["steptime-compiled", "variant-selfcheck-1", "variant-selfcheck-0", "sdpa-nan"]


def _present() -> set[str]:
    return {canonicalize_name(n) for n in command.machine()["packages"]}


# --- the kit's contents, without downloading ---------------------------------------------------


def test_the_kit_is_what_the_machine_lacks_from_the_lock():
    m = command.machine()
    names = {e["name"] for e in command.kit_entries(m["python"], _present())}
    assert {"funasr", "hydra-core", "omegaconf", "librosa", "modelscope"} <= names
    assert not names & _present()
    assert not names & {"torch", "transformers", "triton", "numpy", "nvidia-cudnn-cu13"}
    assert "audioop-lts" not in names  # its marker asks for Python 3.13


def test_verify_names_each_way_a_kit_can_be_wrong(tmp_path):
    entries = [{"name": "funasr", "version": "1.4.99"}, {"name": "jamo", "version": "0.4.1"}]
    wheels = []
    for name in ("funasr-1.4.99", "funasr-1.4.15", "torch-9.9.9", "extra-1.0"):
        (w := tmp_path / f"{name}-py3-none-any.whl").write_bytes(b"x")
        wheels.append(w)
    problems = "\n".join(command.verify(wheels, entries, {"torch"}, limit_mib=50))
    assert "torch: the GPU machine has it already" in problems
    assert "funasr: two versions" in problems
    assert "jamo==0.4.1: no wheel" in problems
    assert "extra: not in the lock" in problems
    assert command.verify(wheels[:1], entries[:1], set(), limit_mib=50) == []
    assert "over the 0 MiB" in command.verify(wheels[:1], entries[:1], set(), limit_mib=0)[0]


def test_gpu_test_files_lists_every_file_with_gpu_tests():
    mark = re.compile(r"pytest\.mark\.gpu\b")
    files = (ROOT / "tests").rglob("test_*.py")
    marked = {str(p.relative_to(ROOT)) for p in files if mark.search(p.read_text())}
    assert marked == set(gpu_run.GPU_TEST_FILES)


def test_the_documented_call_is_the_one_make_gpu_kit_prints():
    doc = (ROOT / "docs" / "gpu-results.md").read_text()
    assert command.call_text() in doc
    assert command.run_call()["timeout_s"] <= 600  # the GPU machine's limit for one command


def test_the_results_page_says_what_ran_on_which_gpu():
    """Either no run and the page says so, or each run names its GPU, driver, torch and cuDNN."""
    doc = (ROOT / "docs" / "gpu-results.md").read_text()
    results = doc.split(command.RESULTS_HEADING, 1)[1]
    runs = re.findall(r"^### .*\n\nGPU (.+)$", results, flags=re.M)
    if not runs:
        assert "No GPU run yet" in doc and command.NO_RESULTS in results and "|" not in results
        return
    assert "No GPU run yet" not in doc and command.NO_RESULTS not in results
    for run in runs:
        assert re.search(r"\(sm_\d+\), driver [\d.]+, torch \S+ \(CUDA [\d.]+\), cuDNN \d", run), run


def test_a_step_past_its_budget_is_stopped_with_its_children(tmp_path):
    ctx = gpu_run.Context(tmp_path, tmp_path / "steps.log", child_env(), deadline=0)
    ctx.deadline = time.monotonic() + 2  # the whole run's end comes first: it cuts the step's 60 s
    start = time.monotonic()
    rc, output = gpu_run.run_logged(ctx, "sleeper", ["sh", "-c", "sleep 30 & sleep 30"], budget_s=60)
    assert rc is None and re.search(r"budget of [12] s ran out", output)
    assert time.monotonic() - start < 10  # the background child, holding the pipe, was stopped too
    assert "sleeper: timed out" in ctx.log.read_text()
    rc, output = gpu_run.run_logged(ctx, "late", ["true"], budget_s=60)  # the run's time is gone
    assert rc is None and "not started" in output


@pytest.mark.parametrize(
    ("sm", "cudnn", "at_1", "at_0", "unset", "selfcheck_at_0"),
    [
        ((9, 0), 91900, "ok", "exposed", "exposed", "FAIL"),  # H100/H200 with the pinned cuDNN
        ((10, 0), 91900, "ok", "exposed", "exposed", "FAIL"),
        ((9, 0), 91500, "ok", "ok", "ok", "PASS"),  # cuDNN 9.15.0: not moved to the front
        ((8, 9), 91900, "ok", "ok", "ok", "PASS"),  # L4/L40S: never cuDNN first
    ],
)
def test_expectations_on_a_gpu_follow_the_sdpa_rule(sm, cudnn, at_1, at_0, unset, selfcheck_at_0):
    ctx = gpu_run.Context(Path("."), Path("log"), {}, deadline=0, gpu={"name": "GPU", "sm": list(sm)})
    ctx.facts = {"torch_version": "2.11.0+cu130", "cudnn_version": cudnn}
    got = [gpu_steps.expected_verdict(ctx, v) for v in ("1", "0", None)]
    assert got == [at_1, at_0, unset]
    assert [gpu_steps.expected_selfcheck(ctx, v) for v in ("1", "0")] == ["PASS", selfcheck_at_0]
    ctx.gpu = None
    assert gpu_steps.expected_verdict(ctx, "0") == "no-gpu"


# --- the steps after the matrix: the variant with cuDNN 9.26, the NaN reproducer --------------------


def _without_fixed_variants() -> str:
    """versions.toml less its variants whose cuDNN carries the fix (a stack from before the torch 2.15
    variant), so that a test controls which variant the kit finds."""
    text = (ROOT / "versions.toml").read_text()
    for name, variant in versions.load(ROOT / "versions.toml").variants.items():
        if variant.cudnn_int >= sdpa.NAN_GRAD_FIXED_CUDNN:
            text = re.sub(rf"\n\[variants\.{name}\]\n.*?(?=\n\[|\Z)", "\n", text, flags=re.S)
    return text


def _use_versions(tmp_path, monkeypatch, text: str) -> None:
    (path := tmp_path / "versions.toml").write_text(text)
    monkeypatch.setenv(variables.VERSIONS_FILE, str(path))


def _with_variant(tmp_path, monkeypatch, torch="2.15.0", cudnn="9.26.0.51"):
    """versions.toml (less its fixed-cuDNN variants) with one more variant, like the torch 2.15 one
    (CUDA 13.2, its cuDNN pinned)."""
    text = _without_fixed_variants() + (
        f'\n[variants.cu132test]\nbase_image = "docker.io/nvidia/cuda:13.2.0-base-ubuntu24.04"\n'
        f'cuda = "13.2.0"\ntorch = "{torch}"\ntorchaudio = "2.11.1"\ntorch_index = ""\n'
        f'cudnn_package = "nvidia-cudnn-cu13"\ncudnn = "{cudnn}"\nmin_driver = "595"\n'
    )
    _use_versions(tmp_path, monkeypatch, text)


def _kit_ctx(torch_version, gpu=None, steps=()):
    ctx = gpu_run.Context(Path("."), Path("log"), {}, deadline=0, gpu=gpu, steps=tuple(steps))
    ctx.facts = {"torch_version": torch_version, "cudnn_version": 91900}
    return ctx


def test_the_variant_self_check_says_what_torch_it_needs_rather_than_pretending(tmp_path, monkeypatch):
    h200 = {"name": "NVIDIA H200", "sm": [9, 0]}
    _use_versions(tmp_path, monkeypatch, _without_fixed_variants())
    for name in gpu_variant_steps.VARIANT_SELFCHECKS:  # no variant with the fixed cuDNN: says so
        r = gpu_variant_steps.variant_not_run(_kit_ctx("2.11.0+cu130", h200), name)
        assert (r.step, r.ok, r.got) == (
            name,
            None,
            "no variant in versions.toml has cuDNN >= 9.26.0: not run",
        )
    _with_variant(tmp_path, monkeypatch, cudnn="9.25.1")  # 9.25.1 does not carry the fix
    assert gpu_variant_steps.fixed_cudnn_variant() is None
    _with_variant(tmp_path, monkeypatch)
    assert gpu_variant_steps.fixed_cudnn_variant().name == "cu132test"
    ctx = _kit_ctx("2.11.0+cu130", h200)
    r = gpu_steps.dispatch(ctx, "variant-selfcheck-0", None, tmp_path)
    assert (r.step, r.ok, r.got) == (
        "variant-selfcheck-0",
        None,
        "needs torch 2.15.0, found 2.11.0+cu130: not run",
    )
    assert r.expected.startswith(
        "cu132test (torch 2.15.0, cuDNN 9.26.0.51): FAIL where torch puts cuDNN first"
    )
    # Its own torch (any local build tag): the self-check runs, as the kit's other self-checks do.
    assert gpu_variant_steps.variant_not_run(_kit_ctx("2.15.0+cu132", h200), "variant-selfcheck-1") is None
    r = gpu_steps.dispatch(_kit_ctx("2.15.0+cu132"), "variant-selfcheck-1", None, tmp_path)
    assert (r.step, r.got) == ("variant-selfcheck-1", gpu_run.NO_GPU)  # run, and no GPU here


def test_the_matrix_leaves_time_only_for_the_steps_after_it_that_will_run(tmp_path, monkeypatch):
    h200 = {"name": "NVIDIA H200", "sm": [9, 0]}
    budget = gpu_variant_steps.BUDGET_S
    assert gpu_variant_steps.reserved_after_matrix(_kit_ctx("2.11.0", h200, ["steptime-compiled"])) == 0
    ctx = _kit_ctx("2.11.0+cu130", h200, gpu_steps.STEPS)
    assert gpu_variant_steps.reserved_after_matrix(ctx) == budget["sdpa-nan"]  # the variant's cannot run
    _with_variant(tmp_path, monkeypatch)
    ctx = _kit_ctx("2.15.0+cu132", h200, gpu_steps.STEPS)
    assert gpu_variant_steps.reserved_after_matrix(ctx) == sum(budget.values())


def test_json_is_found_among_warnings():
    noisy = 'W: {not json}\n{\n  "verdict": "PASS"\n}\nWarning at exit {x}\n'
    assert gpu_run.json_tail(noisy) == {"verdict": "PASS"}
    assert gpu_run.json_tail("Traceback: ImportError") == {}


# --- the rehearsal -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("kit")
    m = command.machine()
    command.build(dest, PYTHON, _present(), m["platforms"], m["kit_limit_mib"])
    return dest


@pytest.fixture(scope="module")
def machine_python(tmp_path_factory) -> Path:
    return lent_machine_venv(tmp_path_factory.mktemp("lent") / "venv", _present())


def lent_machine_venv(dest: Path, present: set[str]) -> Path:
    """A venv of this Python that sees, of this environment's packages, only those the GPU machine has.

    For rehearsing the GPU run on a CPU machine: the GPU machine's torch and transformers are the
    lock's, so the packages are linked from here, not downloaded again (torch is gigabytes), into one
    folder that a .pth file names; everything else (FunASR and what only it needs) is absent until
    the kit is installed. Returns the venv's python.
    """

    venv.EnvBuilder(symlinks=True).create(dest)
    python = dest / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    linked = dest / "lent-machine-packages"
    linked.mkdir()
    kept: dict[Path, set[Path]] = {}  # site folder -> top-level paths of the packages the machine has
    dropped: set[tuple[Path, str]] = set()
    for dist in metadata.distributions():
        site = Path(dist.locate_file(""))
        tops = {Path(*f.parts[:2]) for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__")}
        if canonicalize_name(dist.metadata["Name"]) in present:
            kept.setdefault(site, set()).update(tops)
        else:
            dropped.update((site, t.parts[0]) for t in tops)
    for site, tops in kept.items():
        for top in tops:
            shared = (site, top.parts[0]) in dropped  # a namespace folder shared with a dropped package
            rel = top if shared and len(top.parts) > 1 else Path(top.parts[0])
            link = linked / rel
            if not link.exists() and (site / rel).exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(site / rel)
    (Path(purelib) / "lent-machine-packages.pth").write_text(f"{linked}\n")
    return python


def _offline() -> list[str]:
    """A prefix that runs a command with no network at all, where user namespaces allow it."""
    if shutil.which("unshare") and subprocess.run(["unshare", "-rn", "true"]).returncode == 0:
        return ["unshare", "-rn"]
    return []


def machine_env(python: Path) -> dict[str, str]:
    """The environment of a command on the GPU machine: its python3 first on PATH, no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "OUT")}
    env["PATH"] = f"{python.parent}{os.pathsep}{env['PATH']}"
    # Without a network namespace, a dead proxy: anything that tries the network fails at once.
    env.update(
        dict.fromkeys(["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"], "http://127.0.0.1:9")
    )
    return env


def rehearse(python: Path, kit: Path, out: Path, *argv: str) -> tuple[subprocess.CompletedProcess, dict]:
    cmd = [*_offline(), str(python), "scripts/gpu_checks.py", "--wheels", str(kit), "--out", str(out)]
    proc = subprocess.run(
        [*cmd, *argv], cwd=ROOT, env=machine_env(python), capture_output=True, text=True, timeout=900
    )
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    return proc, summary


@pytest.mark.slow
def test_the_lent_machine_venv_lacks_funasr_until_the_kit_is_installed(machine_python):
    modules = ("torch", "transformers", "funasr", "omegaconf", "ftenv")
    probe = f"import importlib.util as u; print([bool(u.find_spec(m)) for m in {modules}])"
    out = subprocess.run(
        [machine_python, "-c", probe],
        env=machine_env(machine_python),
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[True, True, False, False, False]"


@pytest.mark.slow
def test_the_whole_gpu_run_rehearsed_without_a_gpu(kit, machine_python, tmp_path):
    proc, summary = rehearse(machine_python, kit, tmp_path / "out")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    steps = {s["step"]: s for s in summary["steps"]}
    assert list(steps) == gpu_steps.STEPS and list(steps)[-len(AFTER_THE_MATRIX) :] == AFTER_THE_MATRIX
    assert summary["gpu"] is None and summary["python"].startswith(PYTHON)
    for name, s in steps.items():
        if name in GPU_STEPS:
            assert (s["got"], s["ok"]) == (gpu_run.NO_GPU, None), s
        elif name == "steptime-compiled":
            assert s["got"] in ("not present", gpu_run.NO_GPU), s
        elif name.startswith("variant-selfcheck-"):  # this torch is not the variant's: said, not run
            assert s["ok"] is None and s["got"].endswith(": not run"), s
            assert s["got"].startswith(("needs torch ", "no variant in versions.toml has cuDNN >= 9.26.0")), s
        elif name == "sdpa-nan":  # the reproducer ran on the lent machine's torch and said why not
            got = "unknown: cuDNN attention cannot run here (no CUDA GPU visible), exit 3"
            assert (s["got"], s["ok"], s["data"]["cases"]) == (got, True, []), s
        else:
            assert s["ok"] is True, s
    assert re.search(r"\d+ wheels installed", steps["install"]["got"])
    assert steps["report-1"]["got"].startswith("verdict no-gpu")
    assert "skipped" in steps["pytest-gpu"]["got"] and "passed" not in steps["pytest-gpu"]["got"]
    assert summary["total_seconds"] <= gpu_run.TOTAL_BUDGET_S
    table = (tmp_path / "out" / "summary.md").read_text()
    assert all(f"| {name} |" in table for name in gpu_steps.STEPS)
    # A CPU rehearsal is never written up as a GPU result.
    with pytest.raises(SystemExit, match="no GPU result"):
        command.render_results(summary)


@pytest.mark.slow
def test_the_rehearsal_fails_with_a_wheel_left_out(kit, machine_python, tmp_path):
    partial = tmp_path / "kit"
    partial.mkdir()
    for wheel in kit.glob("*.whl"):
        if canonicalize_name(parse_wheel_filename(wheel.name)[0]) != LEFT_OUT:
            shutil.copy(wheel, partial)
    assert len(list(partial.glob("*.whl"))) == len(list(kit.glob("*.whl"))) - 1
    proc, summary = rehearse(machine_python, partial, tmp_path / "out", "--only", "stack")
    assert proc.returncode == 1
    stack = next(s for s in summary["steps"] if s["step"] == "stack")
    assert stack["ok"] is False and f"{LEFT_OUT} missing" in stack["got"], stack


# --- results -----------------------------------------------------------------------------------


def _gpu_summary() -> dict:
    """A summary.json as a GPU run writes it (made up here, to test the rendering only)."""
    step = {"step": "selfcheck-0", "expected": "FAIL", "got": "FAIL: new/seen 9.1x", "ok": True}
    return {
        "date": "2030-01-01",
        "total_seconds": 301.2,
        "budget_seconds": gpu_run.TOTAL_BUDGET_S,
        "python": "3.12.3",
        "gpu": {"name": "Test GPU", "sm": [9, 0], "index": 0, "memory_bytes": 1, "driver": "580.1"},
        "facts": {"torch_version": "2.99.0+cu199", "torch_cuda": "19.9", "cudnn_version": 99901}
        | {"driver_version": "580.1", "transformers_version": "5.99.0", "funasr_version": "1.4.99"},
        "steps": [step | {"seconds": 12.5, "data": {}}],
    }


def test_results_render_the_environment_and_each_step(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps(_gpu_summary()))
    doc = tmp_path / "gpu-results.md"
    doc.write_text("# GPU results\n\nintro\n\n## Results\n\nNone yet.\n\n## After\n\nkept\n")
    assert imagetools_main(["gpukit", "results", str(out), "--write", str(doc)]) == 0
    text = doc.read_text()
    assert "None yet" not in text and text.startswith("# GPU results\n\nintro\n")
    assert "Test GPU (sm_90), driver 580.1, torch 2.99.0+cu199 (CUDA 19.9), cuDNN 9.99.1" in text
    assert "| selfcheck-0 | FAIL | FAIL: new/seen 9.1x | 12.5 | as expected |" in text
    assert text.endswith("## After\n\nkept\n")
    # A later run (a partial one, --only) goes on top; the earlier run stays.
    (out / "summary.json").write_text(json.dumps(_gpu_summary() | {"date": "2099-01-02"}))
    assert imagetools_main(["gpukit", "results", str(out), "--write", str(doc)]) == 0
    again = doc.read_text()
    assert again.count("Test GPU (sm_90), driver 580.1") == 2 and again.endswith("## After\n\nkept\n")
    assert again.index("### 2099-01-02") < again.index(text.split("### ", 1)[1][:10])


def test_a_gpu_the_driver_lists_but_the_report_misses_fails_the_environment(tmp_path, monkeypatch):
    """The kit's first GPU run read no GPU (the report's --no-gpu-probe skipped listing them) and so
    skipped every GPU step while reporting all as expected: nvidia-smi's list is the cross-check."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text('#!/bin/sh\n[ "$1" = -L ] && echo "GPU 0: NVIDIA H200 (UUID: GPU-0)"\nexit 0\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env = child_env()
    ctx = gpu_run.Context(tmp_path, tmp_path / "steps.log", env, deadline=time.monotonic() + 120)
    r = gpu_setup.step_environment(ctx)  # this machine: torch sees no GPU
    assert not r.ok and "nvidia-smi lists 1" in r.got
    smi.write_text("#!/bin/sh\nexit 0\n")  # the driver lists none: no GPU is the right answer
    assert gpu_setup.step_environment(ctx).ok
