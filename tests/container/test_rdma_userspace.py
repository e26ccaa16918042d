"""The image carries rdma-core's userspace, so that NCCL can use InfiniBand/RoCE between nodes: the
verbs library and the RDMA connection manager load, the mlx5 and EFA providers are there, and
`ibv_devinfo` exists; the report's network line says the verbs library loads (docs/network.md)."""

LOAD = (
    "import ctypes\n"
    "for name in ('libibverbs.so.1', 'librdmacm.so.1'):\n"
    "    ctypes.CDLL(name)\n"
    "print('loaded')\n"
)


def test_the_verbs_library_loads_and_ibv_devinfo_exists(run):
    r = run("python3", "-c", LOAD, env={"FTENV_REPORT": "0"})
    assert r.returncode == 0 and r.stdout.strip() == "loaded", r.stderr
    r = run("sh", "-c", "for c in ibv_devinfo ibv_devices; do command -v $c; done", env={"FTENV_REPORT": "0"})
    assert r.returncode == 0 and r.stdout.split() == ["/usr/bin/ibv_devinfo", "/usr/bin/ibv_devices"], (
        r.stderr
    )


def test_the_providers_nccl_meets_on_clusters_are_installed(run):
    # ibverbs-providers: one driver file per provider, naming its library (libibverbs reads them).
    r = run("sh", "-c", "ls /etc/libibverbs.d/", env={"FTENV_REPORT": "0"})
    assert r.returncode == 0, r.stderr
    assert {"mlx5.driver", "efa.driver"} <= set(r.stdout.split())


def test_the_report_says_the_verbs_library_loads(run):
    r = run("ftenv", "report")
    assert r.returncode == 0, r.stderr
    assert "libibverbs.so.1 loads" in r.stderr and "no RDMA device" in r.stderr
