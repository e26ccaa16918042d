"""The compile setting's one home (ftenv.trainer.compile_setting): the command line over the
environment, the parts and the buckets read together, and the variables the trainer gets."""

from __future__ import annotations

import pytest

from ftenv import variables
from ftenv.trainer import compile_setting

COMPILE, BUCKETS = variables.COMPILE, variables.BUCKETS


def test_the_command_line_wins_over_the_environment():
    env = {COMPILE: "0", BUCKETS: "32"}
    assert compile_setting.requested(env) == env
    assert compile_setting.requested(env, compile=True)[COMPILE] == "1"
    assert compile_setting.requested(env, compile=True, parts="regional")[COMPILE] == "regional"
    assert compile_setting.requested(env, spec="64")[BUCKETS] == "64"
    assert env == {COMPILE: "0", BUCKETS: "32"}  # the caller's environment is left as it was


def test_the_parts_and_the_buckets_are_read_together():
    parts, buckets = compile_setting.read({COMPILE: "cudagraphs,regional", BUCKETS: "64:8"})
    assert parts == ("regional", "cudagraphs") and buckets.spec() == "64:8"
    assert compile_setting.read({}) == ((), None)
    with pytest.raises(ValueError, match=r"LENGTHS\[:BATCHES\]"):
        compile_setting.read({COMPILE: "1", BUCKETS: "sixty"})


def test_the_trainer_gets_the_caches_only_with_a_part_on():
    caches = {"TRITON_CACHE_DIR": "/c/uid-1/triton"}
    on = compile_setting.trainer_env({COMPILE: "1", BUCKETS: "64", "HOME": "/h"}, caches)
    assert list(on.items()) == [(COMPILE, "1"), ("TRITON_CACHE_DIR", "/c/uid-1/triton"), (BUCKETS, "64")]
    assert compile_setting.trainer_env({COMPILE: "0", BUCKETS: "64"}, caches) == {BUCKETS: "64"}
    assert compile_setting.cache_mount({variables.COMPILE_CACHE_DIR: "/mnt/x"}) == "/mnt/x"
    assert compile_setting.cache_mount({variables.COMPILE_CACHE_DIR: ""}) is None
