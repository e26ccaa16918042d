"""The torchrun arguments `ftenv finetune` derives from each scheduler's environment."""

from __future__ import annotations

import pytest

from ftenv.launch import cluster_env
from ftenv.launch.cluster_env import LaunchError, apply_overrides, detect, first_host


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
    # Two jobs sharing a node get different ports, below Linux's ephemeral range (32768-) and apart
    # from torchrun's own default (29500 is another job's); every node of one job the same one.
    ports = [detect({**SLURM_STEP, "SLURM_JOB_ID": str(job)}).master_port for job in range(1234560, 1234580)]
    assert len(set(ports)) == len(ports) and all(1024 <= p < 32768 for p in ports)
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
    # FunASR's finetune.sh: --master_addr ${MASTER_ADDR:-127.0.0.1} --master_port ${MASTER_PORT:-26669}
    assert (cluster_env.DEFAULT_MASTER_ADDR, cluster_env.DEFAULT_MASTER_PORT) == ("127.0.0.1", 26669)


# --- each branch of the detection, and what each error names ------------------------------------

ONE_NODE_STEP = {
    "SLURM_JOB_ID": "7",
    "SLURM_STEP_ID": "0",
    "SLURM_NODEID": "0",
    "SLURM_JOB_NUM_NODES": "1",
    "SLURM_JOB_NODELIST": "n1",
}


@pytest.mark.parametrize("step_id", ["batch", "extern"])
def test_slurm_batch_and_extern_steps_are_not_job_steps(step_id):
    with pytest.raises(LaunchError, match=r"4 nodes .*`srun --ntasks-per-node=1 \.\.\.`.*every node"):
        detect({**SLURM_STEP, "SLURM_STEP_ID": step_id})


def test_slurm_a_step_on_part_of_the_job_counts_the_steps_nodes():
    env = {
        **SLURM_STEP,
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_NODEID": "1",
        "SLURM_STEP_NODELIST": "gpu-a[08-09]",
    }
    launch = detect(env)
    assert (launch.nnodes, launch.node_rank, launch.master_addr) == ("2", 1, "gpu-a08")


def test_slurm_outside_a_step_the_steps_node_count_is_not_read():
    env = {**ONE_NODE_STEP, "SLURM_STEP_NUM_NODES": "2"}
    del env["SLURM_STEP_ID"]
    assert detect(env).nnodes == "1"


def test_slurm_node_count_and_node_list_fall_back_to_the_older_names():
    env = {k: v for k, v in SLURM_STEP.items() if k not in ("SLURM_JOB_NUM_NODES", "SLURM_STEP_NUM_NODES")}
    env = {k: v for k, v in env.items() if not k.endswith("NODELIST")}
    launch = detect({**env, "SLURM_NNODES": "4", "SLURM_NODELIST": "x[3-4],y1,z2"})
    assert (launch.nnodes, launch.node_rank, launch.master_addr) == ("4", 2, "x3")


def test_slurm_without_a_node_count_is_one_node():
    env = {k: v for k, v in ONE_NODE_STEP.items() if k != "SLURM_JOB_NUM_NODES"}
    assert detect(env).nnodes == "1"
    del env["SLURM_STEP_ID"]
    assert detect(env).nnodes == "1"


def test_slurm_two_node_batch_script_is_refused_and_zero_nodes_is_bad_input():
    with pytest.raises(LaunchError, match="this Slurm job has 2 nodes"):
        detect({**ONE_NODE_STEP, "SLURM_STEP_ID": "batch", "SLURM_JOB_NUM_NODES": "2"})
    with pytest.raises(LaunchError, match="SLURM_JOB_NUM_NODES=0 must be >= 1"):
        detect({**ONE_NODE_STEP, "SLURM_JOB_NUM_NODES": "0"})


def test_slurm_two_nodes_use_the_first_host_and_the_node_id():
    env = {**ONE_NODE_STEP, "SLURM_JOB_NUM_NODES": "2", "SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "n[4-5]"}
    env["MASTER_ADDR"] = "10.9.9.9"  # leaked from the submitting shell
    launch = detect(env)
    assert (launch.nnodes, launch.node_rank, launch.master_addr) == ("2", 1, "n4")
    assert [n for n in launch.notes if "MASTER_ADDR=10.9.9.9" in n and "SLURM_JOB_NODELIST" in n]


def test_slurm_one_node_uses_loopback_and_says_nothing_of_a_leaked_master_addr():
    launch = detect({**ONE_NODE_STEP, "MASTER_ADDR": "10.9.9.9"})
    assert (launch.master_addr, launch.notes) == ("127.0.0.1", [])


def test_slurm_tasks_per_node():
    assert cluster_env._tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert cluster_env._tasks_per_node("1") == [1]
    assert cluster_env._tasks_per_node("1,oops") == []
    with pytest.raises(LaunchError, match=r"SLURM_STEP_TASKS_PER_NODE=1,2\(x3\): run one task per node"):
        detect({**SLURM_STEP, "SLURM_STEP_TASKS_PER_NODE": "1,2(x3)"})
    with pytest.raises(LaunchError, match="one process per GPU itself"):
        detect({**SLURM_STEP, "SLURM_STEP_TASKS_PER_NODE": "2"})
    # Outside a step (the batch script of a one-node job) the step's task count is not read.
    env = {**ONE_NODE_STEP, "SLURM_STEP_TASKS_PER_NODE": "2"}
    del env["SLURM_STEP_ID"]
    assert detect(env).nnodes == "1"


def test_slurm_without_a_node_list_says_so():
    env = {k: v for k, v in ONE_NODE_STEP.items() if k != "SLURM_JOB_NODELIST"}
    with pytest.raises(LaunchError, match="Slurm job without SLURM_JOB_NODELIST: cannot tell the master"):
        detect(env)


def test_slurm_job_id_that_is_not_a_number_gets_the_default_port():
    assert detect({**ONE_NODE_STEP, "SLURM_JOB_ID": "abc"}).master_port == cluster_env.DEFAULT_MASTER_PORT


@pytest.mark.parametrize(
    "env",
    [{}, ONE_NODE_STEP, {"MASTER_ADDR": "m", "WORLD_SIZE": "1", "RANK": "0"}, {"PET_NNODES": "1"}],
    ids=["single", "slurm", "kubeflow", "torchrun"],
)
def test_master_port_bounds_and_the_variable_named(env):
    assert detect({**env, "MASTER_PORT": "1"}).master_port == 1
    assert detect({**env, "MASTER_PORT": "65535"}).master_port == 65535
    for bad in ("0", "65536"):
        with pytest.raises(LaunchError, match=rf"^MASTER_PORT={bad} is not a port number \(1-65535\)"):
            detect({**env, "MASTER_PORT": bad})
    with pytest.raises(LaunchError, match=r"^MASTER_PORT='x' is not a port number"):
        detect({**env, "MASTER_PORT": "x"})


def test_torchrun_pet_master_port_is_named_when_it_is_wrong():
    with pytest.raises(LaunchError, match=r"^PET_MASTER_PORT='x'"):
        detect({"PET_NNODES": "1", "PET_MASTER_PORT": "x", "MASTER_PORT": "29500"})


def test_torchrun_variables_fall_back_to_rank_master_addr_and_master_port():
    launch = detect({"PET_NNODES": "2", "RANK": "1", "MASTER_ADDR": "m0", "MASTER_PORT": "29501"})
    assert launch.source == "kubeflow"
    assert launch.torchrun_args(8)[4:] == [
        "--node_rank",
        "1",
        "--master_addr",
        "m0",
        "--master_port",
        "29501",
    ]
    assert detect({"PET_NNODES": "1", "RANK": "0"}).source == "torchrun variables"


def test_torchrun_one_node_needs_no_master_nor_rank():
    launch = detect({"PET_NNODES": "1"})
    assert (launch.node_rank, launch.master_addr, launch.master_port) == (0, "127.0.0.1", 26669)


def test_torchrun_rendezvous_with_backend_and_node_rank():
    env = {
        "PET_NNODES": "2",
        "PET_RDZV_ENDPOINT": "h:29400",
        "PET_RDZV_BACKEND": "etcd-v2",
        "PET_NODE_RANK": "1",
    }
    launch = detect(env)
    assert launch.torchrun_args(8) == [
        "--nnodes", "2", "--nproc_per_node", "8",
        "--rdzv_backend", "etcd-v2", "--rdzv_endpoint", "h:29400", "--node_rank", "1",
    ]  # fmt: skip
    assert launch.describe() == "torchrun variables: node 1 of 2, rendezvous h:29400"


def test_single_node_is_described_with_its_master():
    assert detect({}).describe() == "single node: node 0 of 1, master 127.0.0.1:26669"


@pytest.mark.parametrize("env", [{"SLURM_NODEID": "0"}, {"RANK": "0"}, {"MASTER_ADDR": "m", "RANK": "0"}])
def test_partial_scheduler_variables_are_one_node(env):
    assert detect(env).source == "single node"


def test_world_size_one_is_a_one_node_pytorchjob():
    assert detect({"MASTER_ADDR": "m", "WORLD_SIZE": "1", "RANK": "0"}).torchrun_args(8)[:2] == [
        "--nnodes",
        "1",
    ]
    with pytest.raises(LaunchError, match="WORLD_SIZE=0 must be >= 1"):
        detect({"MASTER_ADDR": "m", "WORLD_SIZE": "0", "RANK": "0"})
    with pytest.raises(LaunchError, match=r"RANK=2 is not below WORLD_SIZE=2: .*Kubeflow PyTorchJob"):
        detect({"MASTER_ADDR": "m", "WORLD_SIZE": "2", "RANK": "2"})


def test_torchrun_inside_torchrun_names_the_variables_and_the_fix():
    with pytest.raises(LaunchError, match=r"TORCHELASTIC_RUN_ID and LOCAL_RANK are set.*run it directly"):
        detect({"TORCHELASTIC_RUN_ID": "r", "LOCAL_RANK": "0"})


def test_overriding_the_master_leaves_a_rendezvous_for_a_master_port():
    launch = detect({"PET_NNODES": "2", "PET_RDZV_ENDPOINT": "h:29400", "PET_NODE_RANK": "1"})
    launch = apply_overrides(launch, nnodes=3, master_addr="10.0.0.1")
    assert launch.describe() == "torchrun variables: node 1 of 3, master 10.0.0.1:26669"


def test_first_host_names_what_it_cannot_read():
    with pytest.raises(LaunchError, match="the Slurm node list is empty"):
        first_host(" ")
    with pytest.raises(LaunchError, match=r"cannot read the first host of the Slurm node list 'gpu\['"):
        first_host("gpu[")


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
