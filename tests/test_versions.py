"""versions.toml is the single source: locks, Dockerfile ARGs, tags and labels derive from it."""

import re
import shutil
import urllib.request
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from ftenv.build import versions
from ftenv.report import render

ROOT = Path(__file__).resolve().parents[1]
V = versions.load(ROOT / "versions.toml")
LOCKS = ROOT / "docker/locks"
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)")


def _lock(variant: str) -> dict[str, str]:
    """name -> version of every package in a lock; asserts each carries at least one hash."""
    text = (LOCKS / f"{variant}.txt").read_text()
    pins = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        first = block.splitlines()[0]
        if first.startswith("#"):
            continue
        m = PIN.match(first)
        assert m, f"{variant}.txt: not an exact pin: {first!r}"
        assert "--hash=sha256:" in block, f"{variant}.txt: {m.group(1)} has no hash"
        pins.setdefault(m.group(1).lower(), m.group(2))
    return pins


def _dockerfile() -> DockerfileParser:
    parser = DockerfileParser(fileobj=open(ROOT / "docker/Dockerfile", "rb"))  # noqa: SIM115
    return parser


@pytest.mark.parametrize("name", sorted(V.variants))
def test_lock_is_complete_exact_and_matches_versions(name):
    variant = V.variants[name]
    pins = _lock(name)
    for req in variant.requirements():
        pkg, version = req.split("==")
        assert pins.get(pkg.lower()) == version, (
            f"{name}.txt pins {pkg} {pins.get(pkg.lower())}, not {version}"
        )
    if variant.torch_index:
        # torch from another index is not in the PyPI lock: it must not sneak in from PyPI either.
        assert "torch" not in pins and "torchaudio" not in pins
    assert len(pins) > 50  # the full closure, not just the top-level pins


def test_lock_input_is_what_versions_says():
    cu128, cu130 = V.variants["cu128"], V.variants["cu130"]
    assert "torch==2.11.0" in cu130.requirements() and "nvidia-cudnn-cu13==9.19.0.56" in cu130.requirements()
    assert not any(r.startswith("torch") for r in cu128.requirements())
    assert cu128.torch_index == "https://download.pytorch.org/whl/cu128"


def test_dockerfile_args_are_exactly_the_derived_build_args():
    df = _dockerfile()
    declared = {line["value"].split("=")[0] for line in df.structure if line["instruction"] == "ARG"}
    derived = set(V.default.build_args())
    assert derived - declared == set(), "build args the Dockerfile never declares"
    # Not from versions.toml: the build's own revision and time, and the stand-in marker of local builds.
    local_only = {"REVISION", "CREATED", render.STANDIN_BASE_ENV}
    assert declared - derived == local_only, "ARGs that versions.toml does not feed"
    # No version literal hides in the Dockerfile: every pin arrives as an ARG.
    text = (ROOT / "docker/Dockerfile").read_text()
    for variant in V.variants.values():
        for value in (
            variant.torch_base,
            variant.cudnn,
            variant.python["funasr"],
            variant.python["transformers"],
        ):
            assert value not in text


def test_dockerfile_bakes_the_fix_and_the_identity():
    env = _dockerfile().envs
    assert env["TORCH_CUDNN_SDPA_DEPRIORITIZED"] == "1"
    for key in (
        "PYTORCH_VERSION",
        "CUDA_VERSION",
        "CUDNN_VERSION",
        "PIP_CONSTRAINT",
        "NVIDIA_REQUIRE_CUDA",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "HF_HOME",
        "FTENV_IMAGE",
    ):
        assert key in env
    labels = _dockerfile().labels
    assert set(V.default.labels()) <= set(labels)


def test_build_args_resolve_for_every_variant():
    for variant in V.variants.values():
        args = variant.build_args()
        assert all(value or key == "TORCH_INDEX_URL" for key, value in args.items()), args
        assert args["BASE_IMAGE"].startswith("docker.io/nvidia/cuda:") and "cudnn" not in args["BASE_IMAGE"]
        assert args["CUDA_MAJOR_MINOR"] == variant.cuda_major_minor
        assert args["IMAGE_REF"].endswith(":" + variant.tag)


def test_tag_spells_the_stack_and_round_trips():
    cu128 = V.variants["cu128"]
    assert cu128.tag == "funasr1.4.16-torch2.11.0-cu128-cudnn9.19.0.56"
    assert versions.parse_tag(cu128.tag) == {
        "funasr": "1.4.16",
        "torch": "2.11.0",
        "cuda_short": "cu128",
        "cudnn": "9.19.0.56",
    }
    with pytest.raises(ValueError):
        versions.parse_tag("latest")


def test_a_changed_version_flows_into_tag_args_and_requirements(tmp_path):
    copy = tmp_path / "versions.toml"
    shutil.copy(ROOT / "versions.toml", copy)
    copy.write_text(copy.read_text().replace('funasr = "1.4.16"', 'funasr = "1.4.17"'))
    changed = versions.load(copy).variants["cu130"]
    assert changed.tag.startswith("funasr1.4.17-")
    assert changed.build_args()["FUNASR_VERSION"] == "1.4.17"
    assert "funasr==1.4.17" in changed.requirements()
    assert changed.labels()["ftenv.funasr.version"] == "1.4.17"


def test_cudnn_int_matches_torch_encoding():
    assert versions.cudnn_int("9.19.0.56") == 91900
    assert versions.cudnn_int("9.10.2.21") == 91002


def test_missing_versions_file_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="FTENV_VERSIONS_FILE"):
        versions.load(tmp_path / "nope.toml")
    with pytest.raises(SystemExit, match="cu130"):
        V.variant("cu999")


@pytest.mark.parametrize("package", ["torch", "torchaudio"])
def test_cu128_pins_exist_on_their_index_where_it_is_reachable(package):
    """The cu128 wheels are checked against the index's listing; here the index is unreachable."""
    variant = V.variants["cu128"]
    url = f"{variant.torch_index}/{package}/"
    try:
        with urllib.request.urlopen(url, timeout=5) as page:
            listing = page.read().decode()
    except OSError as exc:
        pytest.skip(
            f"cu128 index unreachable ({exc.__class__.__name__}): the cu128 image is built and its torch "
            "verified only where it is reachable. Verified here instead: versions consistent, PyPI lock "
            "complete with hashes, Dockerfile ARGs resolve."
        )
    version = getattr(variant, package).replace("+", "%2B")
    wheel = f"{package}-{version}-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert wheel in listing or wheel.replace("%2B", "+") in listing, f"{wheel} not on {url}"
