"""`ftenv finetune`'s faster-training options, as the launcher works them out (no training here):
what each flag puts in the trainer's environment and overrides, and the errors that name the fix."""

from __future__ import annotations

import pytest

from ftenv import variables
from ftenv.launch import compile_cache
from ftenv.launch.inputs import InputError
from ftenv.trainer import compile_setting
from support.finetune_launch import argv_of, overrides_of, work_out

ENTRY = "ftenv.trainer.funasr_entry"


def test_compile_turns_on_the_default_parts_and_the_caches_under_the_output_dir(work):
    p = work_out(work, "--gpus-per-node", "1", "--compile")
    assert p.env[variables.COMPILE] == "1"
    default = ("regional", "audio", "nosync", "lmhead")
    assert compile_setting.compile_parts(p.env) == compile_setting.DEFAULT_PARTS == default
    for var in compile_cache.COMPILER_CACHE_VARS:
        assert p.env[var].startswith(str(work / "out" / compile_cache.CACHE_DIRNAME))
    assert ENTRY in " ".join(argv_of(p))
    assert any("a re-run starts warm" in n for n in p.notes)


def test_each_lever_has_its_own_flag(work):
    p = work_out(
        work, "--gpus-per-node", "1", "--compile-parts", "regional,audio", "--buckets", "64", "--fused-adamw"
    )
    assert compile_setting.compile_parts(p.env) == ("regional", "audio")
    assert p.env[variables.BUCKETS] == "64"
    assert "++optim_conf.fused=true" in overrides_of(p)
    # A user's own override still wins over the flag's.
    mine = work_out(work, "--gpus-per-node", "1", "--fused-adamw", "++optim_conf.fused=false")
    assert "++optim_conf.fused=false" in overrides_of(mine) and "++optim_conf.fused=true" not in overrides_of(
        mine
    )
    # Buckets alone need the entry too (it pads the trainer's batches), but no compile caches.
    b = work_out(work, "--gpus-per-node", "1", "--buckets", "64")
    assert (
        ENTRY in " ".join(argv_of(b)) and variables.COMPILE not in b.env and "TRITON_CACHE_DIR" not in b.env
    )


def test_cuda_graphs_go_with_no_gradient_accumulation(work):
    flags = ["--gpus-per-node", "1", "--compile-parts", "regional,cudagraphs", "--buckets", "64"]
    assert compile_setting.compile_parts(work_out(work, *flags).env) == ("regional", "cudagraphs")
    one = work_out(work, *flags, "++train_conf.accum_grad=1")
    assert "++train_conf.accum_grad=1" in overrides_of(one)
    # Accumulation without graphs is the user's choice, as before.
    four = work_out(work, "--gpus-per-node", "1", "--compile-parts", "regional", "++train_conf.accum_grad=4")
    assert "++train_conf.accum_grad=4" in overrides_of(four)
    assert compile_setting.compile_parts(four.env) == ("regional",)


def test_cuda_graphs_see_the_accumulation_the_trainer_gets_the_last_value(work):
    """Hydra keeps a key's last value: `accum_grad=1 ... accum_grad=4` accumulates 4, so CUDA graphs
    are refused; `4 ... 1` accumulates nothing, and they run."""
    flags = ["--gpus-per-node", "1", "--compile-parts", "regional,cudagraphs", "--buckets", "64"]
    refused = r"CUDA graphs with gradient accumulation \(train_conf.accum_grad=4\)"
    with pytest.raises(InputError, match=refused):
        work_out(work, *flags, "++train_conf.accum_grad=1", "++train_conf.accum_grad=4")
    last_one = work_out(work, *flags, "++train_conf.accum_grad=4", "++train_conf.accum_grad=1")
    assert str(last_one.settings[compile_setting.ACCUM_GRAD]) == "1"


def test_off_by_default(work):
    p = work_out(work, "--gpus-per-node", "1")
    assert ENTRY in " ".join(argv_of(p))  # always (the run's life), but with nothing of the fast path on
    assert not {variables.COMPILE, variables.BUCKETS, "TORCHINDUCTOR_CACHE_DIR"} & set(p.env)
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
def test_bad_values_are_errors_that_name_the_fix(work, flags, message):
    with pytest.raises(InputError, match=message):
        work_out(work, "--gpus-per-node", "1", *flags)


def test_the_report_line_names_the_parts_and_the_buckets():
    line = compile_setting.report_line({variables.COMPILE: "regional,audio", variables.BUCKETS: "64"})
    assert line.startswith("compile on: regional, audio (GPU batches of 2+)") and "FTENV_BUCKETS=64" in line
