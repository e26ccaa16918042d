"""The image's tags and names, derived from versions.toml: the one home of the tag scheme
(docs/releasing.md says what each tag promises).

- `<stack>-<commit>`: one build of one commit, never pushed twice (`<commit>` is the first 12 hex
  digits of the git SHA, as docker-stacks tags its images). Every build pushes it.
- `<stack>`: the newest release of exactly that stack, `stack_tag()`
  (`funasr<V>-torch<V>-cu<NNN>-cudnn<V>`), which spells every version that matters.
- `<variant>` (`cu130`, `cu128`): the newest release of that variant; the stack may change.
- `latest`: the newest release of the default variant.

The build pushes only `<stack>-<commit>`; a release adds the other tags to the same digest after
the GPU smoke test (or an explicit, recorded decision to release without one).
"""

from __future__ import annotations

import re

from ftenv.stack import versions

#: Hex digits of the commit in `<stack>-<commit>` (docker-stacks uses 12 too).
COMMIT_LEN = 12
LATEST = "latest"

_STACK_TAG_RE = re.compile(
    r"^funasr(?P<funasr>[\w.]+)-torch(?P<torch>[\w.]+)-cu(?P<cu>\d+)-cudnn(?P<cudnn>[\d.]+)$"
)
_COMMIT_RE = re.compile(r"^[0-9a-f]{7,40}$")
_COMMIT_TAG_RE = re.compile(r"^(?P<stack>.+)-(?P<commit>[0-9a-f]{7,40})$")
#: What a registry accepts as a tag (the OCI distribution spec).
TAG_SYNTAX = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def stack_tag(variant: versions.Variant) -> str:
    """`<stack>`, the immutable tag that spells the variant's stack."""
    funasr = variant.python["funasr"]
    return f"funasr{funasr}-torch{variant.torch_base}-{variant.cuda_short}-cudnn{variant.cudnn}"


def ref(variant: versions.Variant, tag: str) -> str:
    """The variant's image in its registry under `tag`."""
    return f"{variant.image['repository']}:{tag}"


def image_ref(variant: versions.Variant) -> str:
    """The variant's image in its registry, by its stack tag."""
    return ref(variant, stack_tag(variant))


def parse_stack_tag(tag: str) -> dict[str, str]:
    """Read a stack tag back into its versions (the inverse of stack_tag)."""
    match = _STACK_TAG_RE.match(tag)
    if not match:
        raise ValueError(f"not an immutable ftenv tag: {tag!r}")
    parts = match.groupdict()
    return {
        "funasr": parts["funasr"],
        "torch": parts["torch"],
        "cuda_short": f"cu{parts['cu']}",
        "cudnn": parts["cudnn"],
    }


def short_commit(sha: str) -> str:
    """The commit part of a tag: the first COMMIT_LEN hex digits of a git SHA."""
    sha = sha.strip().lower()
    if not _COMMIT_RE.match(sha):
        raise ValueError(f"not a git commit SHA: {sha!r}")
    return sha[:COMMIT_LEN]


def commit_tag(variant: versions.Variant, commit: str) -> str:
    """`<stack>-<commit>`, the tag every build pushes. `commit` may be a bake `${COMMIT}`."""
    return f"{stack_tag(variant)}-{commit if commit.startswith('${') else short_commit(commit)}"


def moving_tags(v: versions.Versions, variant: versions.Variant) -> list[str]:
    """The tags a release moves: the variant's name, and `latest` for the default variant."""
    return [variant.name] + ([LATEST] if variant.name == v.default.name else [])


def release_tags(v: versions.Versions, variant: versions.Variant, commit: str) -> list[str]:
    """Every tag a release of `commit` gives the variant's image, the immutable ones first."""
    return [commit_tag(variant, commit), stack_tag(variant), *moving_tags(v, variant)]


def parse(tag: str, v: versions.Versions) -> dict[str, str]:
    """Read any of our tags back: its kind, its variant and, where the tag spells them, the versions.

    Raises ValueError for a tag that is not ours or names a stack versions.toml does not have.
    """
    moving = {t: variant for variant in v.variants.values() for t in moving_tags(v, variant)}
    if tag in moving:
        return {"kind": "moving", "variant": moving[tag].name}
    match = _COMMIT_TAG_RE.match(tag)
    stack, commit = (match["stack"], match["commit"]) if match else (tag, "")
    parts = parse_stack_tag(stack)
    for variant in v.variants.values():
        if stack_tag(variant) == stack:
            if commit:
                return {"kind": "commit", "variant": variant.name, **parts, "commit": commit}
            return {"kind": "stack", "variant": variant.name, **parts}
    raise ValueError(f"tag {tag!r} names a stack that versions.toml does not have")
