"""Which network NCCL actually chose, read from its own INIT/NET debug lines, and one warning when
a multi-node job runs over TCP sockets: NCCL falls back to them without a word at its default
debug level, and every step then waits on the network.

The wording is NCCL's, as printed by the version the cu130 image pins (NVIDIA/nccl v2.28.9-1):
  src/debug.cc            "[%d] NCCL INFO " before every INFO line
  src/init.cc             "Using network %s" (the transport's name: "IB", "Socket", or a plugin's)
  src/init.cc             "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d"
  src/transport/net_ib.cc "NET/IB : No device found." and "NET/IB : Using%s %s; OOB %s:%s"
  src/transport/net_socket.cc "NET/Socket : Using%s"
They are printed with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS including INIT and NET, which `ftenv
finetune` sets on more than one node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Cheap test before parsing: every line this module reads contains it.
MARK = b"NCCL INFO "
SOCKET_NET = "Socket"
IB_NET = "IB"
_USING = re.compile(rb"NCCL INFO Using network (.+?)\s*$")
_IB = re.compile(rb"NCCL INFO NET/IB : Using(.*?)(?: \[RO\])?\s*; OOB (\S+)")
_IB_NONE = b"NCCL INFO NET/IB : No device found."
_SOCKET = re.compile(rb"NCCL INFO NET/Socket : Using(.*?)\s*$")
_NODES = re.compile(rb"NCCL INFO comm \S+ rank \d+ nRanks \d+ nNodes (\d+) ")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").strip()


@dataclass
class NcclNetwork:
    """What NCCL's lines said so far; `observe` returns the lines they call for, each once (the
    watchdog prefixes them)."""

    network: str | None = None  # "IB", "Socket", or a plugin's name
    ib_devices: str | None = None  # "[0]mlx5_0:1/IB [1]mlx5_1:1/RoCE"
    ib_none: bool = False  # NET/IB found no device
    socket_interfaces: str | None = None  # "[0]eth0:10.0.0.1<0>"
    nodes: int | None = None  # the most nodes a communicator spans
    reported: bool = False
    warned: bool = False

    def observe(self, line: bytes) -> list[str]:
        if MARK not in line:
            return []
        if m := _USING.search(line):
            self.network = self.network or _text(m[1])
        elif m := _IB.search(line):
            self.ib_devices = _text(m[1])
        elif _IB_NONE in line:
            self.ib_none = True
        elif m := _SOCKET.search(line):
            self.socket_interfaces = _text(m[1])
        elif m := _NODES.search(line):
            self.nodes = max(self.nodes or 0, int(m[1]))
        out = []
        if self.network is not None and not self.reported:
            self.reported = True
            out.append(self.transport_line())
        if self.over_sockets_across_nodes() and not self.warned:
            self.warned = True
            out.append(self.warning_line())
        return out

    def over_sockets_across_nodes(self) -> bool:
        return self.network == SOCKET_NET and (self.nodes or 0) > 1

    def transport_line(self) -> str:
        if self.network == IB_NET:
            return f"NCCL network: InfiniBand/RoCE (NET/IB on {self.ib_devices or 'devices not listed'})"
        if self.network == SOCKET_NET:
            why = "; NET/IB found no device" if self.ib_none else ""
            return f"NCCL network: TCP sockets (NET/Socket on {self.socket_interfaces or 'unlisted'}{why})"
        return f"NCCL network: the plugin {self.network!r}"

    def warning_line(self) -> str:
        return (
            f"WARNING: this {self.nodes}-node job runs NCCL over TCP sockets: every step waits on the "
            "network. `ftenv report` on a node names the cause and the fix for your launcher "
            "(its network line; docs/network.md)"
        )

    def lines(self) -> list[str]:
        """For `ftenv analyze`: the transport and the warning; nothing when NCCL said nothing."""
        if self.network is None:
            return []
        return [self.transport_line()] + ([self.warning_line()] if self.over_sockets_across_nodes() else [])

    def to_dict(self) -> dict | None:
        if self.network is None:
            return None
        return {
            "network": self.network,
            "ib_devices": self.ib_devices,
            "socket_interfaces": self.socket_interfaces,
            "nodes": self.nodes,
            "over_sockets_across_nodes": self.over_sockets_across_nodes(),
        }
