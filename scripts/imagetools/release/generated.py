"""The parts of the README and docs/ that spell versions, generated from versions.toml.

A version bump is one edit of versions.toml plus `make generate` (locks, bake file, and these
parts). What is generated here, in README.md and every file below docs/:
- stack tags: each `funasr<v>-torch<v>-cu<NNN>-cudnn<v>` (image refs of the examples, tags quoted
  in prose) is the current tag of the variant that builds cu<NNN>;
- Markdown blocks between `<!-- generated: NAME -->` and `<!-- /generated -->`, written whole by
  the function BLOCKS[NAME] (the README's variant table, docs/report.md's sample report, and
  docs/variables.md's tables of ftenv's environment variables and exit codes);
- inline Markdown values `<!-- v: KEY -->VALUE<!-- /v -->`, KEY being `python.funasr`,
  `VARIANT.FIELD` (`cu130.cudnn`, `cu130.torch_base`, `cu130.base_image`: a Variant attribute) or
  `wheels.VERSION.FIELD` (`wheels.2.15.0.cudnn`: what that torch wheel pins or holds, read from the
  wheel by `make wheel-facts`, imagetools.release.wheelfacts).

`check(root)` lists what is stale and every pinned version spelled outside those parts. A line that
quotes a version of the past (a public report's environment) says so with `quoted: WHY` in a comment
on that line; a longer quote (a recorded run, its environment, its output) stands between
`<!-- quoted: WHY -->` and `<!-- /quoted -->`.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from ftenv import outcome, variables
from ftenv.stack import versions
from imagetools import ROOT, locks
from imagetools.tags import image_ref, stack_tag

#: Where versions may be spelled only in generated parts (paths relative to the repository).
SCANNED = ("README.md", "docs", "docker/locks/README.md")
TAG = re.compile(r"funasr\d[\w.]*?-torch\d[\w.]*?-(?P<cu>cu\d+)-cudnn\d+(?:\.\d+)*")
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated -->)", re.S)
VALUE = re.compile(r"(<!-- v: (?P<key>[\w.]+) -->)(?P<body>.*?)(<!-- /v -->)")
QUOTED = re.compile(r"quoted: \S")
QUOTED_REGION = re.compile(r"<!-- quoted: \S[^\n]*?-->\n.*?<!-- /quoted -->", re.S)
#: The report sample's host: an H200 on driver 580.126.20 (the driver of FunASR issue #3704).
SAMPLE_DRIVER, SAMPLE_GPU, SAMPLE_GIB = "580.126.20", "NVIDIA H200", 139.8
#: The sample build's commit (docs/releasing.md's example tag is its first 12 digits).
SAMPLE_COMMIT = "3f2a9c81d0e4" + "5b7c" * 7


def variant_table(v: versions.Versions) -> str:
    rows = [
        "| variant | base | torch / torchaudio | cuDNN | driver | tag |",
        "|---|---|---|---|---|---|",
    ]
    for var in v.variants.values():
        name = f"`{var.name}`" + (" (default)" if var is v.default else "")
        source = f"PyTorch {var.cuda_short} index" if var.torch_index else f"PyPI, {var.cuda_short}"
        # torchaudio is spelled only where it is not torch's own release (2.11 serves later torches).
        same = versions.public(var.torchaudio) == versions.public(var.torch)
        torch = var.torch if same else f"{var.torch} / {var.torchaudio}"
        rows.append(
            f"| {name} | `{var.base_image.removeprefix('docker.io/')}` | {torch} ({source}) | "
            f"{var.cudnn_package} {var.cudnn} | R{var.min_driver}+ | `{stack_tag(var)}` |"
        )
    common = ", ".join(f"{name} {version}" for name, version in sorted(v.default.python.items()))
    return "\n".join(rows) + f"\n\nEvery variant carries {common}.\n"


def report_sample(v: versions.Versions) -> str:
    """`ftenv report` as the default image prints it on one H200, by the report's own code."""
    from ftenv.attention import facts
    from ftenv.report import network, render
    from ftenv.trainer import compile_setting

    var = v.default
    torch_version = var.torch if versions.public(var.torch) != var.torch else f"{var.torch}+{var.cuda_short}"
    f = facts.Facts(
        image=image_ref(var),
        variant=var.name,
        min_driver=var.min_driver,
        stack=facts.Stack(torch_version, var.cudnn_int, deprioritized_raw="1"),
        torch_cuda=var.cuda_major_minor,
        transformers_version=var.python["transformers"],
        funasr_version=var.python["funasr"],
        libcuda_found=True,
        driver_version=SAMPLE_DRIVER,
        driver_cuda=versions.cuda_int(var.cuda),
        gpus=[facts.Gpu(0, SAMPLE_GPU, (9, 0), round(SAMPLE_GIB * 2**30))],
        live_order=[1, 2, 0, 3, 4],  # torch's default order: flash, efficient, math, cudnn
        padded_choice=2,  # efficient
    )
    net = network.NetworkFacts(
        verbs_loads=True, nccl_version=_lock_version(var.name, "nvidia-nccl-cu"), memlock_bytes=-1, nodes=1
    )
    environ = {variables.IMAGE: image_ref(var), variables.IMAGE_REVISION: SAMPLE_COMMIT}
    lines = network.render_lines(net)
    text = render.render_text(f, render.assess(f), compile_setting.report_line(), lines, environ)
    return f"```\n{text}\n```\n"


def _lock_version(variant: str, prefix: str) -> str | None:
    """The version the variant's lock pins for the first package whose name starts with prefix."""
    lock = ROOT / locks.lock_path(variant)
    found = locks.requirements(lock.read_text()) if lock.is_file() else []
    return next((e["version"] for e in found if e["name"].startswith(prefix)), None)


BLOCKS: dict[str, Callable[[versions.Versions], str]] = {
    "variants": variant_table,
    "report-sample": report_sample,
    # Not versions, but generated the same way: the tables of ftenv's variables and exit codes.
    "environment-variables": lambda v: variables.markdown_table(),
    "watch-variables": lambda v: variables.markdown_table(f"{variables.WATCH}_"),
    "exit-codes": lambda v: outcome.markdown_table(),
}


def value(v: versions.Versions, key: str) -> str:
    scope, _, field = key.partition(".")
    if scope == "python":
        return v.default.python[field]
    if scope == "wheels":  # what a torch wheel pins or holds, from its recorded facts (`make wheel-facts`)
        from imagetools.release import wheelfacts

        return wheelfacts.value(field)
    return str(getattr(v.variant(scope), field))


def _tag(v: versions.Versions, m: re.Match) -> str:
    by_cuda = {var.cuda_short: var for var in v.variants.values()}
    var = by_cuda.get(m["cu"]) or v.variants.get(m["cu"])
    return stack_tag(var) if var else m[0]


def regenerate(v: versions.Versions, text: str) -> str:
    """text with every generated part rewritten from v."""
    text = BLOCK.sub(lambda m: m[1] + BLOCKS[m["name"]](v) + m[4], text)
    text = VALUE.sub(lambda m: m[1] + value(v, m["key"]) + m[4], text)
    return TAG.sub(lambda m: _tag(v, m), text)


def scanned_files(root: Path) -> list[Path]:
    files = []
    for name in SCANNED:
        path = root / name
        files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [p for p in files if p.is_file()]


def pinned_literals(v: versions.Versions) -> set[str]:
    """Every version versions.toml pins, as it may be spelled (torch with and without its +cuNNN tag, cuDNN
    as major.minor.patch too)."""
    found = set(v.default.python.values())
    for var in v.variants.values():
        found |= {var.torch, var.torchaudio, var.cudnn, var.cuda, var.base_image}
        found |= {versions.public(var.torch), versions.public(var.torchaudio)}
        found.add(".".join(str(n) for n in versions.release(var.cudnn, 3)))
    return found


def literal_pattern(literals: set[str]) -> re.Pattern:
    alternatives = "|".join(re.escape(x) for x in sorted(literals, key=len, reverse=True))
    return re.compile(rf"(?<![\w.])(?:{alternatives})(?!\w|\.\d)")


def _hand_written(text: str) -> list[tuple[int, str]]:
    """(line number, line) of what is not generated or quoted, generated parts blanked."""
    blank = lambda m: "\n" * m[0].count("\n")  # noqa: E731 - keeps line numbers
    text = TAG.sub("", VALUE.sub("", QUOTED_REGION.sub(blank, BLOCK.sub(blank, text))))
    return [(n, "" if QUOTED.search(line) else line) for n, line in enumerate(text.splitlines(), 1)]


def literals_in(text: str, pattern: re.Pattern) -> list[tuple[int, str]]:
    """(line number, literal) of each pinned version spelled by hand in text."""
    return [(n, m[0]) for n, line in _hand_written(text) for m in pattern.finditer(line)]


def check(root: Path = ROOT) -> list[str]:
    """Stale generated parts and hand-spelled versions in the scanned files; [] when all is well."""
    v = versions.load(root / "versions.toml")
    pattern = literal_pattern(pinned_literals(v))
    problems = []
    for path in scanned_files(root):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(errors="replace")
        if regenerate(v, text) != text:
            problems.append(f"{rel}: generated parts differ from versions.toml: run `make generate`")
        for number, literal in literals_in(text, pattern):
            problems.append(
                f"{rel}:{number}: {literal} is spelled by hand: generate it (scripts/imagetools/"
                "generated.py), or mark the line `quoted: WHY` if it quotes a past version"
            )
    return problems


def write(root: Path = ROOT) -> list[str]:
    """Rewrite the generated parts in place; the files that changed."""
    v = versions.load(root / "versions.toml")
    changed = []
    for path in scanned_files(root):
        text = path.read_text(errors="replace")
        new = regenerate(v, text)
        if new != text:
            path.write_text(new)
            changed.append(path.relative_to(root).as_posix())
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m imagetools.release.generated", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--write", action="store_true", help="rewrite the generated parts (else check)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this checkout)")
    args = parser.parse_args(argv)
    if args.write:
        for rel in write(args.root):
            print(f"generated: {rel}")
        return 0
    problems = check(args.root)
    for line in problems:
        print(f"imagetools.release.generated: {line}", file=sys.stderr)
    return outcome.EXIT[outcome.FAIL] if problems else 0


if __name__ == "__main__":
    sys.exit(main())
