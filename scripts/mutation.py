#!/usr/bin/env python3
"""Mutation testing of the pure-logic modules, each against its own tests (`make mutation`).

mutmut makes small wrong changes to a module (`>=` -> `>`, `and` -> `or`, a constant changed, a
call dropped) and runs that module's own tests on each; a change no test notices ("survived") is a
check missing or a change that means nothing (an equivalent mutant). docs/testing.md records the
score per module and why each survivor is left.

mutmut only imports the code under test from ./, src/ or source/, so each target runs in its own
scratch copy of the repository with the packages under src/. Targets are globs, so a module split
into several files stays covered. Too slow for CI (minutes per module on 2 cores); run by hand.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from ftenv import variables  # noqa: E402

#: What the tests read besides the packages (docs, the Dockerfile, versions.toml, workflows ...).
COPIED = [
    *("tests", "docs", "docker", "benchmarks", ".github", "scripts"),
    *("versions.toml", "README.md", "Makefile"),
]

#: The repository's pytest import path (pyproject.toml), replaced in the scratch copies.
PYTEST_PATH = 'pythonpath = ["scripts", "tests"]'


@dataclass(frozen=True)
class Target:
    name: str
    modules: tuple[str, ...]  # globs below scripts/
    tests: tuple[str, ...]  # globs below the repository root


TARGETS = [
    Target("sdpa", ("ftenv/attention/sdpa.py",), ("tests/ftenv/attention/test_sdpa.py",)),
    # The step statistics and verdicts, one target per module of the split wing, all against the
    # step-statistics tests. watchdog/thresholds.py holds constants only, which mutmut (it mutates
    # function bodies) leaves alone; the boundary tests pin each of them.
    *(
        Target(name, (f"ftenv/watchdog/{name}.py",), ("tests/ftenv/watchdog/test_stats.py",))
        for name in ("stats", "detector", "step", "fixes")
    ),
    Target(
        "funasr_log",
        ("ftenv/watchdog/funasr_log.py",),
        ("tests/ftenv/watchdog/test_funasr_log.py", "tests/ftenv/watchdog/test_analyze.py"),
    ),
    Target("cluster_env", ("ftenv/launch/cluster_env.py",), ("tests/ftenv/launch/test_cluster_env.py",)),
    Target(
        "release",
        ("imagetools/release/command.py",),
        ("tests/imagetools/release/test_release*.py",),
    ),
    Target("versions", ("ftenv/stack/versions.py",), ("tests/ftenv/stack/test_versions.py",)),
    # The release-check tooling, one target per pure-logic module of imagetools. The tags, the bake
    # file, the checks and the workflow rules are exercised by both release test files (the checks
    # call the others); the lock split has its own tests, and the release check runs its `check`.
    *(
        Target(
            name,
            (f"imagetools/{name}.py",),
            ("tests/imagetools/test_tags_build_args.py", "tests/imagetools/release/test_release.py"),
        )
        for name in ("tags", "build_args")
    ),
    *(
        Target(
            name,
            (f"imagetools/{path}.py",),
            ("tests/imagetools/release/test_release.py", "tests/imagetools/release/test_release_check.py"),
        )
        for name, path in (
            ("bake", "bake"),
            ("checks", "release/checks"),
            ("workflow_rules", "release/workflow_rules"),
        )
    ),
    Target(
        "locks",
        ("imagetools/locks.py",),
        ("tests/imagetools/test_locks.py", "tests/imagetools/release/test_release_check.py"),
    ),
    # The release manifest's markdown, through `release manifest` in-process (the script that runs it
    # in the release workflow is tested in a subprocess, which a mutant does not reach).
    Target(
        "manifest", ("imagetools/release/manifest.py",), ("tests/imagetools/release/test_release_cli.py",)
    ),
]


#: mutmut's exit codes of a detected mutant (mutmut/stats.py): a test failed (1, 3), or the tests
#: ran out of time (an endless loop; mutmut's own score counts these as caught too).
DETECTED = frozenset({1, 3, 24, -24, 36, 152, 255})


def matching(patterns: tuple[str, ...], base: Path) -> list[str]:
    files = {p.relative_to(base).as_posix() for p in base.rglob("*.py")}
    return sorted(f for f in files if any(fnmatch.fnmatch(f, pat) for pat in patterns))


def mutmut_config(modules: list[str], tests: list[str]) -> str:
    def toml_list(items: list[str]) -> str:
        return "[" + ", ".join(json.dumps(i) for i in items) + "]"

    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["src"]\n'
        f"only_mutate = {toml_list(['src/' + m for m in modules])}\n"
        f"also_copy = {toml_list(COPIED)}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(tests)}\n"
        # -p no:cacheprovider: the scratch copy needs no .pytest_cache.
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]\n'
        # torch is imported by some test modules: fork from a server that has not run pytest.
        'process_isolation = "forkserver"\n'
    )


def survivor_diffs(mutated: Path, modules: list[str], survivors: list[str]) -> list[str]:
    """Each survivor as a diff of its function against the original. mutmut keeps every variant of
    a function in the mutated file (x_name__mutmut_orig, x_name__mutmut_3, ...); reading them there
    is much faster than one `mutmut show` process per survivor."""
    functions = {}
    for module in modules:
        text = (mutated / module).read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and "__mutmut_" in node.name:
                # The name normalised, so that a changed default argument shows in the diff.
                source = lines[node.lineno - 1 : node.end_lineno]
                functions[node.name] = [source[0].replace(node.name, "f", 1), *source[1:]]
    diffs = []
    for name in survivors:
        function = name.rsplit(".", 1)[1]
        orig = functions.get(function.rsplit("__mutmut_", 1)[0] + "__mutmut_orig", [])
        diff = difflib.unified_diff(orig, functions.get(function, []), lineterm="", n=1)
        diffs.append("\n".join(line for line in diff if not line.startswith(("---", "+++"))))
    return diffs


def run_target(target: Target, workers: int, keep: Path | None) -> dict:
    modules = matching(target.modules, ROOT / "scripts")
    tests = matching(target.tests, ROOT)
    if not modules or not tests:
        raise SystemExit(f"{target.name}: no module ({target.modules}) or no test ({target.tests}) matches")
    work = Path(tempfile.mkdtemp(prefix=f"mutation-{target.name}-"))
    try:
        for name in COPIED:
            src = ROOT / name
            if src.is_dir():
                shutil.copytree(src, work / name, ignore=shutil.ignore_patterns("__pycache__"))
            elif src.exists():
                shutil.copy2(src, work / name)
        for package in ("ftenv", "imagetools"):
            shutil.copytree(ROOT / "scripts" / package, work / "src" / package)
        # pytest's pythonpath would put scripts/ (the unmutated packages) before src/: tests/ only.
        pyproject = (ROOT / "pyproject.toml").read_text().replace(PYTEST_PATH, 'pythonpath = ["tests"]')
        pyproject += mutmut_config(modules, tests)
        (work / "pyproject.toml").write_text(pyproject)
        env = variables.environment()
        env.pop("PYTHONPATH", None)
        start = time.monotonic()
        cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(workers)]
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        seconds = time.monotonic() - start
        codes = {}
        for module in modules:
            meta = work / "mutants/src" / (module + ".meta")
            if meta.exists():
                codes.update(json.loads(meta.read_text())["exit_code_by_key"])
        if proc.returncode != 0 or not codes:
            sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
            raise SystemExit(f"{target.name}: mutmut run failed (exit {proc.returncode})")
        survivors = sorted(k for k, c in codes.items() if c not in DETECTED)
        diffs = survivor_diffs(work / "mutants/src", modules, survivors)
        return {
            "target": target.name,
            "modules": modules,
            "tests": tests,
            "killed": len(codes) - len(survivors),
            "total": len(codes),
            "seconds": round(seconds),
            "survivors": dict(zip(survivors, diffs, strict=True)),
        }
    finally:
        if keep:
            shutil.copytree(work, keep / target.name, dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("targets", nargs="*", help=f"some of {[t.name for t in TARGETS]} (default: all)")
    parser.add_argument("--workers", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--json", type=Path, help="also write the results (survivors with diffs) here")
    parser.add_argument("--keep", type=Path, help="keep each scratch copy below this folder")
    args = parser.parse_args(argv)
    unknown = set(args.targets) - {t.name for t in TARGETS}
    if unknown:
        parser.error(f"unknown target(s) {sorted(unknown)}; known: {[t.name for t in TARGETS]}")
    results = []
    for target in TARGETS:
        if args.targets and target.name not in args.targets:
            continue
        r = run_target(target, args.workers, args.keep)
        results.append(r)
        score = 100 * r["killed"] / r["total"]
        print(f"{r['target']:12} {r['killed']:4}/{r['total']:<4} killed ({score:.0f}%)  {r['seconds']} s")
        for name, diff in r["survivors"].items():
            print(f"  survived: {name}\n" + "".join(f"    {ln}\n" for ln in diff.splitlines()))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
