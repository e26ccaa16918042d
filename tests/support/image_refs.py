"""How the examples name the image: by something that never moves (the digest, or the
`<stack>-<commit>` tag docs/releasing.md defines), never by a tag a release moves (`<stack>`, the
variant, `latest`, or no tag). A moving tag lets two nodes or pods of one job, or a job and its
requeue, run two builds."""

from __future__ import annotations

import re

from ftenv.stack import versions
from imagetools import tags

#: What an example spells in place of the commit of a release not yet known: the user fills it in.
COMMIT_PLACEHOLDER = "<commit>"
#: Commands that read a moving tag's digest: the one place an example may name a moving tag.
DIGEST_LOOKUP = r"(?:crane digest|docker buildx imagetools inspect)"


def image_refs(text: str, repository: str) -> list[tuple[str, bool]]:
    """Every mention of the repository in text, as (the ref, whether a digest look-up reads it);
    Docker's form and enroot's (`REGISTRY#IMAGE`) alike."""
    repo = re.escape(repository).replace("/", "[/#]", 1)
    pattern = re.compile(rf"(?P<lookup>{DIGEST_LOOKUP}\s+)?(?P<ref>{repo}(?:[:@][^\s'\"`)}}]*)?)(?![\w-])")
    return [(m["ref"].rstrip(".,;:"), bool(m["lookup"])) for m in pattern.finditer(text)]


def is_immutable(ref: str, v: versions.Versions) -> bool:
    """True for a digest (`@sha256:...`) or a `<stack>-<commit>` tag (the commit may be the placeholder)."""
    if "@sha256:" in ref:
        return True
    _, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag or "#" in tag:  # no tag at all: Docker reads `latest`
        return False
    try:
        return tags.parse(tag.replace(COMMIT_PLACEHOLDER, "0" * tags.COMMIT_LEN), v)["kind"] == "commit"
    except ValueError:
        return False


def moving_refs(text: str, v: versions.Versions) -> list[str]:
    """The refs in text that name the image by a tag a release may move, other than those a digest
    look-up reads (`crane digest REF`: how to get the digest for a release)."""
    repository = v.default.image["repository"]
    return [ref for ref, lookup in image_refs(text, repository) if not lookup and not is_immutable(ref, v)]
