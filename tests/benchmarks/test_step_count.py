"""The matrix's floor (benchmarks/compile_speedup.py) and benchmarks/dispatch_proxy.py count a step's
ATen ops and host syncs by one definition (benchmarks.matrix.stepcount; docs/benchmarks.md, "what a
step's syncs and ops are"): on the tiny model on the CPU, over the same batches, the floor's counts
of eager and of best-guess are the proxy's, number for number."""

from __future__ import annotations

import copy
from argparse import Namespace

import pytest

from benchmarks import dispatch_proxy
from benchmarks.matrix import arms, model, runners
from ftenv.selfcheck import tinymodel

#: What both report a step to be: forward and backward apart from the update, and the batches.
COUNTS = (
    "ops_per_step",
    "non_view_ops_per_step",
    "host_syncs_per_step",
    "sync_ops",
    "optimizer_ops_per_step",
    "optimizer_syncs_per_step",
    "regions_per_step",
    "rows",
)


@pytest.fixture(scope="module")
def trained(tiny, tmp_path_factory):
    """The tiny model, its first weights and the floor's batches (a warm-up step and its counted ones)."""
    work = tmp_path_factory.mktemp("stepcount")
    paths = tinymodel.paths(tiny)
    dataset, items = model.tiny_items(paths)
    batches = model.random_batches(dataset, items, arms.PROFILE_STEPS + 1, 0, 2, 3)
    net = model.build_model(paths, work / "model", None, None, None, "fp32")
    return net, copy.deepcopy(net.state_dict()), batches, work


@pytest.mark.parametrize("name", ["eager", pytest.param("best-guess", marks=pytest.mark.slow)])
def test_the_floor_counts_a_step_as_the_dispatch_proxy_does(trained, name):
    net, initial, batches, work = trained
    of = next(a for a in arms.ARMS if a.name == name)
    args = Namespace(device="cpu", backend="eager")  # Dynamo's test backend for the profiler's pass
    floor = runners.run_profile(net, initial, arms.Arm(f"floor-{name}"), of, batches, args, work / "caches")
    proxy = dispatch_proxy.count(net, initial, name, batches)
    assert {k: floor[k] for k in COUNTS} == {k: proxy[k] for k in COUNTS}
    assert floor["ops_per_step"] > 0 and floor["optimizer_ops_per_step"] > 0
    if of.parts:  # only transformers' two mask checks stay outside best-guess's regions
        assert floor["host_syncs_per_step"] <= 2 and floor["regions_per_step"] > 0
    else:
        assert floor["host_syncs_per_step"] > 2 and floor["regions_per_step"] == 0
