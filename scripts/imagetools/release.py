"""`python -m imagetools release`: image tags, bake file and release checks, derived from versions.toml.

Tags (docs/releasing.md says what each one promises):

- `<stack>-<commit>`: one build of one commit, never pushed twice (`<commit>` is the first 12 hex
  digits of the git SHA, as docker-stacks tags its images). Every build pushes it.
- `<stack>`: the newest release of exactly that stack; `<stack>` is `Variant.tag`,
  `funasr1.4.16-torch2.11.0-cu130-cudnn9.19.0.56`, and spells every version that matters.
- `<variant>` (`cu130`, `cu128`): the newest release of that variant; the stack may change.
- `latest`: the newest release of the default variant.

The build pushes only `<stack>-<commit>`; a release adds the other tags to the same digest after
the GPU smoke test (`docker buildx imagetools create`), so no moving tag ever points at an image
that did not pass it.

`docker/docker-bake.json` is generated here (`make bake`) and committed;
`python -m imagetools release check` fails when it differs from what versions.toml derives, and checks
the tag scheme, the Dockerfile's labels and the pinning of the workflows' actions.
JSON rather than HCL: buildx reads both, the standard library writes and reads JSON, and a
generated file needs none of HCL's expressions (only `${VAR}`, which bake's JSON supports too).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ftenv.build import versions

ROOT = Path(__file__).resolve().parents[2]
BAKE_FILE = Path("docker/docker-bake.json")
DOCKERFILE = Path("docker/Dockerfile")
WORKFLOWS = Path(".github/workflows")

#: Hex digits of the commit in `<stack>-<commit>` (docker-stacks uses 12 too).
COMMIT_LEN = 12
#: Bake variables, set from the environment by the workflow (defaults are for local builds).
BAKE_VARIABLES = {"COMMIT": "dev", "REVISION": "unknown", "CREATED": "unknown"}
#: Labels common to every variant: the `_labels` target holds them once.
SHARED_LABELS = (
    "org.opencontainers.image.title",
    "org.opencontainers.image.source",
    "org.opencontainers.image.revision",
    "org.opencontainers.image.created",
)
ATTEST = ["type=provenance,mode=max", "type=sbom"]
LATEST = "latest"

_COMMIT_RE = re.compile(r"^[0-9a-f]{7,40}$")
_COMMIT_TAG_RE = re.compile(r"^(?P<stack>.+)-(?P<commit>[0-9a-f]{7,40})$")
#: What a registry accepts as a tag (the OCI distribution spec).
_TAG_SYNTAX = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_USES_RE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>[^\s#]+)\s*(?:#\s*(?P<comment>.*))?$")
_SHA_PIN_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
_VERSION_COMMENT_RE = re.compile(r"^v\d+(\.\d+)*\b")


# --- tags ------------------------------------------------------------------------------------------


def short_commit(sha: str) -> str:
    """The commit part of a tag: the first COMMIT_LEN hex digits of a git SHA."""
    sha = sha.strip().lower()
    if not _COMMIT_RE.match(sha):
        raise ValueError(f"not a git commit SHA: {sha!r}")
    return sha[:COMMIT_LEN]


def commit_tag(variant: versions.Variant, commit: str) -> str:
    """`<stack>-<commit>`, the tag every build pushes. `commit` may be a bake `${COMMIT}`."""
    return f"{variant.tag}-{commit if commit.startswith('${') else short_commit(commit)}"


def moving_tags(v: versions.Versions, variant: versions.Variant) -> list[str]:
    """The tags a release moves: the variant's name, and `latest` for the default variant."""
    return [variant.name] + ([LATEST] if variant.name == v.default.name else [])


def release_tags(v: versions.Versions, variant: versions.Variant, commit: str) -> list[str]:
    """Every tag a release of `commit` gives the variant's image, the immutable ones first."""
    return [commit_tag(variant, commit), variant.tag, *moving_tags(v, variant)]


def parse(tag: str, v: versions.Versions) -> dict[str, str]:
    """Read any of our tags back: its kind, its variant and, where the tag spells them, the versions.

    Raises ValueError for a tag that is not ours or names a stack versions.toml does not have.
    """
    moving = {t: variant for variant in v.variants.values() for t in moving_tags(v, variant)}
    if tag in moving:
        return {"kind": "moving", "variant": moving[tag].name}
    match = _COMMIT_TAG_RE.match(tag)
    stack, commit = (match["stack"], match["commit"]) if match else (tag, "")
    parts = versions.parse_tag(stack)
    for variant in v.variants.values():
        if variant.tag == stack:
            if commit:
                return {"kind": "commit", "variant": variant.name, **parts, "commit": commit}
            return {"kind": "stack", "variant": variant.name, **parts}
    raise ValueError(f"tag {tag!r} names a stack that versions.toml does not have")


# --- the bake file ---------------------------------------------------------------------------------


def cache_ref(variant: versions.Variant) -> str:
    """Registry cache, one per variant, in a package of its own beside the images."""
    return f"{variant.image['repository']}-buildcache:{variant.name}"


def _annotations(labels: dict[str, str]) -> list[str]:
    # OCI annotations on the index (what `imagetools inspect` shows) and on each manifest.
    return [f"index,manifest:{k}={val}" for k, val in labels.items()]


def bake(v: versions.Versions) -> dict:
    """The bake file: `_common` and `_labels` shared, one target per variant, group `default`."""
    some = next(iter(v.variants.values()))
    runtime = {"revision": "${REVISION}", "created": "${CREATED}"}
    shared = {k: val for k, val in some.labels(**runtime).items() if k in SHARED_LABELS}
    targets: dict[str, dict] = {
        "_common": {
            "context": ".",
            "dockerfile": str(DOCKERFILE),
            "pull": True,
            "attest": ATTEST,
            "args": {"REVISION": "${REVISION}", "CREATED": "${CREATED}"},
        },
        "_labels": {"labels": shared, "annotations": _annotations(shared)},
    }
    for variant in v.variants.values():
        own = {k: val for k, val in variant.labels(**runtime).items() if k not in SHARED_LABELS}
        targets[variant.name] = {
            "inherits": ["_common", "_labels"],
            "platforms": list(variant.platforms),
            "args": variant.build_args(),
            "labels": own,
            "annotations": _annotations(own),
            "tags": [f"{variant.image['repository']}:{commit_tag(variant, '${COMMIT}')}"],
            "cache-from": [f"type=registry,ref={cache_ref(variant)}"],
            "cache-to": [f"type=registry,ref={cache_ref(variant)},mode=max,ignore-error=true"],
        }
    return {
        "variable": {name: {"default": default} for name, default in BAKE_VARIABLES.items()},
        "group": {"default": {"targets": list(v.variants)}},
        "target": targets,
    }


def render_bake(v: versions.Versions) -> str:
    header = {"//": "Generated from versions.toml by `make bake`: do not edit."}
    return json.dumps(header | bake(v), indent=2) + "\n"


def _interpolate(value, variables: dict[str, str]):
    if isinstance(value, str):

        def sub(m: re.Match) -> str:
            if m[1] not in variables:
                raise ValueError(f"bake file uses an undefined variable ${{{m[1]}}}")
            return variables[m[1]]

        return _VAR_RE.sub(sub, value)
    if isinstance(value, list):
        return [_interpolate(x, variables) for x in value]
    if isinstance(value, dict):
        return {k: _interpolate(x, variables) for k, x in value.items()}
    return value


#: How buildx merges an inherited attribute (bake/bake.go, Target.Merge): maps merge key by key,
#: these lists append, every other attribute is replaced.
_MERGED_MAPS = ("args", "labels")
_APPENDED_LISTS = ("annotations", "attest", "cache-from")


def resolve_target(data: dict, name: str, overrides: dict[str, str] | None = None) -> dict:
    """A target of a bake file as buildx resolves it: inherits merged, `${VAR}` substituted."""
    variables = {k: spec.get("default", "") for k, spec in data.get("variable", {}).items()}
    variables |= overrides or {}
    targets = data.get("target", {})

    def merged(n: str, seen: tuple[str, ...]) -> dict:
        if n in seen:
            raise ValueError(f"bake target {n!r} inherits itself")
        if n not in targets:
            raise ValueError(f"bake target {n!r} is not defined")
        out: dict = {}
        for parent in [*targets[n].get("inherits", []), None]:
            layer = merged(parent, (*seen, n)) if parent else targets[n]
            for key, val in layer.items():
                if key == "inherits":
                    continue
                if key in _MERGED_MAPS:
                    out[key] = {**out.get(key, {}), **val}
                elif key in _APPENDED_LISTS:
                    out[key] = [*out.get(key, []), *val]
                else:
                    out[key] = val
        return out

    return _interpolate(merged(name, ()), variables)


# --- checks ----------------------------------------------------------------------------------------


def check_bake(v: versions.Versions, text: str, commit: str = "0123456789abcdef") -> list[str]:
    """The committed bake file against versions.toml: byte for byte, and target by target."""
    problems = []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return [f"{BAKE_FILE}: not JSON: {e}"]
    if text != render_bake(v):
        problems.append(f"{BAKE_FILE} is not what versions.toml derives: run `make bake`")
    default = data.get("group", {}).get("default", {}).get("targets", [])
    if sorted(default) != sorted(v.variants):
        problems.append(f"bake group default {sorted(default)} != variants {sorted(v.variants)}")
    # What the workflow sets: COMMIT is the short commit (`${GITHUB_SHA::12}`), REVISION the full SHA.
    runtime = {"REVISION": "f" * 40, "CREATED": "2026-01-01T00:00:00Z", "COMMIT": short_commit(commit)}
    for variant in v.variants.values():
        try:
            t = resolve_target(data, variant.name, runtime)
        except ValueError as e:
            problems.append(str(e))
            continue
        want_tags = [f"{variant.image['repository']}:{commit_tag(variant, commit)}"]
        want_labels = variant.labels(revision=runtime["REVISION"], created=runtime["CREATED"])
        want_args = variant.build_args() | {"REVISION": runtime["REVISION"], "CREATED": runtime["CREATED"]}
        for what, got, want in [
            ("tags", t.get("tags"), want_tags),
            ("labels", t.get("labels"), want_labels),
            ("args", t.get("args"), want_args),
            ("platforms", t.get("platforms"), list(variant.platforms)),
            ("annotations", sorted(t.get("annotations", [])), sorted(_annotations(want_labels))),
            ("attest", t.get("attest"), ATTEST),
        ]:
            if got != want:
                problems.append(f"bake target {variant.name}: {what} {_diff(got, want)}")
    return problems


def _diff(got, want) -> str:
    """What differs, short: per key for maps, per item for lists."""
    if isinstance(got, dict) and isinstance(want, dict):
        keys = sorted(k for k in got.keys() | want.keys() if got.get(k) != want.get(k))
        return "; ".join(
            f"{k}: {got.get(k, '(missing)')!r} != derived {want.get(k, '(none)')!r}" for k in keys
        )
    if isinstance(got, list) and isinstance(want, list):
        extra, missing = [x for x in got if x not in want], [x for x in want if x not in got]
        if extra or missing:
            return f"has {extra!r}, lacks derived {missing!r}"
    return f"{got!r} != derived {want!r}"


def check_tags(v: versions.Versions, commit: str = "0123456789abcdef") -> list[str]:
    """Every tag is valid, unique across variants, and parses back into its variant's versions."""
    problems, owner = [], {}
    for variant in v.variants.values():
        for tag in release_tags(v, variant, commit):
            if not _TAG_SYNTAX.match(tag):
                problems.append(f"{variant.name}: {tag!r} is not a valid image tag")
            if owner.setdefault(tag, variant.name) != variant.name:
                problems.append(f"tag {tag!r} belongs to both {owner[tag]} and {variant.name}")
                continue
            try:
                got = parse(tag, v)
            except ValueError as e:
                problems.append(f"{variant.name}: {e}")
                continue
            want = {"variant": variant.name}
            if got["kind"] != "moving":
                want |= {
                    "funasr": variant.python["funasr"],
                    "torch": variant.torch_base,
                    "cuda_short": variant.cuda_short,
                    "cudnn": variant.cudnn,
                }
            if got["kind"] == "commit":
                want["commit"] = short_commit(commit)
            if {k: got.get(k) for k in want} != want:
                problems.append(f"{variant.name}: tag {tag!r} parses to {got}, expected {want}")
    return problems


def dockerfile_labels(text: str, build_args: dict[str, str]) -> dict[str, str]:
    """The Dockerfile's LABELs, with the build args substituted (dockerfile-parse, lazily imported:
    the image's own `ftenv` has no need of it)."""
    import io

    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(fileobj=io.BytesIO(text.encode()), build_args=build_args, env_replace=True)
    return dict(parser.labels)


def check_labels(v: versions.Versions, dockerfile_text: str) -> list[str]:
    """Every label of Variant.labels() is in the Dockerfile, with the value versions.toml derives."""
    problems = []
    runtime = {"REVISION": "f" * 40, "CREATED": "2026-01-01T00:00:00Z"}
    for variant in v.variants.values():
        got = dockerfile_labels(dockerfile_text, variant.build_args() | runtime)
        want = variant.labels(revision=runtime["REVISION"], created=runtime["CREATED"])
        for key, value in want.items():
            if key not in got:
                problems.append(f"{DOCKERFILE}: label {key} missing")
            elif got[key] != value:
                problems.append(f"{DOCKERFILE} ({variant.name}): label {key}={got[key]!r}, derived {value!r}")
        problems += [f"{DOCKERFILE}: label {k} is not in Variant.labels()" for k in got.keys() - want.keys()]
    return sorted(set(problems))


def check_workflows(directory: Path) -> list[str]:
    """Every `uses:` is a local action, or pinned by a full commit SHA with a `# vX.Y.Z` comment, or a
    docker:// image pinned by digest."""
    problems = []
    files = sorted([*directory.glob("*.yml"), *directory.glob("*.yaml")])
    if not files:
        return [f"{directory}: no workflows"]
    for path in files:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = _USES_RE.match(line)
            if not m:
                continue
            ref, comment = m["ref"].strip("'\""), (m["comment"] or "").strip()
            where = f"{path.name}:{n}"
            if ref.startswith("./"):
                continue
            if ref.startswith("docker://"):
                if "@sha256:" not in ref:
                    problems.append(f"{where}: {ref} is not pinned by digest")
            elif not _SHA_PIN_RE.match(ref):
                problems.append(f"{where}: {ref} is not pinned by a 40-hex commit SHA")
            elif not _VERSION_COMMENT_RE.match(comment):
                problems.append(f"{where}: {ref} has no `# vX.Y.Z` comment naming the pinned release")
    return problems


def check(root: Path = ROOT, v: versions.Versions | None = None) -> list[str]:
    v = v or versions.load(root / "versions.toml")
    bake_path = root / BAKE_FILE
    problems = check_tags(v)
    problems += check_bake(v, bake_path.read_text()) if bake_path.is_file() else [f"{BAKE_FILE} missing"]
    problems += check_labels(v, (root / DOCKERFILE).read_text())
    problems += check_workflows(root / WORKFLOWS)
    return problems


# --- the release manifest (docker-stacks' "manifest" of an image) ----------------------------------


def manifest(image: str, platform: str, labels: dict[str, str], pip_freeze: str, dpkg: str) -> str:
    """Markdown: the image, its labels, its Python packages (pip freeze) and OS packages (dpkg)."""
    lines = [f"## `{image}` ({platform})", "", "| label | value |", "|---|---|"]
    lines += [f"| `{k}` | `{val}` |" for k, val in sorted(labels.items())]
    pips = sorted(line.strip() for line in pip_freeze.splitlines() if line.strip())
    lines += ["", f"### Python packages ({len(pips)}, `pip freeze --all`)", "", "```", *pips, "```"]
    debs = sorted(tuple(line.split("\t")) for line in dpkg.splitlines() if line.strip())
    lines += ["", f"### OS packages ({len(debs)}, `dpkg-query -W`)", "", "| package | version | arch |"]
    lines += ["|---|---|---|", *(f"| {' | '.join(d)} |" for d in debs), ""]
    return "\n".join(lines)


# --- CLI -------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    v = versions.load(args.file)
    if args.action == "tags":
        variant = v.variant(args.variant)
        tags = release_tags(v, variant, args.commit) if args.release else [commit_tag(variant, args.commit)]
        repo = variant.image["repository"]
        print("\n".join(f"{repo}:{t}" for t in tags))
    elif args.action == "parse":
        print(json.dumps(parse(args.tag, v)))
    elif args.action == "matrix":
        rows = [
            {"variant": x.name, "image": x.image["repository"], "platforms": ",".join(x.platforms)}
            for x in v.variants.values()
        ]
        print(json.dumps(rows))
    elif args.action == "bake":
        path = ROOT / BAKE_FILE
        if args.write:
            path.write_text(render_bake(v))
            print(f"wrote {BAKE_FILE}", file=sys.stderr)
        else:
            print(render_bake(v), end="")
    elif args.action == "manifest":
        labels = json.loads(Path(args.labels).read_text()) if args.labels else {}
        print(
            manifest(
                args.image, args.platform, labels, Path(args.pip).read_text(), Path(args.dpkg).read_text()
            )
        )
    elif args.action == "check":
        problems = check(v=v)
        for p in problems:
            print(f"release-check: {p}", file=sys.stderr)
        if problems:
            return 1
        n = len(v.variants)
        print(f"release-check: OK ({n} variants: bake file, tags, labels, workflow pins)")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("release", help="image tags, bake file and release checks (docs/releasing.md)")
    p.add_argument("--file", help="versions file (default: the checkout's or the image's)")
    acts = p.add_subparsers(dest="action", required=True)
    t = acts.add_parser("tags", help="image refs a build (or, with --release, a release) pushes")
    t.add_argument("variant")
    t.add_argument("--commit", required=True, help="git SHA (the first 12 hex digits go in the tag)")
    t.add_argument("--release", action="store_true", help="add the stack and moving tags")
    acts.add_parser("parse", help="read a tag back into its versions (JSON)").add_argument("tag")
    acts.add_parser("matrix", help="the workflow's build matrix (JSON)")
    b = acts.add_parser("bake", help=f"print {BAKE_FILE} as versions.toml derives it")
    b.add_argument("--write", action="store_true", help=f"write {BAKE_FILE}")
    m = acts.add_parser("manifest", help="markdown manifest of an image from pip freeze and dpkg output")
    m.add_argument("--image", required=True)
    m.add_argument("--platform", required=True)
    m.add_argument("--pip", required=True, help="file with `pip freeze --all` output")
    m.add_argument("--dpkg", required=True, help="file with `dpkg-query -W -f '${Package}\\t${Version}...'`")
    m.add_argument("--labels", help="file with the image's labels as JSON")
    acts.add_parser("check", help="bake file, tags, labels and workflow pins against versions.toml")
    p.set_defaults(func=run)
