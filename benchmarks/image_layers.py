#!/usr/bin/env python3
"""Size of each layer of images, uncompressed, gzip and zstd, and the bytes a node re-pulls.

Run on the host: `python3 benchmarks/image_layers.py IMAGE [BUMPED] [--bare BARE]`. Each image is
saved with `podman save` (docker-archive: the layers as plain tars), and each layer is compressed the
way BuildKit pushes it by default (gzip level 6; zstd level 3), counting bytes only. With BUMPED (the
same image rebuilt after a version bump), it lists the layers BUMPED adds: what a node that has
IMAGE pulls. With BARE (the lock alone in a venv on the same base), it prints the image / bare ratio.
Prints a markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from imagetools.local import layers as layertools  # noqa: E402

CHUNK = 1 << 22


def _compressed_sizes(stream) -> tuple[int, int, int]:
    """(uncompressed, gzip -6, zstd -3) byte counts of a stream."""
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)
    zstd = subprocess.Popen(["zstd", "-3", "-q", "-c"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    counter = subprocess.Popen(["wc", "-c"], stdin=zstd.stdout, stdout=subprocess.PIPE, text=True)
    zstd.stdout.close()
    raw = gz_bytes = 0
    while chunk := stream.read(CHUNK):
        raw += len(chunk)
        gz_bytes += len(gz.compress(chunk))
        zstd.stdin.write(chunk)
    gz_bytes += len(gz.flush())
    zstd.stdin.close()
    zstd.wait()
    return raw, gz_bytes, int(counter.communicate()[0])


def measure(image: str, skip: frozenset[str] = frozenset()) -> list[dict]:
    """Per layer, bottom first: diff ID, instruction, uncompressed, gzip, zstd bytes (layers whose
    diff ID is in `skip` are listed without sizes: they were measured in another image)."""
    stack = layertools.layers(image)
    with tempfile.TemporaryDirectory(prefix="image-layers-") as tmp:
        archive = Path(tmp) / "image.tar"
        subprocess.run(
            ["podman", "save", "--format", "docker-archive", "-o", str(archive), image], check=True
        )
        with tarfile.open(archive) as tar:
            manifest = json.load(tar.extractfile("manifest.json"))[0]
            rows = []
            for layer, member in zip(stack, manifest["Layers"], strict=True):
                if layer.diff_id in skip:
                    rows.append({"diff_id": layer.diff_id, "step": layer.created_by})
                    continue
                raw, gz, zst = _compressed_sizes(tar.extractfile(member))
                rows.append(
                    {"diff_id": layer.diff_id, "step": layer.created_by, "raw": raw, "gzip": gz, "zstd": zst}
                )
    return rows


def _step(text: str) -> str:
    text = text.replace("|", "\\|").split("#(nop) ")[-1]
    return (text[:70] + "...") if len(text) > 70 else text


def _gb(n: int) -> str:
    return f"{n / 1e9:.3f}"


def _sizes(r: dict, sep: str) -> str:
    return sep.join(_gb(r[k]) for k in ("raw", "gzip", "zstd"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("image")
    parser.add_argument("bumped", nargs="?", help="the image rebuilt after a version bump")
    parser.add_argument("--bare", help="the lock alone in a venv on the same base")
    args = parser.parse_args()
    rows = measure(args.image)
    print("| # | layer (instruction) | uncompressed GB | gzip GB | zstd GB | diff ID |")
    print("|---|---|---|---|---|---|")
    for n, r in enumerate(rows):
        print(f"| {n} | `{_step(r['step'])}` | {_sizes(r, ' | ')} | `{r['diff_id'][:19]}` |")
    total = {k: sum(r[k] for r in rows) for k in ("raw", "gzip", "zstd")}
    print(f"| | **image** | {_gb(total['raw'])} | {_gb(total['gzip'])} | {_gb(total['zstd'])} | |")
    if args.bumped:
        have = {r["diff_id"] for r in rows}
        bumped = measure(args.bumped, skip=frozenset(have))
        new = [r for r in bumped if r["diff_id"] not in have]
        print(f"\nre-pulled after the bump ({len(new)} of {len(bumped)} layers new):")
        for r in new:
            print(f"  {_sizes(r, ', ')} GB (raw, gzip, zstd)  {_step(r['step'])}")
        print(
            "  total: " + ", ".join(f"{_gb(sum(r[k] for r in new))} GB {k}" for k in ("raw", "gzip", "zstd"))
        )
    if args.bare:
        bare = measure(args.bare)
        bare_total = {k: sum(r[k] for r in bare) for k in ("raw", "gzip", "zstd")}
        print(
            "\nbare venv image: " + ", ".join(f"{_gb(bare_total[k])} GB {k}" for k in ("raw", "gzip", "zstd"))
        )
        print(
            "image / bare: "
            + ", ".join(f"{total[k] / bare_total[k]:.3f} ({k})" for k in ("raw", "gzip", "zstd"))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
