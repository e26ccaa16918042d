"""`ftenv finetune`'s faster-training options, as the launcher plans them (no training here):
what each flag puts in the trainer's environment and overrides, and the errors that name the fix."""

from __future__ import annotations

import pytest
from test_finetune import overrides_of, plan, work  # noqa: F401  (work: the launcher's fixture)

from ftenv.report import compile_setting
from ftenv.train import compile_cache
from ftenv.train.inputs import InputError

ENTRY = "ftenv.train.funasr_entry"


def test_compile_turns_on_the_default_parts_and_the_caches_under_the_output_dir(work):  # noqa: F811
    p = plan(work, "--gpus-per-node", "1", "--compile")
    assert p.env[compile_setting.ENV] == "1"
    default = ("regional", "audio", "nosync", "lmhead")
    assert compile_setting.compile_parts(p.env) == compile_setting.DEFAULT_PARTS == default
    for var in compile_cache.COMPILER_CACHE_VARS:
        assert p.env[var].startswith(str(work / "out" / compile_cache.CACHE_DIRNAME))
    assert ENTRY in " ".join(p.argv)
    assert any("a re-run starts warm" in n for n in p.notes)


def test_each_lever_has_its_own_flag(work):  # noqa: F811
    p = plan(
        work, "--gpus-per-node", "1", "--compile-parts", "regional,audio", "--buckets", "64", "--fused-adamw"
    )
    assert compile_setting.compile_parts(p.env) == ("regional", "audio")
    assert p.env[compile_setting.BUCKETS_ENV] == "64"
    assert "++optim_conf.fused=true" in overrides_of(p)
    # A user's own override still wins over the flag's.
    mine = plan(work, "--gpus-per-node", "1", "--fused-adamw", "++optim_conf.fused=false")
    assert "++optim_conf.fused=false" in overrides_of(mine) and "++optim_conf.fused=true" not in overrides_of(
        mine
    )
    # Buckets alone need the entry too (it pads the trainer's batches), but no compile caches.
    b = plan(work, "--gpus-per-node", "1", "--buckets", "64")
    assert ENTRY in " ".join(b.argv) and compile_setting.ENV not in b.env and "TRITON_CACHE_DIR" not in b.env


def test_cuda_graphs_are_planned_without_gradient_accumulation(work):  # noqa: F811
    flags = ["--gpus-per-node", "1", "--compile-parts", "regional,cudagraphs", "--buckets", "64"]
    assert compile_setting.compile_parts(plan(work, *flags).env) == ("regional", "cudagraphs")
    one = plan(work, *flags, "++train_conf.accum_grad=1")
    assert "++train_conf.accum_grad=1" in overrides_of(one)
    # Accumulation without graphs is the user's choice, as before.
    assert plan(work, "--gpus-per-node", "1", "--compile-parts", "regional", "++train_conf.accum_grad=4")


def test_off_by_default(work):  # noqa: F811
    p = plan(work, "--gpus-per-node", "1")
    assert ENTRY in " ".join(p.argv)  # always (the run's life), but with nothing of the fast path on
    assert not {compile_setting.ENV, compile_setting.BUCKETS_ENV, "TORCHINDUCTOR_CACHE_DIR"} & set(p.env)
    assert "++optim_conf.fused=true" not in overrides_of(p)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--compile-parts", "decoder,turbo"], r"a comma-separated list of parts: decoder, regional, audio"),
        (["--compile-parts", "decoder,regional"], r"exclude each other: choose one"),
        (["--compile-parts", "regional,cudagraphs"], r"CUDA graphs need few shapes: set FTENV_BUCKETS"),
        (["--buckets", "sixty"], r"LENGTHS\[:BATCHES\]"),
        (
            ["--compile-parts", "regional,cudagraphs", "--buckets", "64", "++train_conf.accum_grad=2"],
            r"CUDA graphs with gradient accumulation \(train_conf.accum_grad=2\).*"
            r"set \+\+train_conf.accum_grad=1",
        ),
    ],
)
def test_bad_values_are_errors_that_name_the_fix(work, flags, message):  # noqa: F811
    with pytest.raises(InputError, match=message):
        plan(work, "--gpus-per-node", "1", *flags)


def test_the_report_line_names_the_parts_and_the_buckets():
    line = compile_setting.report_line(
        {compile_setting.ENV: "regional,audio", compile_setting.BUCKETS_ENV: "64"}
    )
    assert line.startswith("compile on: regional, audio (GPU batches of 2+)") and "FTENV_BUCKETS=64" in line
