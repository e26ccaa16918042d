"""`python -m imagetools release ACTION`: the release's command line (docs/releasing.md); its pieces
are the modules beside it and the shared tags, build args and bake file at imagetools' top.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from ftenv import outcome
from ftenv.stack import versions
from imagetools import ROOT, bake, tags
from imagetools.release import checks, manifest

#: `release exists` exit codes: the workflow rebuilds only on NOT_FOUND; any other failure stops it.
EXISTS, NOT_FOUND, QUERY_FAILED = 0, 3, 1
#: What buildx prints when the registry answers that the tag does not exist (and only then).
_NOT_FOUND_MARKERS = (": not found", "manifest unknown", "MANIFEST_UNKNOWN")


def query_registry(ref: str, inspect: list[str] | None = None) -> tuple[int, str]:
    """Does `ref` exist in its registry? (code, digest or the registry's error)."""
    cmd = inspect or ["docker", "buildx", "imagetools", "inspect"]
    try:
        out = subprocess.run(
            [*cmd, ref, "--format", "{{.Manifest.Digest}}"], capture_output=True, text=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return QUERY_FAILED, f"could not run {cmd[0]}: {e}"
    if out.returncode == 0:
        digest = out.stdout.strip()
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            return QUERY_FAILED, f"unexpected inspect output: {digest[:200]!r}"
        return EXISTS, digest
    err = out.stderr.strip()
    if any(marker in err for marker in _NOT_FOUND_MARKERS):
        return NOT_FOUND, err
    return QUERY_FAILED, err or f"inspect exited {out.returncode}"


def run(args: argparse.Namespace) -> int:
    v = versions.load(args.file)
    if args.action == "tags":
        variant = v.variant(args.variant)
        if args.release:
            refs = tags.release_tags(v, variant, args.commit)
        else:
            refs = [tags.commit_tag(variant, args.commit)]
        print("\n".join(tags.ref(variant, t) for t in refs))
    elif args.action == "parse":
        print(json.dumps(tags.parse(args.tag, v)))
    elif args.action == "matrix":
        rows = [
            {"variant": x.name, "image": x.image["repository"], "platforms": ",".join(x.platforms)}
            for x in v.variants.values()
        ]
        print(json.dumps(rows))
    elif args.action == "bake":
        if args.write:
            (ROOT / bake.BAKE_FILE).write_text(bake.render_bake(v))
            print(f"wrote {bake.BAKE_FILE}", file=sys.stderr)
        else:
            print(bake.render_bake(v), end="")
    elif args.action == "manifest":
        labels = json.loads(Path(args.labels).read_text()) if args.labels else {}
        pip, dpkg = Path(args.pip).read_text(), Path(args.dpkg).read_text()
        print(manifest.manifest(args.image, args.platform, labels, pip, dpkg))
    elif args.action == "exists":
        code, detail = query_registry(args.ref)
        if code == EXISTS:
            print(detail)
        else:
            what = "not found" if code == NOT_FOUND else "registry query failed (not a not-found)"
            print(f"release exists: {args.ref}: {what}: {detail}", file=sys.stderr)
        return code
    elif args.action == "check":
        root = Path(args.root)
        # Another checkout is checked against its own versions.toml, unless --file names one.
        v = v if args.file else versions.load(root / "versions.toml")
        problems = checks.check(root, v)
        for p in problems:
            print(f"release-check: {p}", file=sys.stderr)
        if problems:
            print(f"release-check: FAILED, {len(problems)} problem(s)", file=sys.stderr)
            return outcome.EXIT[outcome.FAIL]
        names = ", ".join(checks.SUBCHECKS)
        print(f"release-check: OK ({len(v.variants)} variants; {names})")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("release", help="image tags, bake file and release checks (docs/releasing.md)")
    p.add_argument("--file", help="versions file (default: the checkout's or the image's)")
    acts = p.add_subparsers(dest="action", required=True)
    t = acts.add_parser("tags", help="image refs a build (or, with --release, a release) pushes")
    t.add_argument("variant", help="a variant of versions.toml (`release matrix` lists them)")
    t.add_argument("--commit", required=True, help="git SHA (the first 12 hex digits go in the tag)")
    t.add_argument("--release", action="store_true", help="add the stack and moving tags")
    pa = acts.add_parser("parse", help="read a tag back into its versions (JSON)")
    pa.add_argument("tag", help="one of our image tags, without the `repository:` part")
    acts.add_parser("matrix", help="the workflow's build matrix (JSON)")
    b = acts.add_parser("bake", help=f"print {bake.BAKE_FILE} as versions.toml derives it")
    b.add_argument("--write", action="store_true", help=f"write {bake.BAKE_FILE}")
    m = acts.add_parser("manifest", help="markdown manifest of an image from pip freeze and dpkg output")
    m.add_argument("--image", required=True, help="the image the manifest is of (its heading)")
    m.add_argument("--platform", required=True, help="the platform the packages were read on")
    m.add_argument("--pip", required=True, help="file with `pip freeze --all` output")
    m.add_argument("--dpkg", required=True, help="file with `dpkg-query -W -f '${Package}\\t${Version}...'`")
    m.add_argument("--labels", help="file with the image's labels as JSON")
    e = acts.add_parser(
        "exists",
        help=f"digest of REF if it exists (exit {EXISTS}); exit {NOT_FOUND} only when the registry "
        f"says not found, {QUERY_FAILED} on any other error",
    )
    e.add_argument("ref", help="image reference, REPOSITORY:TAG or REPOSITORY@DIGEST")
    c = acts.add_parser("check", help="every release sub-check (exit 1 when any finds a problem)")
    c.add_argument(
        "--root",
        default=str(ROOT),
        help="the checkout to check, against its versions.toml unless --file is given (default: this one)",
    )
    p.set_defaults(func=run)
