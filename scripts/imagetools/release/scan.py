"""`python -m imagetools scan`: known vulnerabilities in the lock and a built image (`make scan`) with
the release workflow's scanner (grype) and policy (docs/releasing.md, "Known vulnerabilities").
A critical finding with a fix fails (exit 1); a scan that could not run exits 2, never a pass.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from imagetools import locks

#: The release gate (the workflow's scan-action inputs say the same).
FAIL_ON = "critical"
OK, FINDINGS, NOT_SCANNED = 0, 1, 2
#: grype's words when it cannot fetch or open its database.
_DB_ERRORS = re.compile(
    r"failed to (load|update|download|fetch|check)\b.*\b(db|database)\b"
    r"|\b(db|database)\b.*(unavailable|no such host|connection refused|timeout|unreachable)",
    re.I,
)


def lock_sbom(lock_text: str, name: str) -> dict:
    """A CycloneDX 1.5 SBOM of a lock: one library component (with its purl) per pinned package."""
    components = []
    for entry in sorted(locks.requirements(lock_text), key=lambda e: e["name"]):
        pkg, version = entry["name"], entry["version"]
        components.append(
            {
                "type": "library",
                "name": pkg,
                "version": version,
                "purl": f"pkg:pypi/{pkg}@{version}",
            }
        )
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {"component": {"type": "application", "name": name}},
        "components": components,
    }


def grype(target: str, grype_bin: str = "grype") -> tuple[int, str]:
    """Run grype with the release policy; (OK | FINDINGS | NOT_SCANNED, what it printed)."""
    exe = shutil.which(grype_bin)
    if exe is None:
        return NOT_SCANNED, (
            "grype is not installed, so nothing was scanned: install it (https://github.com/anchore/grype, "
            "a single binary) and run `make scan` again"
        )
    cmd = [exe, target, "--fail-on", FAIL_ON, "--only-fixed", "-o", "table"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    text = (out.stdout + out.stderr).strip()
    if out.returncode != 0 and _DB_ERRORS.search(text):
        return NOT_SCANNED, (
            "the vulnerability database is unreachable from this machine, so nothing was scanned "
            f"(grype: {text.splitlines()[-1] if text else 'no output'}); run `make scan` where "
            "grype can download its database, or rely on the release workflow's scan"
        )
    if out.returncode == 0:
        return OK, text
    if "discovered vulnerabilities at or above the severity threshold" in text:
        return FINDINGS, text
    return NOT_SCANNED, f"grype failed (exit {out.returncode}): {text[-500:]}"


def scan(root: Path, variant: str, image: str | None, grype_bin: str = "grype") -> int:
    """Scan the lock, then the image if given; the worst result wins (NOT_SCANNED over FINDINGS)."""
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        sbom = Path(tmp) / f"lock-{variant}.cdx.json"
        lock = root / locks.lock_path(variant)
        sbom.write_text(json.dumps(lock_sbom(lock.read_text(), f"{variant} lock")))
        targets = [(f"lock {lock.relative_to(root)}", f"sbom:{sbom}")]
        if image:
            archive = Path(tmp) / "image.tar"
            save = ["podman", "save", "--format", "docker-archive", "-o", str(archive), image]
            saved = subprocess.run(save)
            if saved.returncode != 0:
                print(f"scan: could not save {image} with podman: not scanned", file=sys.stderr)
                results.append(NOT_SCANNED)
            else:
                targets.append((f"image {image}", f"docker-archive:{archive}"))
        for what, target in targets:
            code, text = grype(target, grype_bin)
            label = {OK: "OK", FINDINGS: f"FAIL (a {FAIL_ON} finding with a fix)", NOT_SCANNED: "NOT SCANNED"}
            print(f"scan: {what}: {label[code]}", file=sys.stderr)
            if text:
                print(text, file=sys.stderr if code == NOT_SCANNED else sys.stdout)
            results.append(code)
    return max(results)


def run(args) -> int:
    if args.lock_sbom:
        text = (Path(args.root) / locks.lock_path(args.variant)).read_text()
        print(json.dumps(lock_sbom(text, f"{args.variant} lock"), indent=1))
        return OK
    return scan(Path(args.root), args.variant, args.image)


def add_parser(sub) -> None:
    p = sub.add_parser("scan", help="known vulnerabilities in the lock and the image (grype; `make scan`)")
    p.add_argument("variant")
    p.add_argument("--image", help="a local image to scan too (podman)")
    p.add_argument("--lock-sbom", action="store_true", help="print the lock's CycloneDX SBOM and exit")
    p.add_argument("--root", default=str(locks.ROOT), help="the checkout (default: this one)")
    p.set_defaults(func=run)
