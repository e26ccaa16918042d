"""Where `ftenv finetune` runs (torchrun's PET_* variables, Slurm, Kubeflow PyTorchJob, else one
node) and which torchrun arguments follow. Pure logic on a mapping, so every scheduler is tested
without it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

#: upstream finetune.sh's defaults
DEFAULT_MASTER_ADDR = "127.0.0.1"
DEFAULT_MASTER_PORT = 26669
#: Under Slurm without MASTER_PORT: SLURM_PORT_BASE + SLURM_JOB_ID % SLURM_PORT_SPAN.
SLURM_PORT_BASE, SLURM_PORT_SPAN = 20000, 10000
#: enroot's PyTorch hook (conf/hooks/extra/50-slurm-pytorch.sh): MASTER_PORT = BASE + SLURM_JOB_ID % SPAN.
ENROOT_HOOK_PORT_BASE, ENROOT_HOOK_PORT_SPAN = 61000, 4536


class LaunchError(ValueError):
    """The environment cannot be turned into a torchrun command; the message says why and what to do."""


@dataclass
class Launch:
    source: str  # "single node", "slurm", "kubeflow", "torchrun variables"
    nnodes: str  # "2", or "1:4" for an elastic torchrun job
    node_rank: int | None
    master_addr: str | None
    master_port: int | None
    nproc_per_node: int | None = None  # from the environment (PET_NPROC_PER_NODE), if it says
    rdzv_endpoint: str | None = None
    rdzv_backend: str | None = None
    rdzv_id: str | None = None
    notes: list[str] = field(default_factory=list)

    def torchrun_args(self, nproc_per_node: int) -> list[str]:
        args = ["--nnodes", self.nnodes, "--nproc_per_node", str(nproc_per_node)]
        if self.rdzv_endpoint:
            args += ["--rdzv_backend", self.rdzv_backend or "c10d", "--rdzv_endpoint", self.rdzv_endpoint]
            if self.rdzv_id:
                args += ["--rdzv_id", self.rdzv_id]
            if self.node_rank is not None:
                args += ["--node_rank", str(self.node_rank)]
            return args
        args += [
            "--node_rank",
            str(self.node_rank or 0),
            "--master_addr",
            self.master_addr or DEFAULT_MASTER_ADDR,
            "--master_port",
            str(self.master_port or DEFAULT_MASTER_PORT),
        ]
        return args

    def describe(self) -> str:
        where = (
            f"rendezvous {self.rdzv_endpoint}"
            if self.rdzv_endpoint
            else f"master {self.master_addr}:{self.master_port}"
        )
        if self.node_rank is None:  # elastic: torchrun's rendezvous hands out the node ranks
            return f"{self.source}: {self.nnodes} nodes, node rank assigned at the rendezvous, {where}"
        return f"{self.source}: node {self.node_rank} of {self.nnodes}, {where}"


def _int(env: Mapping[str, str], name: str, *, minimum: int = 0) -> int:
    raw = env.get(name) or ""
    try:
        value = int(raw)
    except ValueError:
        raise LaunchError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise LaunchError(f"{name}={value} must be >= {minimum}")
    return value


def valid_port(port: int) -> bool:
    """A TCP port torchrun can listen on or reach."""
    return 0 < port < 65536


def _port(value: str, name: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise LaunchError(f"{name}={value!r} is not a port number") from None
    if not valid_port(port):
        raise LaunchError(f"{name}={port} is not a port number (1-65535)")
    return port


_BRACKET = re.compile(r"^(?P<prefix>[^\[,]*)\[(?P<body>[^\]]+)\](?P<rest>.*)$")


def first_host(nodelist: str) -> str:
    """The first host of a Slurm host list, as `scontrol show hostnames | head -1` prints it.

    'gpu-a[07-09,12],gpu-b3' -> 'gpu-a07'; 'node1,node2' -> 'node1'; 'n[1-2]-ib' -> 'n1-ib'.
    """
    text = nodelist.strip()
    if not text:
        raise LaunchError("the Slurm node list is empty")
    # The first entry ends at the first comma outside brackets.
    depth, end = 0, len(text)
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            end = i
            break
    entry = text[:end]
    while (match := _BRACKET.match(entry)) is not None:
        first = match["body"].split(",")[0].split("-")[0]
        entry = match["prefix"] + first + match["rest"]
    if not entry or "[" in entry or "]" in entry:
        raise LaunchError(f"cannot read the first host of the Slurm node list {nodelist!r}")
    return entry


def _tasks_per_node(raw: str) -> list[int]:
    """Slurm's '2(x3),1' -> [2, 2, 2, 1]."""
    counts = []
    for part in raw.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not match:
            return []
        counts += [int(match[1])] * int(match[2] or 1)
    return counts


def _master_port(env: Mapping[str, str], default: int | None) -> int | None:
    raw = env.get("MASTER_PORT")
    return _port(raw, "MASTER_PORT") if raw else default


def _slurm(env: Mapping[str, str]) -> Launch:
    step = env.get("SLURM_STEP_ID")
    in_step = step is not None and step not in ("batch", "extern")
    counts = ("SLURM_STEP_NUM_NODES",) * in_step + ("SLURM_JOB_NUM_NODES",)
    nodes_var = next((v for v in counts if env.get(v) is not None), "SLURM_NNODES")
    nnodes = _int(env, nodes_var, minimum=1) if env.get(nodes_var) is not None else 1
    if nnodes > 1 and not in_step:
        raise LaunchError(
            f"this Slurm job has {nnodes} nodes but `ftenv finetune` runs in the batch script itself, "
            "i.e. on the first node only: start it with `srun --ntasks-per-node=1 ...` so that one "
            "copy runs on every node (see docs/examples/slurm/)"
        )
    tasks_raw = env.get("SLURM_STEP_TASKS_PER_NODE") if in_step else None
    if tasks_raw and any(n > 1 for n in _tasks_per_node(tasks_raw)):
        raise LaunchError(
            f"SLURM_STEP_TASKS_PER_NODE={tasks_raw}: run one task per node (`srun --ntasks-per-node=1`)."
            " torchrun starts one process per GPU itself; several tasks on a node would each start "
            "their own torchrun and collide"
        )
    nodelist_var = next(
        (v for v in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST") if env.get(v)),
        None,
    )
    if nodelist_var is None:
        raise LaunchError("Slurm job without SLURM_JOB_NODELIST: cannot tell the master node")
    # One node: the loopback address, no name resolution needed. Several: the first host.
    master = first_host(env.get(nodelist_var)) if nnodes > 1 else DEFAULT_MASTER_ADDR
    launch = Launch(
        source="slurm",
        nnodes=str(nnodes),
        node_rank=_int(env, "SLURM_NODEID") if nnodes > 1 else 0,
        master_addr=master,
        master_port=_master_port(env, None),
    )
    job = env.get("SLURM_JOB_ID") or ""
    if launch.master_port is not None and job.isdigit():
        hook_port = ENROOT_HOOK_PORT_BASE + int(job) % ENROOT_HOOK_PORT_SPAN
        if launch.master_port == hook_port:
            launch.notes.append(
                f"MASTER_PORT={hook_port} is enroot's PyTorch hook's ({ENROOT_HOOK_PORT_BASE} + SLURM_JOB_ID "
                f"% {ENROOT_HOOK_PORT_SPAN}): "
                "every node of this job has the same one"
            )
    if launch.master_port is None:
        # Jobs can share a node: a port derived from the job id keeps two jobs apart, and every
        # node of one job derives the same one.
        launch.master_port = (
            SLURM_PORT_BASE + int(job) % SLURM_PORT_SPAN if job.isdigit() else DEFAULT_MASTER_PORT
        )
    asked = env.get("MASTER_ADDR")
    if nnodes > 1 and asked and asked != launch.master_addr:
        launch.notes.append(
            f"MASTER_ADDR={asked} in the environment is ignored under Slurm (it may come "
            f"from the submitting shell); the master is the first host of {nodelist_var}, "
            f"{launch.master_addr}. Pass --master-addr to choose another."
        )
    return launch


def _torchrun_vars(env: Mapping[str, str]) -> Launch:
    nnodes = env.get("PET_NNODES").strip()
    if not re.fullmatch(r"\d+(:\d+)?", nnodes):
        raise LaunchError(f"PET_NNODES={nnodes!r} is neither N nor MIN:MAX")
    is_kubeflow = bool(env.get("MASTER_ADDR") and env.get("RANK") is not None)
    rank_var = next((v for v in ("PET_NODE_RANK", "RANK") if env.get(v)), None)
    launch = Launch(
        source="kubeflow" if is_kubeflow else "torchrun variables",
        nnodes=nnodes,
        node_rank=_int(env, rank_var) if rank_var else None,
        master_addr=env.get("PET_MASTER_ADDR") or env.get("MASTER_ADDR"),
        master_port=None,
        rdzv_endpoint=env.get("PET_RDZV_ENDPOINT") or None,
        rdzv_backend=env.get("PET_RDZV_BACKEND") or None,
        rdzv_id=env.get("PET_RDZV_ID") or None,
    )
    port = env.get("PET_MASTER_PORT") or env.get("MASTER_PORT")
    if port:
        name = "PET_MASTER_PORT" if env.get("PET_MASTER_PORT") else "MASTER_PORT"
        launch.master_port = _port(port, name)
    nproc = env.get("PET_NPROC_PER_NODE") or ""
    if nproc.isdigit():  # torchrun also takes gpu/cpu/auto: those fall back to the visible GPUs
        launch.nproc_per_node = _int(env, "PET_NPROC_PER_NODE", minimum=1)
    if not launch.rdzv_endpoint:
        if ":" in nnodes:
            raise LaunchError(f"PET_NNODES={nnodes} (elastic) needs PET_RDZV_ENDPOINT")
        if nnodes != "1" and not launch.master_addr:
            raise LaunchError(f"PET_NNODES={nnodes} but neither PET_MASTER_ADDR nor MASTER_ADDR is set")
        if launch.node_rank is None and nnodes != "1":
            raise LaunchError(f"PET_NNODES={nnodes} but neither PET_NODE_RANK nor RANK is set")
        launch.master_addr = launch.master_addr or DEFAULT_MASTER_ADDR
        launch.master_port = launch.master_port or DEFAULT_MASTER_PORT
        launch.node_rank = launch.node_rank or 0
    return launch


def _master_vars(env: Mapping[str, str]) -> Launch:
    nnodes = _int(env, "WORLD_SIZE", minimum=1)
    rank = _int(env, "RANK")
    if rank >= nnodes:
        raise LaunchError(
            f"RANK={rank} is not below WORLD_SIZE={nnodes}: here WORLD_SIZE must count nodes (pods), "
            "as in a Kubeflow PyTorchJob without nprocPerNode, and RANK is the node's rank"
        )
    return Launch(
        source="kubeflow",
        nnodes=str(nnodes),
        node_rank=rank,
        master_addr=env.get("MASTER_ADDR"),
        master_port=_master_port(env, DEFAULT_MASTER_PORT),
    )


def detect(env: Mapping[str, str]) -> Launch:
    """The launch this environment asks for (before command-line overrides)."""
    if env.get("TORCHELASTIC_RUN_ID") and env.get("LOCAL_RANK") is not None:
        raise LaunchError(
            "this is already a process started by torchrun (TORCHELASTIC_RUN_ID and LOCAL_RANK are "
            "set): `ftenv finetune` starts torchrun itself, run it directly instead"
        )
    if env.get("PET_NNODES"):
        return _torchrun_vars(env)
    if env.get("SLURM_JOB_ID") and env.get("SLURM_NODEID") is not None:
        return _slurm(env)
    if env.get("MASTER_ADDR") and env.get("WORLD_SIZE") and env.get("RANK") is not None:
        return _master_vars(env)
    return Launch(
        source="single node",
        nnodes="1",
        node_rank=0,
        master_addr=DEFAULT_MASTER_ADDR,
        master_port=_master_port(env, DEFAULT_MASTER_PORT),
    )


def apply_overrides(
    launch: Launch,
    *,
    nnodes: int | None = None,
    node_rank: int | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
) -> Launch:
    """Command-line options win over what the environment says."""
    if nnodes is not None:
        launch.nnodes = str(nnodes)
    if node_rank is not None:
        launch.node_rank = node_rank
    if master_addr is not None:
        launch.master_addr = master_addr
        launch.rdzv_endpoint = None
    if master_port is not None:
        launch.master_port = master_port
    if launch.rdzv_endpoint is None:
        launch.master_addr = launch.master_addr or DEFAULT_MASTER_ADDR
        launch.master_port = launch.master_port or DEFAULT_MASTER_PORT
        launch.node_rank = launch.node_rank or 0
    if launch.nnodes.isdigit() and launch.node_rank is not None and launch.node_rank >= int(launch.nnodes):
        raise LaunchError(f"node rank {launch.node_rank} is not below the number of nodes {launch.nnodes}")
    return launch
