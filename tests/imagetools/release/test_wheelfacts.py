"""The torch wheels' recorded facts (scripts/imagetools/release/wheelfacts.json, `make wheel-facts`) and the
guide's per-version rows generated from them: a cuDNN version or an "affected" answer in the guide
that the wheels do not back fails, and so does a variant whose cuDNN is not the one its torch pins."""

from __future__ import annotations

import hashlib
import re
import zipfile

import pytest

from ftenv.stack import versions
from imagetools.release import generated, wheelfacts
from support import ROOT

GUIDE = ROOT / "docs/cudnn-sdpa-guide.md"
#: The releases the guide's PyPI rows name (2.12 to 2.15: issue-free facts, read from the wheels).
RELEASES = ("2.12.0", "2.13.0", "2.14.0", "2.14.1", "2.15.0")
_ROW = re.compile(
    r"^\| `pip install torch==(?P<first>[\d.]+)`(?P<more>[^|]*)\|(?P<cudnn>[^|]*)\|(?P<first_answer>[^|]*)\|"
)


def pypi_rows(text: str) -> list[tuple[list[str], str, str]]:
    """(torch releases named, cuDNN version spelled, affected answer) of each `pip install torch==` row."""
    rows = []
    for line in text.splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        named = [m["first"], *re.findall(r"`(\d+\.\d+\.\d+)`", m["more"])]
        cell = generated.VALUE.sub(lambda v: v["body"], m["cudnn"])
        spelled = re.search(r"nvidia-cudnn-cu\d+ (\d+(?:\.\d+)+)", cell)
        answer = generated.VALUE.sub(lambda v: v["body"], m["first_answer"]).strip()
        rows.append((named, spelled[1] if spelled else "", answer))
    return rows


def rows_against_record(text: str, record: list[dict]) -> list[str]:
    """Each PyPI row whose cuDNN or "affected" answer is not what the named wheels say."""
    problems = []
    for named, cudnn, answer in pypi_rows(text):
        for release in named:
            try:
                wheel = wheelfacts.cuda_wheel(record, release)
            except KeyError:
                continue  # a release the record does not hold (2.9, 2.10, 2.11: quoted from sources)
            if wheelfacts.cudnn_pin(wheel)[1] != cudnn:
                problems.append(
                    f"torch {release}: the guide says cuDNN {cudnn}, its wheel pins {wheel['pins']}"
                )
            if not answer.startswith(wheelfacts.cudnn_first(wheel)):
                said = wheelfacts.cudnn_first(wheel)
                problems.append(f"torch {release}: the guide says {answer!r}, its wheel says {said}")
    return problems


def test_the_record_names_each_wheel_by_file_and_sha256():
    record = wheelfacts.load()
    for wheel in record:
        assert wheel["filename"].endswith(".whl") and wheel["filename"].startswith("torch-")
        assert re.fullmatch(r"[0-9a-f]{64}", wheel["sha256"])
    # every release the guide's rows name has its CUDA wheel read, strings and all
    for release in RELEASES:
        assert set(wheelfacts.cuda_wheel(record, release)["libtorch_cuda"]) == set(wheelfacts.STRINGS)


def test_the_guides_rows_are_what_the_record_says():
    text = GUIDE.read_text()
    named = {r for row in pypi_rows(text) for r in row[0]}
    assert set(RELEASES) <= named  # the rows are found, so the check below checks them
    assert rows_against_record(text, wheelfacts.load()) == []
    v = versions.load()
    assert generated.regenerate(v, text) == text  # the generated values are fresh


@pytest.mark.parametrize(
    "old, new",
    [
        ("wheels.2.15.0.cudnn -->9.26.0.51", "wheels.2.15.0.cudnn -->9.25.1.0"),  # a stale generated value
        ("<!-- v: wheels.2.15.0.cudnn -->9.26.0.51<!-- /v -->", "9.24.0.43"),  # written by hand
        ("<!-- v: wheels.2.12.0.cudnn -->9.20.0.48<!-- /v -->", "9.19.0.56"),
    ],
)
def test_a_planted_wrong_cudnn_version_fails(old, new):
    text = GUIDE.read_text()
    assert old in text
    planted = text.replace(old, new, 1)
    assert rows_against_record(planted, wheelfacts.load()) != []


def test_a_planted_wrong_answer_fails():
    text = GUIDE.read_text()
    old = "<!-- v: wheels.2.15.0.cudnn_first -->yes<!-- /v -->"
    assert old in text
    assert rows_against_record(text.replace(old, "no", 1), wheelfacts.load()) != []


def test_a_stale_generated_value_is_rewritten_from_the_record():
    text = GUIDE.read_text()
    stale = text.replace("wheels.2.15.0.cudnn -->9.26.0.51", "wheels.2.15.0.cudnn -->9.25.1.0", 1)
    assert generated.regenerate(versions.load(), stale) == text


@pytest.mark.parametrize("name", sorted(versions.load().variants))
def test_each_pypi_variant_pins_the_cudnn_its_torch_wheel_pins(name):
    variant = versions.load().variants[name]
    try:
        wheel = wheelfacts.cuda_wheel(wheelfacts.load(), variant.torch_base)
    except KeyError:
        pytest.skip(f"torch {variant.torch_base}'s wheel is not in the record")
    if variant.torch_index:
        pytest.skip("torch from PyTorch's index: its wheel's pins differ from PyPI's")
    assert wheelfacts.cudnn_pin(wheel) == (variant.cudnn_package, variant.cudnn)


def _wheel(path, version: str, requires: list[str], library: bytes | None):
    with zipfile.ZipFile(path, "w") as z:
        meta = "\n".join(["Metadata-Version: 2.1", "Name: torch", f"Version: {version}"])
        meta += "".join(f"\nRequires-Dist: {r}" for r in requires) + "\n"
        z.writestr(f"torch-{version}.dist-info/METADATA", meta)
        if library is not None:
            z.writestr(wheelfacts.CUDA_LIBRARY, library)
    return path


def test_a_wheel_is_read_for_its_pins_and_strings(tmp_path, monkeypatch):
    monkeypatch.setattr(wheelfacts, "_CHUNK", 7)  # the strings straddle the chunks
    requires = [
        'nvidia-cudnn-cu13==9.26.0.51; platform_system == "Linux"',
        "cuda-toolkit[cublas]==13.2.2",
        "filelock",
        'optree>=0.13.0; extra == "optree"',
    ]
    lib = b"\0junk check_prefer_cudnn_attention\0 more TORCH_CUDNN_SDPA_DEPRIORITIZED\0"
    wheel = wheelfacts.read_wheel(
        _wheel(tmp_path / "torch-9.9.0-cp312-cp312-linux_x86_64.whl", "9.9.0", requires, lib)
    )
    assert wheel["pins"] == {"nvidia-cudnn-cu13": "9.26.0.51", "cuda-toolkit": "13.2.2"}
    assert wheel["libtorch_cuda"] == dict.fromkeys(wheelfacts.STRINGS, True)
    assert wheelfacts.cudnn_first(wheel) == "yes"
    # without the switch's name, or with a cuDNN at 9.15.0, the build does not put cuDNN first
    assert (
        wheelfacts.cudnn_first(
            wheel | {"libtorch_cuda": {**wheel["libtorch_cuda"], wheelfacts.STRINGS[-1]: False}}
        )
        == "no"
    )
    assert wheelfacts.cudnn_first(wheel | {"pins": {"nvidia-cudnn-cu13": "9.15.0.1"}}) == "no"
    cpu = wheelfacts.read_wheel(_wheel(tmp_path / "torch-9.9.0+cpu.whl", "9.9.0+cpu", ["filelock"], None))
    assert cpu["libtorch_cuda"] is None
    with pytest.raises(KeyError, match=r"no CUDA wheel of torch 9\.9\.0"):
        wheelfacts.cuda_wheel([cpu], "9.9.0")


def test_the_command_writes_the_record_and_refuses_what_is_not_a_wheel(tmp_path, monkeypatch, capsys):
    from imagetools.__main__ import main

    monkeypatch.setattr(wheelfacts, "ROOT", tmp_path)
    (tmp_path / wheelfacts.RECORD).parent.mkdir(parents=True)
    path = _wheel(tmp_path / "torch-9.9.0-x.whl", "9.9.0", ["nvidia-cudnn-cu13==9.26.0.51"], b"x")
    assert main(["wheelfacts", "--write", str(path), str(path)]) == 0
    [entry] = wheelfacts.load(tmp_path)  # named twice, recorded once
    assert entry["filename"] == path.name and entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    (tmp_path / "bad.whl").write_text("not a zip")
    assert main(["wheelfacts", str(tmp_path / "bad.whl")]) == 2
    assert "bad.whl is not a wheel" in capsys.readouterr().err
    assert main(["wheelfacts", str(tmp_path / "missing.whl")]) == 2
