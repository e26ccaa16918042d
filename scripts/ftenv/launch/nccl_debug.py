"""On more than one node NCCL is made to state which network it picked: its INFO lines of the INIT
and NET subsystems only (a few lines per rank at start-up, not the whole debug stream), which the
watchdog reads (ftenv.watchdog.nccl_net). NCCL says nothing at its default level when it falls back to
TCP sockets, and a multi-node job over sockets waits on the network every step.
"""

from __future__ import annotations

from collections.abc import Mapping

from ftenv import variables

WANTED = {name: variables.default(name) for name in (variables.NCCL_DEBUG, variables.NCCL_DEBUG_SUBSYS)}


def spans_nodes(nnodes: str) -> bool:
    """'2' or an elastic '1:4' whose most is above one."""
    most = nnodes.split(":")[-1]
    return most.isdigit() and int(most) > 1


def launcher_env(nnodes: str, environ: Mapping[str, str]) -> dict[str, str]:
    """NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET for a multi-node job; nothing on one node, and
    nothing when the user set either (their choice of NCCL's debug output stands whole)."""
    if not spans_nodes(nnodes) or any(variables.given(name, environ) is not None for name in WANTED):
        return {}
    return dict(WANTED)
