"""benchmarks/nccl_network.py, the GPU kit's NCCL call, on the CPU: what it reads from NCCL's
INIT/NET lines (sockets vs IB), what it says without a GPU, and the kit's step around it with a
stand-in for the GPU run."""

from __future__ import annotations

import json
import time

import pytest

from benchmarks import nccl_network as bench
from imagetools.gpukit import gpu_run, gpu_steps
from support import child_env

HOST = "gpu1:811:811 [0] NCCL INFO "
IB = [
    HOST + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/RoCE [RO]; OOB ibp26s0:10.1.0.7<0>",
    HOST + "Using network IB",
]
SOCKETS = [
    HOST + "NET/IB : No device found.",
    HOST + "NET/Socket : Using [0]eth0:172.17.0.2<0>",
    HOST + "Using network Socket",
]


def test_ib_and_sockets_read_from_nccls_lines():
    ib = bench.summarize("\n".join(["noise", *IB, "nccl 2.28.9 all_reduce 1.0"]), 0)
    assert ib["network"] == "IB" and ib["ib_devices"] == "[0]mlx5_0:1/IB [1]mlx5_3:1/RoCE"
    assert ib["transport"].startswith("NCCL network: InfiniBand/RoCE") and len(ib["nccl_net_lines"]) == 2
    sock = bench.summarize("\n".join(SOCKETS), 0)
    assert sock["network"] == "Socket" and sock["ib_none"] is True
    assert (
        sock["transport"]
        == "NCCL network: TCP sockets (NET/Socket on [0]eth0:172.17.0.2<0>; NET/IB found no device)"
    )
    assert bench.summarize("Traceback ...", 1)["network"] is None


def test_only_nccls_init_and_net_lines_are_asked_for():
    assert bench.NCCL_ENV == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
    assert 'dist.init_process_group("nccl"' in bench.CHILD and "world_size=1" in bench.CHILD


def test_without_a_gpu_it_says_so_and_exits_0(capsys, tmp_path):
    if __import__("torch").cuda.is_available():
        pytest.skip("a GPU is here")
    assert bench.main(["--json", str(tmp_path / "r.json")]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == "no GPU"
    assert json.loads((tmp_path / "r.json").read_text())["network"] is None


def _ctx(tmp_path, gpu):
    ctx = gpu_run.Context(tmp_path, tmp_path / "steps.log", child_env(), deadline=time.monotonic() + 60)
    ctx.gpu = gpu
    return ctx


def test_the_kit_step_records_the_network(tmp_path, monkeypatch):
    assert "nccl-network" in gpu_steps.STEPS
    assert gpu_steps.dispatch(_ctx(tmp_path, None), "nccl-network", None, tmp_path).got == gpu_run.NO_GPU
    stand_in = tmp_path / "stand_in.py"  # prints what the script prints on a GPU machine with sockets
    stand_in.write_text(f"import json\nprint(json.dumps({bench.summarize(chr(10).join(SOCKETS), 0)!r}))\n")
    monkeypatch.setattr(gpu_steps, "NCCL_NETWORK_SCRIPT", str(stand_in))
    r = gpu_steps.dispatch(_ctx(tmp_path, {"name": "GPU", "sm": [9, 0]}), "nccl-network", None, tmp_path)
    assert r.ok is True and r.got.startswith("NCCL network: TCP sockets") and r.data["network"] == "Socket"
    stand_in.write_text("import sys\nprint('Traceback: NCCL error')\nsys.exit(1)\n")
    r = gpu_steps.dispatch(_ctx(tmp_path, {"name": "GPU", "sm": [9, 0]}), "nccl-network", None, tmp_path)
    assert r.ok is False and "exit 1" in r.got
