"""Read versions.toml, the single source of truth, for the image and the host; `ftenv versions`
prints what the Makefile asks. Nothing else in the repository spells a version.

It also reads version strings as PEP 440 does where packaging is missing (a host's stock python3 runs
it for `make run`).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ftenv import variables

# The TOML parser: the standard library's from 3.11 (the image has 3.12); a host's stock python3 3.9
# or 3.10 (Ubuntu 22.04, Debian 11) reads versions.toml with tomli (tomllib's origin), else with
# toml, the parser Debian 11 packages (python3-toml); `make run` installs either (imagetools.local.engine).
try:
    import tomllib
except ImportError:
    try:
        import tomli as tomllib
    except ImportError:
        try:
            import toml as tomllib
        except ImportError:
            tomllib = None

#: What a host whose python3 is older than 3.11 and has no TOML parser is told.
NO_TOML_PARSER = (
    "Python {python} has no TOML parser (tomllib is 3.11+): install tomli "
    "(`apt-get install python3-tomli`, or python3-toml on Debian 11; "
    "or `python3 -m pip install --user tomli`), "
    "or put Python 3.11+ first on PATH"
)

#: Where the image keeps its copy; a source checkout finds the file at the repository root.
IMAGE_VERSIONS_FILE = Path("/opt/ftenv/versions.toml")


#: A version as PEP 440 writes it (its appendix B, the permissive form that installers accept).
_PEP440 = re.compile(
    r"""^\s*v?
    (?:(?P<epoch>[0-9]+)!)?
    (?P<release>[0-9]+(?:\.[0-9]+)*)
    (?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?
    (?:-(?P<post_n1>[0-9]+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?)?
    (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$""",
    re.VERBOSE | re.IGNORECASE,
)
_PRE_SPELLING = {"alpha": "a", "beta": "b", "c": "rc", "pre": "rc", "preview": "rc"}


def _parsed(version: str) -> tuple[tuple[int, ...], str] | None:
    """(release numbers, normalized public version) as packaging reads them (in the lock, so in the
    image and the test venv), else as _pep440 does where a host's stock python3 lacks packaging;
    None when unreadable."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return _pep440(version)
    try:
        parsed = Version(version)
    except InvalidVersion:
        return None
    return parsed.release, parsed.public


def _pep440(version: str) -> tuple[tuple[int, ...], str] | None:
    """The standard-library reading (PEP 440, "Normalization"), which tests hold to packaging's."""
    m = _PEP440.match(version)
    if not m:
        return None
    numbers = tuple(int(n) for n in m["release"].split("."))
    text = f"{m['epoch']}!" if m["epoch"] and int(m["epoch"]) else ""
    text += ".".join(str(n) for n in numbers)
    if m["pre_l"]:
        label = m["pre_l"].lower()
        text += f"{_PRE_SPELLING.get(label, label)}{int(m['pre_n'] or 0)}"
    if m["post_n1"] or m["post_l"]:
        text += f".post{int(m['post_n1'] or m['post_n2'] or 0)}"
    if m["dev_l"]:
        text += f".dev{int(m['dev_n'] or 0)}"
    return numbers, text


def release(version: str | None, parts: int = 3) -> tuple[int, ...] | None:
    """The first `parts` numbers of a version as PEP 440 reads it, missing ones as 0:
    '2.9.1+cu126' -> (2, 9, 1), release('9.8', 3) -> (9, 8, 0); None when unreadable."""
    parsed = _parsed(str(version).strip()) if version is not None else None
    return (parsed[0] + (0,) * parts)[:parts] if parsed else None


def public(version: str | None) -> str | None:
    """The version without its local build tag: '2.9.1+cu126' -> '2.9.1' ('2.9.1' and
    '2.9.1+cu128' are one release); None or an unreadable string comes back unchanged."""
    parsed = _parsed(version) if version is not None else None
    return parsed[1] if parsed else version


def major_minor(version: str) -> str:
    """'12.6.3' -> '12.6', as torch.version.cuda reports the CUDA it was built for."""
    return ".".join(str(n) for n in release(version, 2) or ())


def cudnn_int(version: str | None) -> int:
    """What torch.backends.cudnn.version() returns for a cuDNN package version: 9.10.2.21 -> 91002.

    A missing patch counts as 0 ("9.8" -> 90800); anything unreadable raises ValueError."""
    numbers = release(version, 3)
    if numbers is None:
        raise ValueError(f"not a cuDNN version: {version!r}")
    major, minor, patch = numbers
    return major * 10000 + minor * 100 + patch


def cudnn_int_or_none(version: str | None) -> int | None:
    """cudnn_int, None where the version is missing or unreadable (an unset CUDNN_VERSION, a log's
    "unknown"): a cuDNN that is not known is never guessed."""
    try:
        return cudnn_int(version)
    except ValueError:
        return None


def cuda_int(version: str) -> int:
    """A CUDA version as cuDriverGetVersion() reports it: '12.6.3' -> 12060."""
    major, minor = release(version, 2) or (0, 0)
    return major * 1000 + minor * 10


def cuda_name(version: int) -> str:
    """The inverse of cuda_int, as a driver's CUDA is written: 12060 -> '12.6'."""
    return f"{version // 1000}.{version % 1000 // 10}"


def default_path() -> Path:
    """The versions file: $FTENV_VERSIONS_FILE, else the checkout's, else the image's copy."""
    if env := variables.read(variables.VERSIONS_FILE):
        return Path(env)
    checkout = Path(__file__).resolve().parents[3] / "versions.toml"
    return checkout if checkout.is_file() else IMAGE_VERSIONS_FILE


@dataclass(frozen=True)
class Variant:
    """One image variant with everything derived from its table and the common pins."""

    name: str
    base_image: str
    cuda: str
    torch: str
    torchaudio: str
    torch_index: str
    cudnn_package: str
    cudnn: str
    min_driver: str
    python: dict[str, str]
    image: dict
    #: Image platforms (buildx names); versions.toml may leave it out for amd64 only.
    platforms: tuple[str, ...] = ("linux/amd64",)

    @property
    def cuda_short(self) -> str:
        """'12.6.3' -> 'cu126', the suffix PyTorch uses for its builds."""
        major, minor = release(self.cuda, 2)
        return f"cu{major}{minor}"

    @property
    def cuda_major_minor(self) -> str:
        """What torch.version.cuda reports for this build ('12.6' for CUDA 12.6.3)."""
        return major_minor(self.cuda)

    @property
    def torch_base(self) -> str:
        """The public version without a local build tag: '2.9.1+cu126' -> '2.9.1'."""
        return public(self.torch)

    @property
    def cudnn_int(self) -> int:
        return cudnn_int(self.cudnn)

    def requirements(self) -> list[str]:
        """The top-level pins the lock is compiled from (torch only where PyPI serves it)."""
        reqs = [f"{self.cudnn_package}=={self.cudnn}"]
        if not self.torch_index:
            reqs += [f"torch=={self.torch}", f"torchaudio=={self.torchaudio}"]
        reqs += [f"{name}=={version}" for name, version in sorted(self.python.items())]
        return reqs


@dataclass(frozen=True)
class Versions:
    image: dict
    variants: dict[str, Variant]

    @property
    def default(self) -> Variant:
        return self.variants[self.image["default_variant"]]

    def for_driver(self, driver_cuda: int) -> list[Variant]:
        """The variants a driver can run (its cuDriverGetVersion() is at least their CUDA), the one
        with the oldest driver requirement first."""
        fits = [v for v in self.variants.values() if cuda_int(v.cuda) <= driver_cuda]
        return sorted(fits, key=lambda v: int(v.min_driver))

    def variant(self, name: str) -> Variant:
        try:
            return self.variants[name]
        except KeyError:
            known = ", ".join(sorted(self.variants))
            raise SystemExit(f"ftenv: unknown variant {name!r}; versions.toml has: {known}") from None


def load(path: Path | None = None) -> Versions:
    path = Path(path) if path else default_path()
    if tomllib is None:
        raise SystemExit("ftenv: " + NO_TOML_PARSER.format(python=".".join(map(str, sys.version_info[:2]))))
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SystemExit(
            f"ftenv: versions file {path} not found; set {variables.VERSIONS_FILE} to versions.toml"
        ) from None
    except ValueError as exc:  # tomllib's, tomli's and toml's decode errors are ValueErrors
        raise SystemExit(f"ftenv: versions file {path} is not valid TOML ({exc}); fix the file") from None
    try:
        image, python = data["image"], data["python"]
        variants = {
            name: Variant(name=name, python=dict(python), image=image, **table)
            for name, table in data["variants"].items()
        }
    except (KeyError, TypeError) as exc:
        raise SystemExit(
            f"ftenv: versions file {path} does not have versions.toml's tables ([image], [python], "
            f"[variants.NAME] with its keys): {type(exc).__name__}: {exc}; fix the file"
        ) from None
    return Versions(image=image, variants=variants)


# `ftenv versions`


@dataclass(frozen=True)
class VersionsQuery:
    """What `ftenv versions` (or `python -m ftenv.stack.versions`) was asked."""

    what: str  # one of WHATS
    variant: str | None = None  # default: versions.toml's default variant
    file: str | None = None  # default: the checkout's or the image's versions.toml


#: What `ftenv versions` and `python -m ftenv.stack.versions` are, in their help.
DESCRIPTION = "values read from versions.toml (variants, the lock's pins)"
#: What `ftenv versions` answers.
WHATS = ("name", "variants", "requirements")


def run(query: VersionsQuery) -> int:
    v = load(query.file)
    variant = v.variant(query.variant or v.image["default_variant"])
    if query.what == "name":
        print(variant.name)
    elif query.what == "variants":
        print("\n".join(v.variants))
    elif query.what == "requirements":
        print("\n".join(variant.requirements()))
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of both command lines (`ftenv versions`, ftenv.commands.versions, and main)."""
    p.add_argument("what", choices=list(WHATS))
    p.add_argument("variant", nargs="?", help="variant name (default: versions.toml's default)")
    p.add_argument("--file", help="versions file (default: the checkout's or the image's)")


def query_of(args: argparse.Namespace) -> VersionsQuery:
    return VersionsQuery(what=args.what, variant=args.variant, file=args.file)


def main(argv: list[str] | None = None) -> int:
    """`python -m ftenv.stack.versions WHAT`: what the Makefile asks, on the host's stock python3
    (3.9+, this module and the standard library only, unlike `ftenv versions`, which loads ftenv)."""
    p = argparse.ArgumentParser(prog="python -m ftenv.stack.versions", description=DESCRIPTION)
    add_arguments(p)
    return run(query_of(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
