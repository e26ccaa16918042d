"""versions.toml is the single source: the locks derive from it, and the image and the host read it."""

import argparse
import http.server
import re
import socketserver
import sys
import threading
import tomllib
import urllib.error
import urllib.request

import pytest
from dockerfile_parse import DockerfileParser

from ftenv import variables
from ftenv.report import render
from ftenv.stack import versions
from support import ROOT

V = versions.load(ROOT / "versions.toml")
#: versions.toml as TOML reads it, to check what ftenv.stack.versions derives from it.
RAW = tomllib.loads((ROOT / "versions.toml").read_text())
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


@pytest.mark.parametrize("name", sorted(RAW["variants"]))
def test_lock_input_is_what_versions_says(name):
    table, python = RAW["variants"][name], RAW["python"]
    expected = {f"{table['cudnn_package']}=={table['cudnn']}", *(f"{k}=={v}" for k, v in python.items())}
    if not table["torch_index"]:  # PyPI: torch is locked with the rest
        expected |= {f"torch=={table['torch']}", f"torchaudio=={table['torchaudio']}"}
    else:  # another index: a local build (+cuNNN) that PyPI does not serve
        assert "+" in table["torch"] and table["torch_index"].startswith("https://")
    assert set(V.variants[name].requirements()) == expected


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


def test_cudnn_int_matches_torch_encoding():
    # Encodings of cuDNN releases (not necessarily the pinned one): major*10000 + minor*100 + patch.
    assert versions.cudnn_int("9.10.2.21") == 91002
    assert versions.cudnn_int("9.15.1") == 91501
    assert versions.cudnn_int("9.8") == 90800
    for bad in ("", "nine", None):
        with pytest.raises(ValueError, match=f"not a cuDNN version: {bad!r}"):
            versions.cudnn_int(bad)


def test_an_unreadable_cudnn_version_is_unknown():
    """The image's CUDNN_VERSION, a wheel's version and a logged report's cuDNN read alike."""
    assert versions.cudnn_int_or_none("9.19.0.56") == 91900
    assert versions.cudnn_int_or_none("9.10.2.21") == 91002 and versions.cudnn_int_or_none("9.8") == 90800
    for unknown in ("", "unknown", None):
        assert versions.cudnn_int_or_none(unknown) is None


def test_version_parts_come_from_packaging():
    assert versions.public("2.9.1+cu126") == "2.9.1" and versions.public("2.9.1") == "2.9.1"
    assert versions.public(None) is None and versions.public("not a version") == "not a version"
    assert versions.release("2.9.1+cu126", 2) == (2, 9) and versions.release("12", 3) == (12, 0, 0)
    assert versions.release("2.10.0a0+git1234", 2) == (2, 10)
    assert versions.release("garbage", 2) is None and versions.release(None) is None
    assert versions.major_minor("12.6.3") == "12.6" and versions.cuda_int("12.6.3") == 12060
    assert versions.cuda_int("unknown") == 0  # no CUDA version read: no variant fits (for_driver)
    assert versions.release("9.19.0.56") == (9, 19, 0)  # three numbers unless asked otherwise


def test_the_variant_for_an_old_driver_comes_from_versions():
    for variant in V.variants.values():
        driver_cuda = versions.cuda_int(variant.cuda)
        fits = V.for_driver(driver_cuda)
        assert variant in fits
        assert all(versions.cuda_int(f.cuda) <= driver_cuda for f in fits)
        assert [int(f.min_driver) for f in fits] == sorted(int(f.min_driver) for f in fits)
    oldest = min(versions.cuda_int(v.cuda) for v in V.variants.values())
    assert V.for_driver(oldest - 10) == []


def test_the_versions_file_is_found_from_the_variable_the_checkout_or_the_image(monkeypatch, tmp_path):
    monkeypatch.delenv("FTENV_VERSIONS_FILE", raising=False)
    assert versions.default_path() == ROOT / "versions.toml"
    assert versions.load() == versions.load(ROOT / "versions.toml")
    monkeypatch.setenv("FTENV_VERSIONS_FILE", str(tmp_path / "v.toml"))
    assert versions.default_path() == tmp_path / "v.toml"
    monkeypatch.delenv("FTENV_VERSIONS_FILE")
    installed = tmp_path / "site-packages/ftenv/stack/versions.py"  # no versions.toml three levels up
    monkeypatch.setattr(versions, "__file__", str(installed))
    assert versions.default_path() == versions.IMAGE_VERSIONS_FILE


def test_load_keeps_each_variants_name_and_the_image_table():
    loaded = versions.load(ROOT / "versions.toml")
    assert all(variant.name == name for name, variant in loaded.variants.items())
    # Each variant carries the image table (build_args' labels and the release's repository read it).
    assert loaded.image == RAW["image"]
    assert all(variant.image == RAW["image"] for variant in loaded.variants.values())
    assert all(variant.python == RAW["python"] for variant in loaded.variants.values())
    assert loaded.default is loaded.variants[loaded.image["default_variant"]]
    assert loaded.variant(loaded.default.name) is loaded.default


def test_missing_versions_file_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="FTENV_VERSIONS_FILE"):
        versions.load(tmp_path / "nope.toml")
    with pytest.raises(SystemExit, match=f"'cu999'; versions.toml has: {', '.join(sorted(V.variants))}$"):
        V.variant("cu999")


def index_listing(url: str) -> str:
    """The index page at url. No network skips (the cu128 image is then verified where it is
    reachable); an HTTP error fails: the index answered, so its URL or the pin is wrong."""
    try:
        with urllib.request.urlopen(url, timeout=5) as page:
            return page.read().decode()
    except urllib.error.HTTPError as exc:
        pytest.fail(f"{url}: HTTP {exc.code} {exc.reason}: a wrong index URL in versions.toml?")
    except OSError as exc:
        pytest.skip(
            f"cu128 index unreachable ({exc.__class__.__name__}): the cu128 image is built and its torch "
            "verified only where it is reachable. Verified here instead: versions consistent, PyPI lock "
            "complete with hashes, Dockerfile ARGs resolve."
        )


@pytest.mark.parametrize("package", ["torch", "torchaudio"])
def test_cu128_pins_exist_on_their_index_where_it_is_reachable(package):
    """The cu128 wheels are checked against the index's listing where the index is reachable."""
    variant = V.variants["cu128"]
    url = f"{variant.torch_index}/{package}/"
    listing = index_listing(url)
    version = getattr(variant, package).replace("+", "%2B")
    wheel = f"{package}-{version}-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert wheel in listing or wheel.replace("%2B", "+") in listing, f"{wheel} not on {url}"


def test_an_index_that_answers_404_fails_and_one_out_of_reach_skips():
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        def log_message(self, *args):
            pass

    with socketserver.TCPServer(("127.0.0.1", 0), NotFound) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            with pytest.raises(pytest.fail.Exception, match="HTTP 404"):
                try:
                    index_listing(f"http://127.0.0.1:{server.server_address[1]}/whl/cu128/torch/")
                except pytest.skip.Exception as exc:  # a skip here would hide this test's failure
                    raise AssertionError(f"an index answering 404 was skipped: {exc}") from None
        finally:
            server.shutdown()
        closed_port = server.server_address[1]
    with pytest.raises(pytest.skip.Exception, match="unreachable"):
        index_listing(f"http://127.0.0.1:{closed_port}/whl/cu128/torch/")


def _edited_versions(tmp_path, monkeypatch, old: str, new: str):
    """versions.toml with one edit, made the file every reader loads (FTENV_VERSIONS_FILE)."""
    text = (ROOT / "versions.toml").read_text()
    assert text.count(old) >= 1, old
    path = tmp_path / "versions.toml"
    path.write_text(text.replace(old, new))
    monkeypatch.setenv("FTENV_VERSIONS_FILE", str(path))
    return versions.load(path)


def test_the_old_driver_note_names_the_variant_versions_toml_has(tmp_path, monkeypatch):
    from ftenv.attention import facts

    oldest = min(V.variants.values(), key=lambda v: versions.cuda_int(v.cuda))
    newest = max(V.variants.values(), key=lambda v: versions.cuda_int(v.cuda))
    assert oldest is not newest
    f = facts.Facts(
        torch_cuda=newest.cuda_major_minor,
        libcuda_found=True,
        driver_cuda=versions.cuda_int(oldest.cuda),
        min_driver=newest.min_driver,
    )
    note = render.assess(f).notes[0]
    assert note.startswith("ERROR:")
    assert f"use the {oldest.name} image (driver R{oldest.min_driver} or later)" in note
    # Another minimum driver in versions.toml is another note: nothing is spelled in the code.
    edited = _edited_versions(
        tmp_path, monkeypatch, f'min_driver = "{oldest.min_driver}"', 'min_driver = "123"'
    )
    assert edited.variants[oldest.name].min_driver == "123"
    assert f"use the {oldest.name} image (driver R123 or later)" in render.assess(f).notes[0]
    # A driver older than every variant's CUDA gets no variant to fall back on.
    f.driver_cuda = versions.cuda_int(oldest.cuda) - 10
    assert render.assess(f).notes[0].endswith("Update the driver.")


def test_the_watchdog_reads_the_cudnn_wheels_versions_toml_names(tmp_path, monkeypatch):
    from ftenv.attention import process_settings

    packages = tuple(dict.fromkeys(v.cudnn_package for v in V.variants.values()))
    assert process_settings.cudnn_packages() == packages
    package = V.default.cudnn_package
    _edited_versions(tmp_path, monkeypatch, f'"{package}"', '"nvidia-cudnn-cu99"')
    assert "nvidia-cudnn-cu99" in process_settings.cudnn_packages()
    monkeypatch.setenv("FTENV_VERSIONS_FILE", str(tmp_path / "missing.toml"))
    assert process_settings.cudnn_packages() == ()  # unknown, not a guess


#: Versions as packages, CUDA and cuDNN write them, and strings that are no version at all.
SPELLINGS = [
    "2.9.1+cu126",
    "2.11.0",
    "12",
    "9.19.0.56",
    "2.10.0a0+git1234",
    "v1.0",
    "1!2.0",
    "1.0-rc1",
    "1.0RC2",
    "1.0.post1",
    "1.0-1",
    "1.0.dev3",
    "1.0a1.post2.dev3+local.7",
    "2.9.1+CU126",
    " 2.9.1 ",
    "1.0alpha",
    "1.0beta2",
    "1.0c1",
    "1.0pre",
    "1.0preview1",
    "1.0-r4",
    "1.0rev",
    "01.002",
    "0!1.0",
    "1.0_dev_2",
    "garbage",
    "",
    "1.0+",
    "1..0",
    "1.0 2",
    "not a version",
    "1.0+cu12_8",
    "1.0-dev",
]


@pytest.mark.parametrize("version", SPELLINGS)
def test_without_packaging_versions_read_as_packaging_reads_them(version, monkeypatch):
    """A host's stock python3 has no packaging: the standard-library reading must agree with it."""
    with_packaging = (versions.release(version, 4), versions.public(version))
    monkeypatch.setitem(sys.modules, "packaging.version", None)  # `import packaging.version` fails
    with pytest.raises(ImportError):
        import packaging.version  # noqa: F401
    assert (versions.release(version, 4), versions.public(version)) == with_packaging


# `python -m ftenv.stack.versions` (and `ftenv versions`, which shares add_arguments, query_of and run)

#: versions.toml's variants in the file's order, read by TOML itself, and its default.
NAMES = list(RAW["variants"])
DEFAULT = RAW["image"]["default_variant"]
OTHER = next(name for name in NAMES if name != DEFAULT)


def _main(capsys, *argv: str) -> str:
    """What main prints for argv; it must answer 0 and write nothing to stderr."""
    assert versions.main(list(argv)) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


@pytest.mark.parametrize("file", [False, True], ids=["default file", "--file"])
def test_each_question_gets_its_exact_answer(capsys, monkeypatch, tmp_path, file):
    monkeypatch.delenv(variables.VERSIONS_FILE, raising=False)
    extra = ("--file", str(ROOT / "versions.toml")) if file else ()
    if file:  # --file, not the variable's file, is read
        monkeypatch.setenv(variables.VERSIONS_FILE, str(tmp_path / "missing.toml"))
    assert _main(capsys, "name", *extra) == f"{DEFAULT}\n"
    assert _main(capsys, "name", OTHER, *extra) == f"{OTHER}\n"
    assert _main(capsys, "variants", *extra) == "".join(f"{n}\n" for n in NAMES)
    assert _main(capsys, "variants", OTHER, *extra) == "".join(f"{n}\n" for n in NAMES)
    for name in NAMES:
        reqs = V.variants[name].requirements()
        assert len(reqs) > 2
        assert _main(capsys, "requirements", name, *extra) == "".join(f"{r}\n" for r in reqs)
    assert _main(capsys, "requirements", *extra) == "".join(f"{r}\n" for r in V.default.requirements())


def test_the_variable_names_the_file_main_reads(capsys, monkeypatch, tmp_path):
    """FTENV_VERSIONS_FILE (ftenv.variables' name for it) is what main reads without --file."""
    edited = _edited_versions(
        tmp_path, monkeypatch, f'default_variant = "{DEFAULT}"', f'default_variant = "{OTHER}"'
    )
    assert edited.default.name == OTHER
    assert _main(capsys, "name") == f"{OTHER}\n"
    assert _main(capsys, "name", "--file", str(ROOT / "versions.toml")) == f"{DEFAULT}\n"
    missing = tmp_path / "missing.toml"
    monkeypatch.setenv(variables.VERSIONS_FILE, str(missing))
    with pytest.raises(SystemExit) as exc:
        versions.main(["name"])
    assert exc.value.code == (
        f"ftenv: versions file {missing} not found; set FTENV_VERSIONS_FILE to versions.toml"
    )


def test_the_query_carries_what_was_asked():
    p = argparse.ArgumentParser()
    versions.add_arguments(p)
    assert versions.query_of(p.parse_args(["requirements", OTHER, "--file", "v.toml"])) == (
        versions.VersionsQuery(what="requirements", variant=OTHER, file="v.toml")
    )
    assert versions.query_of(p.parse_args(["name"])) == versions.VersionsQuery(what="name")
    assert versions.WHATS == ("name", "variants", "requirements")


#: `python -m ftenv.stack.versions --help` at 100 columns, as argparse writes it.
HELP = """\
usage: python -m ftenv.stack.versions [-h] [--file FILE] {name,variants,requirements} [variant]

values read from versions.toml (variants, the lock's pins)

positional arguments:
  {name,variants,requirements}
  variant               variant name (default: versions.toml's default)

options:
  -h, --help            show this help message and exit
  --file FILE           versions file (default: the checkout's or the image's)
"""


def test_help_names_the_questions_the_variant_and_the_file(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    with pytest.raises(SystemExit) as exc:
        versions.main(["--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == HELP


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[image\n", "is not valid TOML"),
        ('[image]\nname = "x"\n', "does not have versions.toml's tables ([image], [python], [variants.NAME]"),
        ("[image]\n[python]\n[variants.a]\nnot_a_key = 1\n", "TypeError"),
    ],
)
def test_a_broken_versions_file_is_named_with_the_fix(tmp_path, text, said):
    broken = tmp_path / "versions.toml"
    broken.write_text(text)
    with pytest.raises(SystemExit) as exc:
        versions.load(broken)
    assert str(exc.value).startswith(f"ftenv: versions file {broken} ") and said in str(exc.value)
    assert str(exc.value).endswith("fix the file")


def test_a_bad_question_or_variant_is_refused_with_what_is_known(capsys):
    with pytest.raises(SystemExit) as exc:
        versions.main(["version"])
    assert exc.value.code == 2  # argparse's usage error
    err = capsys.readouterr().err
    assert "python -m ftenv.stack.versions: error: argument what: invalid choice: 'version'" in err
    for what in versions.WHATS:
        assert f"'{what}'" in err  # argparse lists the choices
    for what in ("name", "variants", "requirements"):
        with pytest.raises(SystemExit) as exc:
            versions.main([what, "cu999"])
        known = ", ".join(sorted(NAMES))
        assert exc.value.code == f"ftenv: unknown variant 'cu999'; versions.toml has: {known}"
    assert capsys.readouterr().out == ""


def test_without_a_toml_parser_the_host_is_told_what_to_install(monkeypatch):
    monkeypatch.setattr(versions, "tomllib", None)
    with pytest.raises(SystemExit) as exc:
        versions.load(ROOT / "versions.toml")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert exc.value.code == "ftenv: " + versions.NO_TOML_PARSER.format(python=python)
    assert exc.value.code.startswith(
        f"ftenv: Python {python} has no TOML parser (tomllib is 3.11+): install tomli"
    )


def test_cuda_name_writes_a_drivers_cuda():
    assert versions.cuda_name(12060) == "12.6"
    assert versions.cuda_name(13000) == "13.0"
    assert versions.cuda_name(12080) == "12.8"
    assert versions.cuda_name(11040) == "11.4"
    for variant in V.variants.values():
        assert versions.cuda_name(versions.cuda_int(variant.cuda)) == variant.cuda_major_minor
