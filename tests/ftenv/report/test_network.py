"""The report's network line and verdict from planted sysfs trees and NCCL settings: which network
NCCL will use between nodes, and the fix for the launcher when it is TCP sockets."""

import pytest

from ftenv.report import network
from support import child_env, run_ftenv

LOADS = (True, None)


def plant(root, device, port, link_layer, state):
    """One port as the kernel lists it under /sys/class/infiniband."""
    d = root / device / "ports" / str(port)
    d.mkdir(parents=True)
    (d / "link_layer").write_text(f"{link_layer}\n")
    (d / "state").write_text(f"{state}\n")
    return root


def facts(root, env=None, nodes=4, launcher="slurm", verbs=LOADS):
    return network.collect(nodes, launcher, environ=env or {}, root=root, verbs=verbs)


def test_ports_read_from_sysfs(tmp_path):
    plant(tmp_path, "mlx5_1", 1, "Ethernet", "4: ACTIVE")
    plant(tmp_path, "mlx5_0", 1, "InfiniBand", "1: DOWN")
    ports = network.read_ports(tmp_path)
    assert [p.text() for p in ports] == ["mlx5_0:1 InfiniBand DOWN", "mlx5_1:1 RoCE ACTIVE"]


def test_no_sysfs_folder_is_no_device(tmp_path):
    assert network.read_ports(tmp_path / "absent") == []


def test_no_device_is_sockets_with_the_launchers_fix(tmp_path):
    v = network.verdict(facts(tmp_path))
    assert v.rdma is False and v.text.startswith(network.SOCKETS) and "no RDMA device" in v.text
    assert "MELLANOX_VISIBLE_DEVICES=all" in v.fix
    kube = network.verdict(facts(tmp_path, launcher="kubeflow"))
    assert "rdma/rdma_shared_device_a" in kube.fix
    assert "--device /dev/infiniband" in network.verdict(facts(tmp_path, launcher="single node")).fix


def test_an_ib_port_down_is_sockets(tmp_path):
    plant(tmp_path, "mlx5_0", 1, "InfiniBand", "1: DOWN")
    v = network.verdict(facts(tmp_path))
    assert v.rdma is False and "no active RDMA port: mlx5_0:1 InfiniBand DOWN" in v.text
    assert "ibstat" in v.fix


def test_an_active_roce_port_is_rdma(tmp_path):
    plant(tmp_path, "mlx5_0", 1, "Ethernet", "4: ACTIVE")
    v = network.verdict(facts(tmp_path))
    assert v.rdma is True and v.text == "RoCE (NCCL's NET/IB on mlx5_0:1 RoCE ACTIVE)"


def test_an_active_ib_port_is_rdma(tmp_path):
    plant(tmp_path, "mlx5_0", 1, "InfiniBand", "4: ACTIVE")
    assert network.verdict(facts(tmp_path)).rdma is True


def test_ib_disabled_is_sockets_even_with_an_active_port(tmp_path):
    plant(tmp_path, "mlx5_0", 1, "InfiniBand", "4: ACTIVE")
    v = network.verdict(facts(tmp_path, {"NCCL_IB_DISABLE": "1"}))
    assert v.rdma is False and "NCCL_IB_DISABLE=1" in v.text and v.fix == "unset NCCL_IB_DISABLE"
    assert network.verdict(facts(tmp_path, {"NCCL_IB_DISABLE": "0"})).rdma is True


def test_sockets_forced_by_nccl_net(tmp_path):
    plant(tmp_path, "mlx5_0", 1, "InfiniBand", "4: ACTIVE")
    v = network.verdict(facts(tmp_path, {"NCCL_NET": "Socket"}))
    assert v.rdma is False and "NCCL_NET=Socket" in v.text


def test_a_socket_interface_named_does_not_turn_ib_off(tmp_path):
    """NCCL_SOCKET_IFNAME picks the interface for the bootstrap and the socket transport only:
    NCCL still takes an active IB port; the report shows the setting."""
    plant(tmp_path, "mlx5_0", 1, "InfiniBand", "4: ACTIVE")
    f = facts(tmp_path, {"NCCL_SOCKET_IFNAME": "eth0"})
    assert network.verdict(f).rdma is True
    assert "NCCL_SOCKET_IFNAME=eth0" in "\n".join(network.render_lines(f))


def test_verbs_library_missing_is_sockets(tmp_path):
    plant(tmp_path, "mlx5_0", 1, "InfiniBand", "4: ACTIVE")
    v = network.verdict(facts(tmp_path, verbs=(False, "libibverbs.so.1: cannot open")))
    assert v.rdma is False and "libibverbs.so.1 does not load" in v.text


@pytest.mark.parametrize(
    "spec, rdma",
    [
        ("mlx5_1", True),
        ("mlx5_0", False),
        ("^mlx5_0", True),
        ("=mlx5", False),
        ("mlx5", True),
        ("mlx5_1:2", False),
    ],
)
def test_ib_hca_narrows_the_ports(tmp_path, spec, rdma):
    plant(tmp_path, "mlx5_0", 1, "InfiniBand", "1: DOWN")
    plant(tmp_path, "mlx5_1", 1, "InfiniBand", "4: ACTIVE")
    assert network.verdict(facts(tmp_path, {"NCCL_IB_HCA": spec})).rdma is rdma


def test_a_plugin_is_not_judged(tmp_path):
    v = network.verdict(facts(tmp_path, {"NCCL_NET_PLUGIN": "ofi"}))
    assert v.rdma is None and "'ofi'" in v.text


def test_lines_warn_only_on_a_multi_node_job_over_sockets(tmp_path):
    many = "\n".join(network.render_lines(facts(tmp_path, nodes=4)))
    assert "4 nodes: NCCL will use TCP sockets: every step waits on the network" in many
    assert many.count("WARNING: multi-node job over TCP sockets") == 1
    one = "\n".join(network.render_lines(facts(tmp_path, nodes=1)))
    assert "WARNING" not in one and "one node" in one and "no RDMA device" in one


def test_json_has_the_verdict_for_many_nodes_only(tmp_path):
    plant(tmp_path, "mlx5_0", 1, "InfiniBand", "4: ACTIVE")
    d = network.as_dict(facts(tmp_path))
    assert d["verdict"]["rdma"] is True and d["ports"][0]["state"] == "ACTIVE"
    assert network.as_dict(facts(tmp_path, nodes=1))["verdict"] is None


def test_ftenv_report_gives_the_verdict_for_the_launchers_node_count():
    env = child_env(unset=["SLURM_*", "PET_*", "NCCL_*"])
    many = {**env, "PET_NNODES": "4", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "m", "NCCL_NET": "Socket"}
    r = run_ftenv("report", "--no-gpu-probe", env=many)
    assert r.returncode == 0, r.stderr
    assert "4 nodes: NCCL will use TCP sockets: every step waits on the network (NCCL_NET=Socket)" in r.stderr
    one = run_ftenv("report", "--no-gpu-probe", env=env)
    assert "one node: NCCL stays inside the node" in one.stderr and "WARNING: multi-node" not in one.stderr
