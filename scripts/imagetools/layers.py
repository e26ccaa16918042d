"""`python -m imagetools layers`: the image's layers by change rate, read from a built image (podman).

- `layers show IMAGE`: each layer's diff ID, uncompressed size and the instruction that made it.
- `layers compare BEFORE AFTER`: the torch layer, and every layer under it, must be byte-identical
  (same diff ID) in both; prints the layers AFTER adds, i.e. what a node that has BEFORE pulls.
- `layers rebuild-check VARIANT --image BEFORE`: rebuilds the image from a copy of the checkout whose
  rest-of-the-lock file differs (one comment line, as a FunASR bump changes that file and not the
  torch one), then compares. Fails when the torch layer was rebuilt: the layer order is broken.
  `make layer-check` runs it; tests/container/test_layers.py too, where an image can be built.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from imagetools import locks

ROOT = Path(__file__).resolve().parents[2]
#: How the torch layer's instruction is recognised in the image history (the Dockerfile's RUN).
TORCH_MARKER = "-r /opt/ftenv/locks/torch.txt"
REST_MARKER = "-r /opt/ftenv/locks/rest.txt"


@dataclass(frozen=True)
class Layer:
    diff_id: str
    size: int
    created_by: str


def _podman(*args: str) -> str:
    out = subprocess.run(["podman", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args[:2])} failed: {out.stderr.strip()}")
    return out.stdout


def layers(image: str) -> list[Layer]:
    """The image's layers, bottom first, each with the history entry that made it."""
    info = json.loads(_podman("image", "inspect", image))[0]
    diff_ids = info["RootFS"]["Layers"]
    history = info.get("History", [])
    # podman history: one row per history entry, newest first, with the size of the layer it made.
    rows = list(reversed(json.loads(_podman("history", "--format", "json", image))))
    if len(rows) != len(history):
        raise RuntimeError(f"{image}: {len(history)} history entries but podman history shows {len(rows)}")
    made = [(h, row) for h, row in zip(history, rows, strict=True) if not h.get("empty_layer")]
    if len(made) != len(diff_ids):
        raise RuntimeError(f"{image}: {len(diff_ids)} layers but {len(made)} non-empty history entries")
    return [
        Layer(diff_id, int(row.get("size", -1)), h.get("created_by", ""))
        for diff_id, (h, row) in zip(diff_ids, made, strict=True)
    ]


def index_of(stack: list[Layer], marker: str) -> int:
    for n, layer in enumerate(stack):
        if marker in layer.created_by:
            return n
    raise ValueError(f"no layer made by a step containing {marker!r}")


def compare(before: list[Layer], after: list[Layer]) -> tuple[list[str], list[Layer]]:
    """(problems, layers of AFTER that BEFORE lacks)."""
    problems = []
    try:
        torch_b, torch_a = index_of(before, TORCH_MARKER), index_of(after, TORCH_MARKER)
    except ValueError as e:
        return [str(e)], []
    if torch_b != torch_a:
        problems.append(f"the torch layer is layer {torch_a} now, {torch_b} before")
    for n in range(min(torch_b, torch_a) + 1):
        if before[n].diff_id != after[n].diff_id:
            what = "the torch layer" if n == torch_a else f"layer {n} (under the torch layer)"
            problems.append(
                f"{what} changed: {before[n].diff_id[:19]} -> {after[n].diff_id[:19]} "
                f"({after[n].created_by[:90]})"
            )
            break
    had = {layer.diff_id for layer in before}
    return problems, [layer for layer in after if layer.diff_id not in had]


def _copy_checkout(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def rebuild(variant: str, tag: str) -> subprocess.CompletedProcess:
    """Build `tag` from a copy of the checkout whose rest-of-the-lock file has one more comment line
    (what a FunASR bump changes, and nothing the torch layer reads). Output captured."""
    with tempfile.TemporaryDirectory(prefix="layer-check-") as tmp:
        work = Path(tmp)
        _copy_checkout(work)
        rest = work / locks.layer_path(variant, "rest")
        rest.write_text(rest.read_text() + "# layer-check: a change to the rest of the lock only\n")
        env = os.environ | {"CONTAINERS_CONF": str(ROOT / "scripts/containers.conf")}
        cmd = [sys.executable, str(work / "scripts/build_image.py"), variant, "--tag", tag]
        return subprocess.run(cmd, env=env, capture_output=True, text=True)


def rebuild_check(variant: str, before: str, tag: str, keep: bool = False) -> int:
    built = rebuild(variant, tag)
    if built.returncode != 0:
        print(built.stdout[-3000:] + built.stderr[-3000:], file=sys.stderr)
        print("layer-check: the rebuild failed", file=sys.stderr)
        return 2
    try:
        problems, added = compare(layers(before), layers(tag))
    finally:
        if not keep:
            subprocess.run(["podman", "rmi", tag], capture_output=True)
    for layer in added:
        print(f"layer-check: re-pulled: {layer.diff_id[:19]} {layer.size:>13,}  {layer.created_by[:90]}")
    for p in problems:
        print(f"layer-check: FAIL: {p}", file=sys.stderr)
    if not problems:
        print("layer-check: OK: the torch layer and everything under it kept their digests")
    return 1 if problems else 0


def run(args) -> int:
    if args.action == "show":
        for n, layer in enumerate(layers(args.image)):
            print(f"{n:2d} {layer.diff_id}  {layer.size:>13,}  {layer.created_by[:100]}")
        return 0
    if args.action == "compare":
        problems, added = compare(layers(args.before), layers(args.after))
        for layer in added:
            print(f"added: {layer.diff_id}  {layer.created_by[:100]}")
        for p in problems:
            print(f"layers: FAIL: {p}", file=sys.stderr)
        return 1 if problems else 0
    return rebuild_check(args.variant, args.image, args.tag, args.keep)


def add_parser(sub) -> None:
    p = sub.add_parser("layers", help="layer order and reuse of a built image (podman)")
    acts = p.add_subparsers(dest="action", required=True)
    acts.add_parser("show", help="the image's layers, bottom first").add_argument("image")
    c = acts.add_parser("compare", help="torch layer and below unchanged from BEFORE to AFTER")
    c.add_argument("before")
    c.add_argument("after")
    r = acts.add_parser("rebuild-check", help="rebuild with a changed rest-of-lock and compare")
    r.add_argument("variant")
    r.add_argument("--image", required=True, help="the image built from this checkout")
    r.add_argument("--tag", default="localhost/ftenv-layer-check:rebuilt", help="tag of the rebuild")
    r.add_argument("--keep", action="store_true", help="keep the rebuilt image")
    p.set_defaults(func=run)
