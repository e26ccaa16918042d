"""The network NCCL chose, from its own INIT/NET lines (NCCL 2.28.9's wording), in the watchdog and
in `ftenv analyze`: the transport line once, the warning once for a multi-node job over sockets and
never on one node."""

from __future__ import annotations

import json
import subprocess
import sys

from ftenv.watchdog.nccl_net import NcclNetwork
from support import run_ftenv as ftenv
from support.steplogs import field_report_log

HOST = "node1:2114:2114 [0] NCCL INFO "


def nccl_lines(network: str, nodes: int) -> list[str]:
    """What one rank of NCCL 2.28.9 prints with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET."""
    lines = [HOST + "Bootstrap: Using eth0:10.0.0.1<0>"]
    if network == "IB":
        lines.append(HOST + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>")
    else:
        lines += [HOST + "NET/IB : No device found.", HOST + "NET/Socket : Using [0]eth0:10.0.0.1<0>"]
    lines += [
        HOST + f"Using network {network}",
        HOST + f"comm 0x55d5 rank 0 nRanks {8 * nodes} nNodes {nodes} localRanks 8 localRank 0 MNNVL 0",
    ]
    return lines


def observed(lines: list[str]) -> tuple[NcclNetwork, list[str]]:
    net, out = NcclNetwork(), []
    for line in lines:
        out += net.observe(line.encode())
    return net, out


def test_ib_is_named_with_its_devices():
    net, out = observed(nccl_lines("IB", 4))
    assert out == ["NCCL network: InfiniBand/RoCE (NET/IB on [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE)"]
    assert net.to_dict()["over_sockets_across_nodes"] is False


def test_sockets_across_nodes_warn_once():
    net, out = observed(nccl_lines("Socket", 4) * 3)  # every rank prints the same lines
    assert out[0] == ("NCCL network: TCP sockets (NET/Socket on [0]eth0:10.0.0.1<0>; NET/IB found no device)")
    assert len(out) == 2 and out[1].startswith("WARNING: this 4-node job runs NCCL over TCP sockets")
    assert net.lines() == out


def test_sockets_on_one_node_never_warn():
    net, out = observed(nccl_lines("Socket", 1) * 3)
    assert len(out) == 1 and "WARNING" not in out[0] and net.lines() == out


def test_a_plugin_is_named():
    _, out = observed([HOST + "Using network AWS Libfabric"])
    assert out == ["NCCL network: the plugin 'AWS Libfabric'"]


def test_other_lines_say_nothing():
    net, out = observed(["Using network IB", HOST + "Init COMPLETE", "NCCL INFO"])
    assert out == [] and net.to_dict() is None


def test_the_watchdog_reports_the_transport_and_warns_once():
    script = "import sys\nfor line in sys.argv[1:]: print(line, flush=True)"
    lines = nccl_lines("Socket", 2) * 2
    r = subprocess.run(
        [sys.executable, "-m", "ftenv.cli", "watch", "--", sys.executable, "-c", script, *lines],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("[ftenv-watch] NCCL network: TCP sockets") == 1
    assert r.stdout.count("WARNING: this 2-node job runs NCCL over TCP sockets") == 1
    assert all(line in r.stdout for line in lines)  # NCCL's own lines pass through


def test_analyze_names_the_network_of_a_saved_log(tmp_path):
    steps, _ = field_report_log(fixed=True)
    log = tmp_path / "train.log"
    log.write_text("\n".join(nccl_lines("Socket", 4) + steps) + "\n")
    out = ftenv("analyze", str(log)).stdout
    assert "NCCL network: TCP sockets" in out and out.count("WARNING: this 4-node job") == 1
    data = json.loads(ftenv("analyze", "--json", str(log)).stdout)
    assert data["nccl_network"]["network"] == "Socket" and data["nccl_network"]["over_sockets_across_nodes"]
    log.write_text("\n".join(nccl_lines("IB", 4) + steps) + "\n")
    out = ftenv("analyze", str(log)).stdout
    assert "NCCL network: InfiniBand/RoCE" in out and "WARNING: this" not in out
