"""The torchrun arguments `ftenv finetune` derives from each scheduler's environment."""

from __future__ import annotations

import pytest

from ftenv.train import cluster_env
from ftenv.train.cluster_env import LaunchError, apply_overrides, detect, first_host


def args_for(env: dict, nproc: int = 8, **overrides) -> list[str]:
    return apply_overrides(detect(env), **overrides).torchrun_args(nproc)


def test_single_node_is_upstreams_default():
    assert args_for({}) == [
        "--nnodes", "1", "--nproc_per_node", "8", "--node_rank", "0",
        "--master_addr", "127.0.0.1", "--master_port", "26669",
    ]  # fmt: skip
    assert detect({}).source == "single node"


def test_single_node_honours_master_port():
    assert args_for({"MASTER_PORT": "30000"})[-1] == "30000"


SLURM_STEP = {
    "SLURM_JOB_ID": "4242",
    "SLURM_STEP_ID": "0",
    "SLURM_JOB_NUM_NODES": "4",
    "SLURM_STEP_NUM_NODES": "4",
    "SLURM_NODEID": "2",
    "SLURM_JOB_NODELIST": "gpu-a[07-09],gpu-b3",
    "SLURM_STEP_NODELIST": "gpu-a[07-09],gpu-b3",
    "SLURM_STEP_TASKS_PER_NODE": "1(x4)",
}


def test_slurm_multi_node_uses_nodeid_and_first_host():
    launch = detect(SLURM_STEP)
    assert launch.source == "slurm"
    assert launch.torchrun_args(8) == [
        "--nnodes", "4", "--nproc_per_node", "8", "--node_rank", "2",
        "--master_addr", "gpu-a07", "--master_port", "24242",
    ]  # fmt: skip


def test_slurm_port_comes_from_the_job_id_unless_master_port_is_set():
    # Two jobs sharing a node get different ports; every node of one job the same one.
    assert detect({**SLURM_STEP, "SLURM_JOB_ID": "1234567"}).master_port == 20000 + 1234567 % 10000
    assert detect({**SLURM_STEP, "SLURM_NODEID": "0"}).master_port == detect(SLURM_STEP).master_port
    assert detect({**SLURM_STEP, "MASTER_PORT": "29500"}).master_port == 29500


def test_slurm_ignores_a_leaked_master_addr_but_says_so():
    launch = detect({**SLURM_STEP, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29555"})
    assert launch.master_addr == "gpu-a07"
    assert launch.master_port == 29555
    assert any("MASTER_ADDR=127.0.0.1" in note for note in launch.notes)


def test_slurm_pyxis_hook_variables_do_not_change_the_slurm_answer():
    # enroot's PyTorch hook sets these per task; with one task per node they agree with Slurm's.
    hook = {"MASTER_ADDR": "gpu-a07", "WORLD_SIZE": "4", "RANK": "2", "LOCAL_RANK": "0"}
    assert detect({**SLURM_STEP, **hook}).torchrun_args(8) == detect(SLURM_STEP).torchrun_args(8)


def test_slurm_multi_node_batch_script_is_refused():
    env = {k: v for k, v in SLURM_STEP.items() if not k.startswith("SLURM_STEP")}
    env["SLURM_NODEID"] = "0"
    with pytest.raises(LaunchError, match=r"4 nodes .*`srun --ntasks-per-node=1"):
        detect(env)


def test_slurm_single_node_batch_script_is_fine():
    env = {"SLURM_JOB_ID": "7", "SLURM_NODEID": "0", "SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_NODELIST": "n1"}
    assert args_for(env, 2) == [
        "--nnodes", "1", "--nproc_per_node", "2", "--node_rank", "0",
        "--master_addr", "127.0.0.1", "--master_port", "20007",
    ]  # fmt: skip


def test_slurm_several_tasks_per_node_are_refused():
    with pytest.raises(LaunchError, match="one task per node"):
        detect({**SLURM_STEP, "SLURM_STEP_TASKS_PER_NODE": "8(x4)"})


@pytest.mark.parametrize(
    ("nodelist", "first"),
    [
        ("node1", "node1"),
        ("node1,node2", "node1"),
        ("gpu-a[07-09,12],gpu-b3", "gpu-a07"),
        ("gpu[3,5-6]", "gpu3"),
        ("rack[2-3]-n[01-04]", "rack2-n01"),
        ("n[1-2]-ib", "n1-ib"),
        ("a,b[1-2]", "a"),
    ],
)
def test_first_host(nodelist, first):
    assert first_host(nodelist) == first


@pytest.mark.parametrize("bad", ["", "gpu[", "gpu]1"])
def test_first_host_refuses_what_it_cannot_read(bad):
    with pytest.raises(LaunchError):
        first_host(bad)


def test_pytorchjob_master_and_worker_old_operator():
    base = {"MASTER_ADDR": "ft-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "3"}
    master = detect({**base, "RANK": "0"})
    worker = detect({**base, "RANK": "2"})
    assert master.source == worker.source == "kubeflow"
    assert master.torchrun_args(8) == [
        "--nnodes", "3", "--nproc_per_node", "8", "--node_rank", "0",
        "--master_addr", "ft-master-0", "--master_port", "23456",
    ]  # fmt: skip
    assert worker.torchrun_args(8)[4:6] == ["--node_rank", "2"]


def test_pytorchjob_new_operator_pet_variables():
    # training-operator >= 1.7 with nprocPerNode: "8": WORLD_SIZE counts processes, PET_NNODES pods.
    env = {
        "MASTER_ADDR": "ft-master-0",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "24",
        "RANK": "1",
        "PET_MASTER_ADDR": "ft-master-0",
        "PET_MASTER_PORT": "23456",
        "PET_NNODES": "3",
        "PET_NODE_RANK": "1",
        "PET_NPROC_PER_NODE": "8",
    }
    launch = detect(env)
    assert launch.source == "kubeflow"
    assert launch.nproc_per_node == 8
    assert launch.torchrun_args(8) == [
        "--nnodes", "3", "--nproc_per_node", "8", "--node_rank", "1",
        "--master_addr", "ft-master-0", "--master_port", "23456",
    ]  # fmt: skip


def test_rank_not_below_world_size_is_explained():
    with pytest.raises(LaunchError, match="WORLD_SIZE must count nodes"):
        detect({"MASTER_ADDR": "m", "WORLD_SIZE": "2", "RANK": "5"})


def test_torchrun_static_variables():
    env = {"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "10.0.0.5", "PET_MASTER_PORT": "29500"}
    launch = detect(env)
    assert launch.source == "torchrun variables"
    assert launch.torchrun_args(4) == [
        "--nnodes", "2", "--nproc_per_node", "4", "--node_rank", "1",
        "--master_addr", "10.0.0.5", "--master_port", "29500",
    ]  # fmt: skip


def test_torchrun_elastic_rendezvous():
    env = {"PET_NNODES": "1:4", "PET_RDZV_ENDPOINT": "ft-worker-0:29400", "PET_RDZV_ID": "job7"}
    assert args_for(env, 8) == [
        "--nnodes", "1:4", "--nproc_per_node", "8",
        "--rdzv_backend", "c10d", "--rdzv_endpoint", "ft-worker-0:29400", "--rdzv_id", "job7",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PET_NNODES": "1:4"}, "needs PET_RDZV_ENDPOINT"),
        ({"PET_NNODES": "two"}, "neither N nor MIN:MAX"),
        ({"PET_NNODES": "2", "PET_NODE_RANK": "1"}, "neither PET_MASTER_ADDR nor MASTER_ADDR"),
        ({"PET_NNODES": "2", "PET_MASTER_ADDR": "m"}, "neither PET_NODE_RANK nor RANK"),
        ({"MASTER_ADDR": "m", "WORLD_SIZE": "x", "RANK": "0"}, "WORLD_SIZE='x' is not an integer"),
        ({"MASTER_PORT": "99999"}, "not a port number"),
        ({"TORCHELASTIC_RUN_ID": "r", "LOCAL_RANK": "0"}, "already a process started by torchrun"),
    ],
)
def test_bad_environments_are_explained(env, message):
    with pytest.raises(LaunchError, match=message):
        detect(env)


def test_command_line_overrides_win():
    launch = apply_overrides(detect(SLURM_STEP), master_addr="10.1.1.1", master_port=31000, node_rank=0)
    assert launch.torchrun_args(1)[4:] == [
        "--node_rank",
        "0",
        "--master_addr",
        "10.1.1.1",
        "--master_port",
        "31000",
    ]
    with pytest.raises(LaunchError, match="not below the number of nodes"):
        apply_overrides(detect({}), node_rank=1)


def test_defaults_are_upstreams():
    assert (cluster_env.DEFAULT_MASTER_ADDR, cluster_env.DEFAULT_MASTER_PORT) == ("127.0.0.1", 26669)


def test_elastic_launch_is_described_without_a_node_number():
    env = {"PET_NNODES": "2:4", "PET_RDZV_ENDPOINT": "ft-worker-0:29400"}
    text = apply_overrides(detect(env)).describe()
    assert "None" not in text, text
    assert text == (
        "torchrun variables: 2:4 nodes, node rank assigned at the rendezvous, rendezvous ft-worker-0:29400"
    )


def test_pet_nproc_per_node_zero_is_refused():
    with pytest.raises(LaunchError, match="PET_NPROC_PER_NODE=0 must be >= 1"):
        detect({"PET_NNODES": "1", "PET_NPROC_PER_NODE": "0"})


# enroot's PyTorch hook (conf/hooks/extra/50-slurm-pytorch.sh) in every task of a pyxis job
def _enroot_hook(job_id: int, procid: int) -> dict:
    return {
        "MASTER_ADDR": "gpu-a07",
        "MASTER_PORT": str(61000 + job_id % 4536),
        "WORLD_SIZE": "4",
        "RANK": str(procid),
        "LOCAL_RANK": "0",
    }


def test_enroot_pytorch_hook_port_is_used_and_the_same_on_every_node():
    job = int(SLURM_STEP["SLURM_JOB_ID"])
    launches = [detect({**SLURM_STEP, "SLURM_NODEID": str(n), **_enroot_hook(job, n)}) for n in range(4)]
    assert {launch.master_port for launch in launches} == {61000 + job % 4536}
    assert {launch.master_addr for launch in launches} == {"gpu-a07"}
    assert [launch.node_rank for launch in launches] == [0, 1, 2, 3]
    assert any("enroot's PyTorch hook" in note for note in launches[0].notes)
    # A port the job sets itself is not taken for the hook's.
    own = detect({**SLURM_STEP, "MASTER_PORT": "29555"})
    assert own.master_port == 29555 and not any("hook" in note for note in own.notes)
