"""The network NCCL will use between nodes, said before the run: the RDMA ports the container sees,
whether the verbs library loads, the NCCL version and the NCCL_* settings that steer its choice.

NCCL falls back to TCP sockets without a word when it finds no usable InfiniBand/RoCE port (its
IB transport opens libibverbs.so.1 at run time: src/misc/ibvsymbols.cc, src/transport/net_ib.cc),
and on a multi-node job every step then waits on the network. The report names that before the
first step. Whether the job spans nodes is the caller's to say (the launcher's variables belong to
ftenv.launch.cluster_env, above this wing).
"""

from __future__ import annotations

import contextlib
import ctypes
import resource
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ftenv import variables
from ftenv.attention.facts import package_version

#: Where the kernel lists RDMA devices: <dev>/ports/<n>/{state,link_layer}.
SYSFS_ROOT = Path("/sys/class/infiniband")
VERBS_LIBRARY = "libibverbs.so.1"
#: NCCL's own variables that steer which network it picks (NCCL's environment-variable docs).
NET = variables.NCCL_NET
NET_PLUGIN = variables.NCCL_NET_PLUGIN
IB_DISABLE = variables.NCCL_IB_DISABLE
IB_HCA = variables.NCCL_IB_HCA
SOCKET_IFNAME = variables.NCCL_SOCKET_IFNAME
STEERING = (NET, NET_PLUGIN, IB_DISABLE, IB_HCA, SOCKET_IFNAME)
#: The NCCL wheels torch depends on (CUDA 13, CUDA 12), read when torch cannot say.
NCCL_PACKAGES = ("nvidia-nccl-cu13", "nvidia-nccl-cu12")
SOCKETS = "TCP sockets: every step waits on the network"
#: What each launcher needs to hand the host's RDMA devices to the container (docs/network.md).
LAUNCHER_FIX = {
    "slurm": "under pyxis/enroot export MELLANOX_VISIBLE_DEVICES=all before srun (enroot's "
    "99-mellanox.sh hook then mounts the HCAs); under Apptainer /dev is the host's already",
    "kubeflow": "request the RDMA device plugin's resource (e.g. rdma/rdma_shared_device_a: 1) in "
    "the PyTorchJob (docs/examples/kubernetes/pytorchjob-multi-node.yaml)",
}
OTHER_LAUNCHER_FIX = "docker run --device /dev/infiniband --ulimit memlock=-1 (docs/network.md)"


@dataclass(frozen=True)
class Port:
    device: str  # "mlx5_0"
    number: int
    link_layer: str  # "InfiniBand" or "Ethernet" (RoCE)
    state: str  # "ACTIVE", "DOWN", "INIT", ...

    @property
    def kind(self) -> str:
        return "RoCE" if self.link_layer.lower() == "ethernet" else self.link_layer

    def text(self) -> str:
        return f"{self.device}:{self.number} {self.kind} {self.state}"


@dataclass
class NetworkFacts:
    ports: list[Port] = field(default_factory=list)
    verbs_loads: bool = False
    verbs_error: str | None = None
    nccl_version: str | None = None
    settings: dict[str, str] = field(default_factory=dict)  # the STEERING variables that are set
    memlock_bytes: int | None = None  # RLIMIT_MEMLOCK's soft limit; -1: unlimited
    nodes: int | None = None  # None: not known
    launcher: str | None = None  # ftenv.launch.cluster_env's source: "slurm", "kubeflow", ...


def _first_word(path: Path) -> str | None:
    """'4: ACTIVE' -> 'ACTIVE', 'InfiniBand' -> 'InfiniBand'; None when unreadable."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return text.split(":", 1)[-1].strip() or None


def read_ports(root: Path = SYSFS_ROOT) -> list[Port]:
    """Every port of every RDMA device under root (sysfs), sorted by device and port."""
    ports = []
    with contextlib.suppress(OSError):
        for dev in sorted(root.iterdir()):
            with contextlib.suppress(OSError):
                for port_dir in sorted((dev / "ports").iterdir()):
                    if not port_dir.name.isdigit():
                        continue
                    ports.append(
                        Port(
                            dev.name,
                            int(port_dir.name),
                            _first_word(port_dir / "link_layer") or "unknown",
                            _first_word(port_dir / "state") or "unknown",
                        )
                    )
    return ports


def verbs_loads(name: str = VERBS_LIBRARY) -> tuple[bool, str | None]:
    """Whether the dynamic loader finds the verbs library, as NCCL's dlopen will."""
    try:
        ctypes.CDLL(name)
    except OSError as exc:
        return False, str(exc)
    return True, None


def nccl_version() -> str | None:
    """The NCCL torch carries: torch.cuda.nccl.version() where it answers, else the wheel's version."""
    with contextlib.suppress(Exception):
        import torch

        v = torch.cuda.nccl.version()
        return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    return package_version(*NCCL_PACKAGES)


def _memlock() -> int | None:
    with contextlib.suppress(OSError, ValueError):
        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        return -1 if soft == resource.RLIM_INFINITY else soft
    return None


def collect(
    nodes: int | None,
    launcher: str | None,
    environ: Mapping[str, str] | None = None,
    root: Path = SYSFS_ROOT,
    verbs: tuple[bool, str | None] | None = None,
) -> NetworkFacts:
    """Read the network facts; nodes and launcher come from the caller (see the module's docstring)."""
    loads, error = verbs if verbs is not None else verbs_loads()
    return NetworkFacts(
        ports=read_ports(root),
        verbs_loads=loads,
        verbs_error=error,
        nccl_version=nccl_version(),
        settings={name: value for name in STEERING if (value := variables.given(name, environ)) is not None},
        memlock_bytes=_memlock(),
        nodes=nodes,
        launcher=launcher,
    )


def _hca_filter(spec: str, ports: list[Port]) -> list[Port]:
    """NCCL_IB_HCA as NCCL reads it: a comma list of device[:port], a prefix each unless the list
    starts with '='; a leading '^' excludes the listed ones."""
    exclude, exact = spec.startswith("^"), False
    spec = spec.lstrip("^")
    if spec.startswith("="):
        exact, spec = True, spec[1:]
    wanted = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, port = item.partition(":")
        wanted.append((name, int(port) if port.isdigit() else None))

    def match(p: Port) -> bool:
        return any(
            (p.device == n if exact else p.device.startswith(n)) and (num is None or p.number == num)
            for n, num in wanted
        )

    return [p for p in ports if match(p) != exclude]


@dataclass(frozen=True)
class Verdict:
    rdma: bool | None  # True: InfiniBand/RoCE; False: sockets; None: a plugin, or not judged
    text: str
    fix: str | None = None


def _is_set(value: str | None) -> bool:
    return value is not None and value.strip() not in ("", "0")


def verdict(f: NetworkFacts) -> Verdict:
    """Which network NCCL will pick between nodes, in NCCL's own order: a forced NCCL_NET or a
    plugin first, then its IB transport if it is enabled, loads and has an active port, else sockets."""
    forced = f.settings.get(NET, "").strip()
    if forced.lower() == "socket":
        return Verdict(False, f"{SOCKETS} ({NET}={forced})", f"unset {NET}")
    if f.settings.get(NET_PLUGIN) or (forced and forced.lower() != "ib"):
        plugin = forced or f.settings[NET_PLUGIN]
        return Verdict(
            None, f"the network plugin {plugin!r} if it loads (its 'Using network' line in the log says)"
        )
    if _is_set(f.settings.get(IB_DISABLE)):
        return Verdict(False, f"{SOCKETS} ({IB_DISABLE}={f.settings[IB_DISABLE]})", f"unset {IB_DISABLE}")
    if not f.verbs_loads:
        return Verdict(
            False,
            f"{SOCKETS} ({VERBS_LIBRARY} does not load)",
            "use an image with rdma-core's libibverbs1 and ibverbs-providers (this image's Dockerfile "
            "has them)",
        )
    launcher_fix = LAUNCHER_FIX.get(f.launcher or "", OTHER_LAUNCHER_FIX)
    if not f.ports:
        return Verdict(False, f"{SOCKETS} (no RDMA device in the container)", launcher_fix)
    candidates = _hca_filter(f.settings[IB_HCA], f.ports) if f.settings.get(IB_HCA) else f.ports
    if not candidates:
        return Verdict(
            False,
            f"{SOCKETS} ({IB_HCA}={f.settings[IB_HCA]} matches none of the visible ports)",
            f"fix {IB_HCA} to name a visible device (ibv_devinfo lists them)",
        )
    active = [p for p in candidates if p.state.upper() == "ACTIVE"]
    if not active:
        down = ", ".join(p.text() for p in candidates)
        return Verdict(
            False,
            f"{SOCKETS} (no active RDMA port: {down})",
            "a port that is not ACTIVE is the host's or the fabric's: check `ibstat` on the host and "
            "the subnet manager (InfiniBand) or the switch port (RoCE)",
        )
    kinds = sorted({p.kind for p in active})
    return Verdict(True, f"{'/'.join(kinds)} (NCCL's NET/IB on {', '.join(p.text() for p in active)})")


def _memlock_text(n: int | None) -> str:
    if n is None:
        return "unknown"
    return "unlimited" if n < 0 else f"{n // 1024} KiB"


def render_lines(f: NetworkFacts) -> list[str]:
    """The report's network line, its details, and for a multi-node job the verdict."""
    ports = ", ".join(p.text() for p in f.ports) if f.ports else "no RDMA device"
    verbs = "loads" if f.verbs_loads else "missing"
    settings = " ".join(f"{k}={v}" for k, v in f.settings.items()) or "no NCCL_* network settings"
    lines = [
        f"network {ports}; {VERBS_LIBRARY} {verbs}; NCCL {f.nccl_version or 'unknown'}",
        f"        {settings}; memlock {_memlock_text(f.memlock_bytes)}",
    ]
    if f.nodes is None or f.nodes <= 1:
        where = "one node" if f.nodes == 1 else "nodes unknown"
        lines.append(f"        {where}: NCCL stays inside the node (NVLink/PCIe); no network verdict")
        return lines
    v = verdict(f)
    lines.append(f"        {f.nodes} nodes: NCCL will use {v.text}")
    if v.rdma is False:
        lines.append(f"WARNING: multi-node job over {SOCKETS}. Fix: {v.fix}.")
    elif v.rdma and f.memlock_bytes is not None and 0 <= f.memlock_bytes < 2**30:
        lines.append(
            f"NOTE: memlock is {_memlock_text(f.memlock_bytes)}: RDMA memory registration may fail; "
            "raise it (docker --ulimit memlock=-1; the container runtime's limit on Kubernetes)."
        )
    return lines


def as_dict(f: NetworkFacts) -> dict:
    """`ftenv report --json`'s "network": the facts, and the verdict where the job spans nodes."""
    v = verdict(f) if f.nodes and f.nodes > 1 else None
    return {
        "ports": [
            {"device": p.device, "port": p.number, "link_layer": p.link_layer, "state": p.state}
            for p in f.ports
        ],
        "verbs_loads": f.verbs_loads,
        "verbs_error": f.verbs_error,
        "nccl_version": f.nccl_version,
        "settings": f.settings,
        "memlock_bytes": f.memlock_bytes,
        "nodes": f.nodes,
        "launcher": f.launcher,
        "verdict": None if v is None else {"rdma": v.rdma, "text": v.text, "fix": v.fix},
    }
