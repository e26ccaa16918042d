#!/usr/bin/env python3
"""Start NCCL on this machine's GPU (a one-process world, one all-reduce) with NCCL_DEBUG=INFO and
NCCL_DEBUG_SUBSYS=INIT,NET, and say which network it picked, read from its own lines by the
watchdog's reader (ftenv.watchdog.nccl_net). NCCL sets up its network transport even for one rank, so
this shows on a single lent GPU whether the image's NCCL finds InfiniBand/RoCE (NET/IB), a plugin,
or only TCP sockets: the GPU kit's `nccl-network` step (docs/gpu-results.md).

    python benchmarks/nccl_network.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))

from ftenv import outcome, variables  # noqa: E402
from ftenv.launch import nccl_debug  # noqa: E402
from ftenv.watchdog.nccl_net import MARK, NcclNetwork  # noqa: E402

#: NCCL's debug settings for the run, as `ftenv finetune` sets them on several nodes: its INIT and NET
#: lines only (NVIDIA/nccl src/debug.cc).
NCCL_ENV = nccl_debug.WANTED
CHILD = """
import tempfile, torch, torch.distributed as dist
store = tempfile.NamedTemporaryFile(delete=False).name
dev = torch.device("cuda", 0)
dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1, device_id=dev)
t = torch.ones(1, device=dev)
dist.all_reduce(t)
torch.cuda.synchronize()
print("nccl", ".".join(map(str, torch.cuda.nccl.version())), "all_reduce", t.item(), flush=True)
dist.destroy_process_group()
"""
TIMEOUT_S = 120


def summarize(output: str, rc: int | None) -> dict:
    """What NCCL's lines in `output` say about its network (None where it said nothing)."""
    net = NcclNetwork()
    for line in output.splitlines():
        net.observe(line.encode("utf-8", "replace"))
    said = [
        line
        for line in output.splitlines()
        if MARK.decode() in line and ("NET/" in line or "Using network" in line)
    ]
    return {
        "exit": rc,
        "network": net.network,
        "transport": net.transport_line() if net.network else None,
        "ib_devices": net.ib_devices,
        "socket_interfaces": net.socket_interfaces,
        "ib_none": net.ib_none,
        "nccl_net_lines": said[:20],
    }


def run_nccl() -> tuple[int | None, str]:
    env = variables.environment(NCCL_ENV)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired as exc:
        return None, f"{exc.stdout or ''}{exc.stderr or ''}\nno answer within {TIMEOUT_S} s"
    return proc.returncode, proc.stdout + proc.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the result here too")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        result = {"exit": None, "network": None, "transport": None, "skipped": "no GPU"}
    else:
        rc, output = run_nccl()
        result = summarize(output, rc)
        if rc != 0:
            result["output_tail"] = output[-3000:]
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return (
        0
        if result.get("skipped") or (result["exit"] == 0 and result["network"])
        else outcome.EXIT[outcome.FAIL]
    )


if __name__ == "__main__":
    sys.exit(main())
