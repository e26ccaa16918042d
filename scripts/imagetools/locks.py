"""`python -m imagetools locks split`: each variant's lock cut verbatim into the torch stack and the
rest, so that the image installs them in two layers and a FunASR bump leaves the torch layer's
digest as it was (docs/releasing.md, "Layers"). Which package goes where comes from the lock's own
`# via` annotations; `make lock` writes the cut, `release check` fails when it is stale.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ftenv import outcome
from imagetools import ROOT

LOCKS = Path("docker/locks")
#: Where the per-layer locks go (a folder of their own, beside the lock they derive from).
LAYER_LOCKS = LOCKS / "layers"
#: Layer names, in install order.
LAYERS = ("torch", "rest")
#: The torch stack's roots: what changes with a torch or CUDA bump and nothing else.
_ROOT_RE = re.compile(r"^(torch|torchaudio|triton|nvidia-.+|cuda-.+)$")
_ENTRY_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_.\-]*)==(?P<version>[^\s;\\]+)")
_VIA_ONE_RE = re.compile(r"^\s+# via (?P<name>\S+)\s*$")
_VIA_MANY_RE = re.compile(r"^\s+#   (?P<name>\S+)\s*$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(text: str) -> tuple[list[str], dict[str, str], dict[str, set[str]]]:
    """The lock's header lines, each package's verbatim entry and the packages that require it."""
    header: list[str] = []
    entries: dict[str, list[str]] = {}
    via: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        m = _ENTRY_RE.match(line)
        if m:
            current = _norm(m["name"])
            if current in entries:
                raise ValueError(f"lock pins {current} twice")
            entries[current], via[current] = [line], set()
        elif current is None:
            header.append(line)
        else:
            entries[current].append(line)
            v = _VIA_ONE_RE.match(line) or _VIA_MANY_RE.match(line)
            if v and not v["name"].startswith("-"):
                via[current].add(_norm(v["name"]))
    return header, {k: "\n".join(lines) for k, lines in entries.items()}, via


def requirements(text: str) -> list[dict]:
    """Each entry as pip reads it, in the lock's order: its name (normalized), version, requirement
    (`name==version ; marker`) and hashes; the scan, the docs and the GPU kit read the lock here."""
    out = []
    for name, entry in parse(text)[1].items():
        first = re.sub(r"\\\n\s*", " ", entry).splitlines()[0]
        requirement, *hashes = (part.strip() for part in first.split("--hash="))
        version = _ENTRY_RE.match(first)["version"]
        out.append({"name": name, "version": version, "requirement": requirement, "hashes": hashes})
    return out


def wheels_for(python: str, platforms: list[str]) -> list[str]:
    """`pip download`'s flags that pick the lock's wheels for another machine's CPython X.Y and
    platform tags (pip takes each tag exactly: list every one); the emulated build and the GPU kit."""
    abis = [f"cp{python.replace('.', '')}", "abi3", "none"]
    return [
        *(f"--platform={p}" for p in platforms),
        *(f"--python-version={python}", "--implementation=cp", *(f"--abi={a}" for a in abis)),
    ]


def torch_stack(via: dict[str, set[str]]) -> set[str]:
    """The roots, and every package that a package of the stack requires (the closure)."""
    stack = {name for name in via if _ROOT_RE.match(name)}
    while True:
        more = {name for name, parents in via.items() if name not in stack and parents & stack}
        if not more:
            return stack
        stack |= more


def split(text: str, source: str) -> dict[str, str]:
    """Layer name -> the text of its lock; every entry of the source lock is in exactly one."""
    _, entries, via = parse(text)
    stack = torch_stack(via)
    if not stack:
        raise ValueError(f"{source}: no torch, triton, nvidia-* or cuda-* package: nothing to split")
    what = {
        "torch": "the torch stack (torch, torchaudio, triton, nvidia-*, cuda-* and what only they need)",
        "rest": "everything else (installed after the torch stack, with --no-deps)",
    }
    out = {}
    for layer in LAYERS:
        names = sorted(n for n in entries if (n in stack) == (layer == "torch"))
        head = [
            f"# Derived from {source} by `make lock` (imagetools locks split --write): do not edit.",
            f"# Layer {layer}: {what[layer]}.",
        ]
        out[layer] = "\n".join([*head, *(entries[n] for n in names)]) + "\n"
    return out


def lock_path(variant: str) -> Path:
    return LOCKS / f"{variant}.txt"


def layer_path(variant: str, layer: str) -> Path:
    return LAYER_LOCKS / f"{variant}-{layer}.txt"


def check(root: Path, variants) -> list[str]:
    """Each variant's per-layer locks are exactly what its lock derives."""
    problems = []
    for name in variants:
        lock = root / lock_path(name)
        if not lock.is_file():
            problems.append(f"{lock_path(name)} missing: run `make lock`")
            continue
        try:
            derived = split(lock.read_text(), str(lock_path(name)))
        except ValueError as e:
            problems.append(str(e))
            continue
        for layer, text in derived.items():
            path = root / layer_path(name, layer)
            if not path.is_file() or path.read_text() != text:
                problems.append(f"{layer_path(name, layer)} is not what {lock.name} derives: run `make lock`")
    return problems


def write(root: Path, variants) -> None:
    for name in variants:
        derived = split((root / lock_path(name)).read_text(), str(lock_path(name)))
        for layer, text in derived.items():
            path = root / layer_path(name, layer)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {layer_path(name, layer)}", file=sys.stderr)


def run(args) -> int:
    from ftenv.stack import versions

    names = list(versions.load(args.file).variants) if not args.variant else [args.variant]
    if args.write:
        write(ROOT, names)
        return 0
    problems = check(ROOT, names)
    for p in problems:
        print(f"locks: {p}", file=sys.stderr)
    return outcome.EXIT[outcome.FAIL] if problems else 0


def add_parser(sub) -> None:
    p = sub.add_parser("locks", help="per-layer locks derived from docker/locks/<variant>.txt")
    p.add_argument("--file", help="versions file (default: the checkout's)")
    acts = p.add_subparsers(dest="action", required=True)
    s = acts.add_parser("split", help="check (or --write) docker/locks/layers/<variant>-{torch,rest}.txt")
    s.add_argument("--variant", help="one variant (default: all)")
    s.add_argument("--write", action="store_true", help="write the files instead of checking them")
    p.set_defaults(func=run)
