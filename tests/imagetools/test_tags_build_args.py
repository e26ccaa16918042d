"""The tag scheme, the Dockerfile's build args and its labels, all derived from versions.toml on
the host (imagetools.tags, imagetools.build_args)."""

import io
import shutil
import tomllib

import pytest
from dockerfile_parse import DockerfileParser

from ftenv import variables
from ftenv.stack import versions
from imagetools.build_args import build_args, labels
from imagetools.tags import parse_stack_tag, stack_tag
from support import ROOT

V = versions.load(ROOT / "versions.toml")
#: versions.toml as TOML reads it, to check what is derived from it.
RAW = tomllib.loads((ROOT / "versions.toml").read_text())
DOCKERFILE = ROOT / "docker/Dockerfile"


def test_dockerfile_args_are_exactly_the_derived_build_args():
    df = DockerfileParser(fileobj=io.BytesIO(DOCKERFILE.read_bytes()))
    declared = {line["value"].split("=")[0] for line in df.structure if line["instruction"] == "ARG"}
    derived = set(build_args(V.default))
    assert derived - declared == set(), "build args the Dockerfile never declares"
    # Not from versions.toml: the build's own revision and time, and the stand-in marker of local builds.
    local_only = {"REVISION", "CREATED", variables.STANDIN_BASE}
    assert declared - derived == local_only, "ARGs that versions.toml does not feed"
    # No version literal hides in the Dockerfile: every pin arrives as an ARG.
    text = DOCKERFILE.read_text()
    for variant in V.variants.values():
        for value in (
            variant.torch_base,
            variant.cudnn,
            variant.python["funasr"],
            variant.python["transformers"],
        ):
            assert value not in text


@pytest.mark.parametrize("name", sorted(V.variants))
def test_labels_are_what_the_dockerfile_writes_with_the_derived_args(name):
    variant = V.variants[name]
    dockerfile = io.BytesIO(DOCKERFILE.read_bytes())
    written = DockerfileParser(fileobj=dockerfile, build_args=build_args(variant)).labels
    assert {key: written.get(key) for key in labels(variant)} == labels(variant)


def test_build_args_resolve_for_every_variant():
    for variant in V.variants.values():
        args = build_args(variant)
        assert all(value or key == "TORCH_INDEX_URL" for key, value in args.items()), args
        assert args["BASE_IMAGE"].startswith("docker.io/nvidia/cuda:") and "cudnn" not in args["BASE_IMAGE"]
        assert args["CUDA_MAJOR_MINOR"] == variant.cuda_major_minor
        assert args["IMAGE_REF"].endswith(":" + stack_tag(variant))


@pytest.mark.parametrize("name", sorted(RAW["variants"]))
def test_tag_spells_the_stack_and_round_trips(name):
    table = RAW["variants"][name]
    torch, cuda = table["torch"].split("+")[0], table["cuda"].split(".")
    cuda_short = f"cu{cuda[0]}{cuda[1]}"
    funasr = RAW["python"]["funasr"]
    assert stack_tag(V.variants[name]) == f"funasr{funasr}-torch{torch}-{cuda_short}-cudnn{table['cudnn']}"
    assert parse_stack_tag(stack_tag(V.variants[name])) == {
        "funasr": funasr,
        "torch": torch,
        "cuda_short": cuda_short,
        "cudnn": table["cudnn"],
    }
    with pytest.raises(ValueError):
        parse_stack_tag("latest")


def test_a_changed_version_flows_into_tag_args_and_requirements(tmp_path):
    copy = tmp_path / "versions.toml"
    shutil.copy(ROOT / "versions.toml", copy)
    old = RAW["python"]["funasr"]
    new = f"{old}.1"
    copy.write_text(copy.read_text().replace(f'funasr = "{old}"', f'funasr = "{new}"'))
    changed = versions.load(copy).default
    assert stack_tag(changed).startswith(f"funasr{new}-")
    assert build_args(changed)["FUNASR_VERSION"] == new
    assert f"funasr=={new}" in changed.requirements()
    assert labels(changed)["ftenv.funasr.version"] == new


def test_a_stack_tag_that_is_not_ours_is_a_clear_error():
    with pytest.raises(ValueError, match="not an immutable ftenv tag: 'latest'"):
        parse_stack_tag("latest")
