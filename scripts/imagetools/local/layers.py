"""`python -m imagetools layers show|compare|rebuild-check`: the image's layers by change rate, read
from a built image (podman), so that a FunASR bump is shown to leave the 4 GB torch layer (and all
under it) byte-identical; `make layer-check` rebuilds with FunASR's lock entry changed and compares.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ftenv import outcome, variables
from imagetools import ROOT, locks

#: What each kind of layer installs: a package folder in the venv's site-packages.
PACKAGES = {"torch": "torch", "rest": "funasr", "ftenv": "ftenv"}
SITE_PACKAGES = "opt/venv/lib/python3*/site-packages"


@dataclass(frozen=True)
class Layer:
    diff_id: str
    size: int
    created_by: str
    #: The kinds of PACKAGES whose package folder this layer adds.
    holds: frozenset[str] = frozenset()


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
    dirs = _layer_dirs(info)
    if len(dirs) != len(diff_ids):
        raise RuntimeError(f"{image}: {len(diff_ids)} layers but {len(dirs)} layer folders in storage")
    return [
        Layer(diff_id, int(row.get("size", -1)), h.get("created_by", ""), _holds(d))
        for diff_id, (h, row), d in zip(diff_ids, made, dirs, strict=True)
    ]


def _layer_dirs(info: dict) -> list[Path]:
    """Each layer's folder in overlay storage, bottom first (LowerDir lists them top first)."""
    data = info.get("GraphDriver", {}).get("Data", {})
    lowers = [d for d in data.get("LowerDir", "").split(":") if d]
    return [Path(d) for d in [*reversed(lowers), data["UpperDir"]]]


def _holds(layer_dir: Path) -> frozenset[str]:
    return frozenset(
        kind for kind, pkg in PACKAGES.items() if any(layer_dir.glob(f"{SITE_PACKAGES}/{pkg}/__init__.py"))
    )


def index_of(stack: list[Layer], kind: str) -> int:
    """The bottom-most layer that installs PACKAGES[kind]."""
    for n, layer in enumerate(stack):
        if kind in layer.holds:
            return n
    raise ValueError(f"no layer installs site-packages/{PACKAGES[kind]}")


def compare(before: list[Layer], after: list[Layer]) -> tuple[list[str], list[Layer]]:
    """(problems, layers of AFTER that BEFORE lacks)."""
    problems = []
    try:
        torch_b, torch_a = index_of(before, "torch"), index_of(after, "torch")
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


def _copy_checkout(root: Path, dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    for rel in filter(None, files):
        src = root / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def bump_funasr_entry(lock_text: str) -> str:
    """The lock with one comment line added to FunASR's entry: what a FunASR bump changes."""
    header, entries, _ = locks.parse(lock_text)
    if "funasr" not in entries:
        raise ValueError("the lock pins no funasr")
    entries["funasr"] += "\n    # layer-check: FunASR's entry changed"
    return "\n".join([*header, *entries.values()]) + "\n"


def rebuild(
    variant: str, tag: str, root: Path = ROOT, options: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """Build `tag` from a copy of the checkout at `root` whose lock differs in FunASR's entry only;
    the per-layer locks are derived again where the checkout has them; `options` go to
    build_image.py (e.g. --ca-bundle). Output captured."""
    with tempfile.TemporaryDirectory(prefix="layer-check-") as tmp:
        work = Path(tmp)
        _copy_checkout(root, work)
        lock = work / locks.lock_path(variant)
        lock.write_text(bump_funasr_entry(lock.read_text()))
        if (work / locks.LAYER_LOCKS).is_dir():
            locks.write(work, [variant])
        env = variables.environment({"CONTAINERS_CONF": str(root / "scripts/containers.conf")})
        # --no-default-tag: the image under test keeps its name while the rebuild exists beside it
        cmd = [
            sys.executable,
            str(work / "scripts/build_image.py"),
            variant,
            "--tag",
            tag,
            "--no-default-tag",
            *options,
        ]
        return subprocess.run(cmd, env=env, capture_output=True, text=True)


def rebuild_check(variant: str, before: str, tag: str, keep: bool = False, root: Path = ROOT) -> int:
    built = rebuild(variant, tag, root)
    if built.returncode != 0:
        print(built.stdout[-3000:] + built.stderr[-3000:], file=sys.stderr)
        print("layer-check: the rebuild failed", file=sys.stderr)
        return outcome.UNUSABLE
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
    return outcome.EXIT[outcome.FAIL] if problems else 0


def run(args) -> int:
    if args.action == "show":
        for n, layer in enumerate(layers(args.image)):
            holds = ",".join(sorted(layer.holds)) or "-"
            print(f"{n:2d} {layer.diff_id[:19]} {layer.size:>14,} {holds:<12} {layer.created_by[:80]}")
        return 0
    if args.action == "compare":
        problems, added = compare(layers(args.before), layers(args.after))
        for layer in added:
            print(f"added: {layer.diff_id}  {layer.created_by[:100]}")
        for p in problems:
            print(f"layers: FAIL: {p}", file=sys.stderr)
        return outcome.EXIT[outcome.FAIL] if problems else 0
    return rebuild_check(args.variant, args.image, args.tag, args.keep, Path(args.root))


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
    r.add_argument("--root", default=str(ROOT), help="the checkout to rebuild from (default: this one)")
    p.set_defaults(func=run)
