"""docker/docker-bake.json, generated from versions.toml (`make bake`) and committed.

JSON rather than HCL: buildx reads both, the standard library writes and reads JSON, and a
generated file needs none of HCL's expressions (only `${VAR}`, which bake's JSON supports too).
`resolve_target` reads a bake file back the way buildx does, for the checks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ftenv.stack import versions
from imagetools.build_args import build_args, labels
from imagetools.tags import commit_tag, ref

BAKE_FILE = Path("docker/docker-bake.json")
DOCKERFILE = Path("docker/Dockerfile")
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
#: How the layers are pushed (docs/releasing.md, "Compression"): gzip, which every consumer reads
#: (enroot before its zstd support, and with mixed gzip/zstd layers, does not read zstd);
#: force-compression recompresses a base layer that arrives in another format, so no image mixes them.
OUTPUT = ["type=registry,compression=gzip,force-compression=true,oci-mediatypes=true"]

_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def cache_ref(variant: versions.Variant) -> str:
    """Registry cache, one per variant, in a package of its own beside the images."""
    return f"{variant.image['repository']}-buildcache:{variant.name}"


def annotations(labels: dict[str, str]) -> list[str]:
    # OCI annotations on the index (what `imagetools inspect` shows) and on each manifest.
    return [f"index,manifest:{k}={val}" for k, val in labels.items()]


def bake(v: versions.Versions) -> dict:
    """The bake file: `_common` and `_labels` shared, one target per variant, group `default`."""
    some = next(iter(v.variants.values()))
    runtime = {"revision": "${REVISION}", "created": "${CREATED}"}
    shared = {k: val for k, val in labels(some, **runtime).items() if k in SHARED_LABELS}
    targets: dict[str, dict] = {
        "_common": {
            "context": ".",
            "dockerfile": str(DOCKERFILE),
            "pull": True,
            "attest": ATTEST,
            "output": OUTPUT,
            "args": {"REVISION": "${REVISION}", "CREATED": "${CREATED}"},
        },
        "_labels": {"labels": shared, "annotations": annotations(shared)},
    }
    for variant in v.variants.values():
        own = {k: val for k, val in labels(variant, **runtime).items() if k not in SHARED_LABELS}
        targets[variant.name] = {
            "inherits": ["_common", "_labels"],
            "platforms": list(variant.platforms),
            "args": build_args(variant),
            "labels": own,
            "annotations": annotations(own),
            "tags": [ref(variant, commit_tag(variant, "${COMMIT}"))],
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
