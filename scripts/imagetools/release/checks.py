"""`python -m imagetools release check`: what can be checked of a release without GitHub
(`make release-check`). Each sub-check returns its problems; one that cannot read its input
reports that, so a missing file is never a pass.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from ftenv.stack import versions
from imagetools import locks
from imagetools.bake import (
    ATTEST,
    BAKE_FILE,
    DOCKERFILE,
    OUTPUT,
    annotations,
    render_bake,
    resolve_target,
)
from imagetools.build_args import build_args, labels
from imagetools.release import generated, workflow_rules
from imagetools.tags import TAG_SYNTAX, commit_tag, parse, ref, release_tags, short_commit

WORKFLOWS = Path(".github/workflows")
_USES_RE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>[^\s#]+)\s*(?:#\s*(?P<comment>.*))?$")
_SHA_PIN_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
_VERSION_COMMENT_RE = re.compile(r"^v\d+(\.\d+)*\b")
#: What the workflow sets per build (REVISION the full SHA), for the checks that resolve a build.
RUNTIME = {"REVISION": "f" * 40, "CREATED": "2026-01-01T00:00:00Z"}


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
    runtime = RUNTIME | {"COMMIT": short_commit(commit)}
    for variant in v.variants.values():
        try:
            t = resolve_target(data, variant.name, runtime)
        except ValueError as e:
            problems.append(str(e))
            continue
        want_tags = [ref(variant, commit_tag(variant, commit))]
        want_labels = labels(variant, revision=RUNTIME["REVISION"], created=RUNTIME["CREATED"])
        want_args = build_args(variant) | RUNTIME
        for what, got, want in [
            ("tags", t.get("tags"), want_tags),
            ("labels", t.get("labels"), want_labels),
            ("args", t.get("args"), want_args),
            ("platforms", t.get("platforms"), list(variant.platforms)),
            ("annotations", sorted(t.get("annotations", [])), sorted(annotations(want_labels))),
            ("attest", t.get("attest"), ATTEST),
            ("output", t.get("output"), OUTPUT),
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
            if not TAG_SYNTAX.match(tag):
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


def _dockerfile_parser(text: str, build_args: dict[str, str] | None = None):
    """dockerfile-parse over the text, build args substituted (lazily imported: the image's own
    `ftenv` has no need of it)."""
    import io

    from dockerfile_parse import DockerfileParser

    return DockerfileParser(fileobj=io.BytesIO(text.encode()), build_args=build_args, env_replace=True)


def dockerfile_labels(text: str, build_args: dict[str, str]) -> dict[str, str]:
    """The Dockerfile's LABELs, with the build args substituted."""
    return dict(_dockerfile_parser(text, build_args).labels)


def check_labels(v: versions.Versions, dockerfile_text: str) -> list[str]:
    """Every label of build_args.labels() is in the Dockerfile, with the value versions.toml derives."""
    problems = []
    for variant in v.variants.values():
        got = dockerfile_labels(dockerfile_text, build_args(variant) | RUNTIME)
        want = labels(variant, revision=RUNTIME["REVISION"], created=RUNTIME["CREATED"])
        for key, value in want.items():
            if key not in got:
                problems.append(f"{DOCKERFILE}: label {key} missing")
            elif got[key] != value:
                problems.append(f"{DOCKERFILE} ({variant.name}): label {key}={got[key]!r}, derived {value!r}")
        problems += [
            f"{DOCKERFILE}: label {k} is not in build_args.labels()" for k in got.keys() - want.keys()
        ]
    return sorted(set(problems))


def check_workflows(directory: Path) -> list[str]:
    """Every `uses:` is a local action, or pinned by a full commit SHA with a `# vX.Y.Z` comment, or a
    docker:// image pinned by digest."""
    problems = []
    files = workflow_rules.workflow_files(directory)
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


#: What each layer-lock install looks like in the Dockerfile, in the order they must come.
LAYER_INSTALLS = tuple(f"locks/{layer}.txt" for layer in locks.LAYERS)
#: Build args that change with a FunASR/transformers/ftenv bump or every build: declaring one before
#: the torch layer would rebuild that layer on each bump (an ARG's value is part of the cache key of
#: every RUN after its declaration).
VOLATILE_ARGS = (
    "TRANSFORMERS_VERSION",
    "FUNASR_VERSION",
    "MODELSCOPE_VERSION",
    "IMAGE_REF",
    "IMAGE_TAG",
    "REVISION",
    "CREATED",
)


def check_layer_order(dockerfile_text: str) -> list[str]:
    """The lock is installed torch stack first, then the rest, then ftenv; nothing that changes with a
    FunASR bump (a volatile ARG, versions.toml, our sources) comes before the torch layer."""
    steps = [(i["instruction"], i["value"]) for i in _dockerfile_parser(dockerfile_text).structure]
    installs = []
    for n, (instr, value) in enumerate(steps):
        for layer, marker in zip(locks.LAYERS, LAYER_INSTALLS, strict=True):
            if instr == "RUN" and "pip install" in value and f"-r /opt/ftenv/{marker}" in value:
                installs.append((layer, n))
    found = [layer for layer, _ in installs]
    if found != list(locks.LAYERS):
        return [f"{DOCKERFILE}: lock layers installed as {found}, expected {list(locks.LAYERS)}, in order"]
    torch_at = installs[0][1]
    problems = []
    for instr, value in steps[:torch_at]:
        if instr == "ARG" and value.split("=")[0].strip() in VOLATILE_ARGS:
            problems.append(f"{DOCKERFILE}: ARG {value.split('=')[0]} is declared before the torch layer")
        if instr in ("COPY", "ADD") and any(s in value for s in ("versions.toml", "scripts/", "-rest.txt")):
            problems.append(f"{DOCKERFILE}: `{instr} {value}` comes before the torch layer")
    ftenv_at = next((n for n, (i, val) in enumerate(steps) if i == "COPY" and "scripts/ftenv" in val), None)
    if ftenv_at is None or ftenv_at < installs[-1][1]:
        problems.append(f"{DOCKERFILE}: ftenv must be copied after the lock layers")
    return problems


def _read(root: Path, rel: Path) -> str | None:
    path = root / rel
    return path.read_text() if path.is_file() else None


def _bake(root: Path, v: versions.Versions) -> list[str]:
    text = _read(root, BAKE_FILE)
    return [f"{BAKE_FILE} missing: run `make bake`"] if text is None else check_bake(v, text)


def _dockerfile(check: Callable[[str], list[str]]) -> Callable[[Path, versions.Versions], list[str]]:
    def run(root: Path, v: versions.Versions) -> list[str]:
        text = _read(root, DOCKERFILE)
        return [f"{DOCKERFILE} missing"] if text is None else check(text)

    return run


#: Every sub-check of `release check`, by name; check() runs them all.
SUBCHECKS: dict[str, Callable[[Path, versions.Versions], list[str]]] = {
    "tags": lambda root, v: check_tags(v),
    "bake": _bake,
    "labels": lambda root, v: _dockerfile(lambda text: check_labels(v, text))(root, v),
    "layers": _dockerfile(check_layer_order),
    "locks": lambda root, v: locks.check(root, v.variants),
    "pins": lambda root, v: check_workflows(root / WORKFLOWS),
    "workflow": lambda root, v: workflow_rules.check(root / WORKFLOWS),
    "generated": lambda root, v: generated.check(root),
}


def check(root: Path, v: versions.Versions | None = None) -> list[str]:
    """Every sub-check's problems, each prefixed with the sub-check's name."""
    v = v or versions.load(root / "versions.toml")
    return [f"{name}: {p}" for name, sub in SUBCHECKS.items() for p in sub(root, v)]
