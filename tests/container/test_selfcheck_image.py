"""The image's default run (report, then the self-check) and the self-check inside the image, on
the CPU here: PASS as built, FAIL with an injected per-shape attention stall, for the in-process
check and for the recipe path (torchrun + funasr-train-ds), as the default and as an arbitrary UID;
the compiled mode (Inductor's C++ backend with the image's compilers) PASSes, and `ftenv buildcheck`
fails once the compilers are removed."""

import json
import re
import subprocess

import pytest

STALL = ["--inject-stall", "0.5"]


def test_default_run_prints_the_report_and_a_passing_selfcheck(run):
    """The image's CMD as the default user, offline: the report, then the self-check's PASS (the
    JSON test below runs the same check as another user)."""
    r = run(extra=["--network=none"])  # the image's CMD
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr.count("== ftenv report:") == 1
    assert "== ftenv selfcheck (in-process): Fun-ASR-Nano fine-tune steps on cpu ==" in r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("PASS")
    assert re.search(r"^stack .*, TORCH_CUDNN_SDPA_DEPRIORITIZED=1$", r.stdout, re.M), r.stdout


def test_the_tiny_model_is_in_the_image_and_readable_by_any_uid(run):
    r = run(
        "python3",
        "-c",
        "from ftenv.selfcheck import tinymodel; print(tinymodel.is_built('/opt/ftenv/tiny'))",
        user="12345:0",
        env={"FTENV_REPORT": "0"},
    )
    assert (r.returncode, r.stdout.strip()) == (0, "True"), r.stderr


def test_selfcheck_json_passes_offline_as_an_arbitrary_uid(run):
    r = run(
        "ftenv",
        "selfcheck",
        "--json",
        user="12345:0",
        env={"FTENV_REPORT": "0"},
        extra=["--network=none"],
    )
    result = json.loads(r.stdout)
    assert (r.returncode, result["verdict"]) == (0, "PASS"), result.get("summary", result)
    assert result["tiny_dir"] == "/opt/ftenv/tiny"


def test_selfcheck_fails_with_an_injected_stall(run):
    r = run("ftenv", "selfcheck", "--json", *STALL, env={"FTENV_REPORT": "0"})
    result = json.loads(r.stdout)
    assert (r.returncode, result["verdict"]) == (1, "FAIL")
    assert "TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in result["summary"]["fix"]


@pytest.mark.parametrize("stall", [False, True], ids=["as-built", "injected-stall"])
def test_recipe_path_in_the_image(run, stall):
    r = run(
        "ftenv",
        "selfcheck",
        "--recipe",
        "--json",
        *(STALL if stall else []),
        env={"FTENV_REPORT": "0"},
        extra=["--network=none"],
        user="12345:0",
    )
    result = json.loads(r.stdout)
    expected = (1, "FAIL") if stall else (0, "PASS")
    assert (r.returncode, result["verdict"]) == expected, result.get("summary", result)
    assert any(part.endswith("torchrun") for part in result["command"][:1])


def test_selfcheck_compile_passes_in_the_image(compiled_selfcheck):
    """Compiles on the CPU with the image's g++ and Python headers, as an arbitrary UID, offline
    (conftest.py's run, on a read-only root: test_read_only_root.py reads where it wrote)."""
    r, _ = compiled_selfcheck
    result = json.loads(r.stdout)
    c = result["compile"]
    assert (r.returncode, result["verdict"]) == (0, "PASS"), result.get("summary", result)
    assert c["new_shapes"] >= 8 and c["recompiles"] <= 2
    assert c["loss_max_rel_diff"] <= c["loss_rtol"]


def test_buildcheck_fails_without_the_compilers(image, run):
    """The build's check passed as built and fails once g++/gcc are gone (root, in a throwaway run).
    "As built" is the build's own run of it, read from the image's history: a build stops at a RUN
    that fails, so an image whose history holds that RUN passed it (running it again here took
    as long as the failing run)."""
    history = subprocess.run(
        ["podman", "history", "--no-trunc", "--format", "{{.CreatedBy}}", image],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert re.search(r" -c ftenv buildcheck\b", history), history[-2000:]
    script = (
        "rm -f /usr/bin/g++* /usr/bin/*-g++* /usr/bin/gcc* /usr/bin/*-gcc* /usr/bin/cc /usr/bin/c++; "
        "ftenv buildcheck"
    )
    r = run("-c", script, entrypoint="bash", user="0", env={"FTENV_REPORT": "0"}, extra=["--network=none"])
    assert r.returncode == 1, r.stderr[-2000:]
    assert "No working C++ compiler" in r.stderr
    assert "no C compiler (CC, gcc or clang) for Triton's launcher" in r.stderr
