"""`python -m imagetools wheelfacts`: what each torch wheel pins and what its libtorch_cuda.so holds,
read from the wheels themselves and recorded beside this module in wheelfacts.json (`make wheel-facts`).

The guide's per-version rows (docs/cudnn-sdpa-guide.md, "Common installs") are generated from that
record (`<!-- v: wheels.VERSION.FIELD -->`, imagetools.release.generated) and checked against it
(tests/imagetools/release/test_wheelfacts.py), so a cuDNN version or an "affected" answer written by hand
that the wheels do not back fails. The record keeps each wheel's file name and sha256, so anyone can
fetch the same file (`pip download --no-deps torch==V`) and read it again.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from ftenv import outcome, variables
from ftenv.stack import versions
from imagetools import ROOT

RECORD = Path("scripts/imagetools/release/wheelfacts.json")
#: The library of a CUDA build that holds torch's SDPA backend choice (sdp_utils.cpp).
CUDA_LIBRARY = "torch/lib/libtorch_cuda.so"
#: Strings whose presence in libtorch_cuda.so says the build has cuDNN-first ordering and its switch:
#: the function that decides it, and the variable it reads (docs/cudnn-sdpa-guide.md, section 2).
STRINGS = ("check_prefer_cudnn_attention", variables.SDPA_DEPRIORITIZED)
#: The newest cuDNN that check_prefer_cudnn_attention does not put first (it asks for > 9.15.0).
CUDNN_FIRST_ABOVE = (9, 15, 0)
_CHUNK = 1 << 24


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def strings_in(stream, needles: tuple[str, ...]) -> dict[str, bool]:
    """Which needles occur in a binary stream, read in chunks (a libtorch_cuda.so is over a GB)."""
    wanted = {n: n.encode() for n in needles}
    found = dict.fromkeys(needles, False)
    overlap = max(len(b) for b in wanted.values()) - 1
    tail = b""
    for block in iter(lambda: stream.read(_CHUNK), b""):
        window = tail + block
        for name, raw in wanted.items():
            found[name] = found[name] or raw in window
        tail = window[-overlap:]
    return found


def pins(requires_dist: list[str]) -> dict[str, str]:
    """Exact pins (`name==version`) of a wheel's Requires-Dist, without extras or markers."""
    from packaging.requirements import Requirement

    out = {}
    for line in requires_dist:
        req = Requirement(line)
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if len(exact) == 1 and not (req.marker and "extra" in str(req.marker)):
            out[req.name] = exact[0]
    return out


def read_wheel(path: Path) -> dict:
    """One wheel's facts: its file, its version, its pins and, for a CUDA build, the strings."""
    with zipfile.ZipFile(path) as z:
        metadata_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = HeaderParser().parsestr(z.read(metadata_name).decode())
        has_cuda = CUDA_LIBRARY in z.namelist()
        found = None
        if has_cuda:
            with z.open(CUDA_LIBRARY) as lib:
                found = strings_in(lib, STRINGS)
    return {
        "filename": path.name,
        "sha256": _sha256(path),
        "name": metadata["Name"],
        "version": metadata["Version"],
        "pins": pins(metadata.get_all("Requires-Dist") or []),
        "libtorch_cuda": found,  # None: no libtorch_cuda.so (a CPU build)
    }


def load(root: Path = ROOT) -> list[dict]:
    return json.loads((root / RECORD).read_text())["wheels"]


def render(wheels: list[dict]) -> str:
    unique = {(w["filename"], w["sha256"]): w for w in wheels}  # one wheel named twice is read once
    ordered = sorted(unique.values(), key=lambda w: (w["version"], w["filename"]))
    header = {
        "//": "Written by `make wheel-facts` (imagetools wheelfacts) from the wheels named: do not edit."
    }
    return json.dumps(header | {"wheels": ordered}, indent=2) + "\n"


def cuda_wheel(wheels: list[dict], version: str) -> dict:
    """The recorded CUDA build of a torch release ('2.15.0'); KeyError when none was read."""
    for w in wheels:
        cuda = w["libtorch_cuda"] is not None
        if w["name"] == "torch" and versions.public(w["version"]) == version and cuda:
            return w
    raise KeyError(f"no CUDA wheel of torch {version} in {RECORD}: run `make wheel-facts` with it")


def cudnn_pin(wheel: dict) -> tuple[str, str]:
    """(package, version) of the cuDNN the wheel pins."""
    found = [(n, v) for n, v in wheel["pins"].items() if n.startswith("nvidia-cudnn-")]
    if len(found) != 1:
        raise KeyError(f"{wheel['filename']} pins no single nvidia-cudnn-* package: {sorted(wheel['pins'])}")
    return found[0]


def cudnn_first(wheel: dict) -> str:
    """'yes' when the build can put cuDNN first on sm_90/sm_100 with the cuDNN it pins: its library
    holds the rule and its switch, and that cuDNN is above 9.15.0; else 'no'."""
    strings = wheel["libtorch_cuda"]
    _, cudnn = cudnn_pin(wheel)
    has_rule = all(strings[s] for s in STRINGS)
    return "yes" if has_rule and versions.release(cudnn, 3) > CUDNN_FIRST_ABOVE else "no"


#: What `<!-- v: wheels.VERSION.FIELD -->` can ask for (imagetools.release.generated).
FIELDS = {
    "cudnn": lambda w: cudnn_pin(w)[1],
    "cudnn_package": lambda w: cudnn_pin(w)[0],
    "cudnn_first": cudnn_first,
}


def value(key: str, root: Path = ROOT) -> str:
    """'2.15.0.cudnn' -> the cuDNN version torch 2.15.0's CUDA wheel pins."""
    version, _, field = key.rpartition(".")
    if field not in FIELDS:
        raise KeyError(f"wheels.{key}: {field!r} is not one of {', '.join(FIELDS)}")
    return FIELDS[field](cuda_wheel(load(root), version))


def run(args) -> int:
    paths = [Path(p) for p in args.wheels]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"wheelfacts: no such wheel: {', '.join(missing)}", file=sys.stderr)
        return outcome.UNUSABLE
    wheels = []
    for path in paths:
        try:
            wheels.append(read_wheel(path))
        except (zipfile.BadZipFile, StopIteration) as exc:
            print(
                f"wheelfacts: {path} is not a wheel ({exc or 'no METADATA'}): fetch it again", file=sys.stderr
            )
            return outcome.UNUSABLE
        print(f"read {path.name}", file=sys.stderr)
    text = render(wheels)
    if args.write:
        (ROOT / RECORD).write_text(text)
        print(f"wrote {RECORD}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("wheelfacts", help="record torch wheels' pins and libtorch_cuda.so strings")
    p.add_argument("wheels", nargs="+", metavar="WHEEL", help="torch wheel files (pip download --no-deps)")
    p.add_argument("--write", action="store_true", help=f"write {RECORD} (else print it)")
    p.set_defaults(func=run)
