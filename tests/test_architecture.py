"""The package keeps its shape. Which way imports run (the wings, floor 0, no circle, imagetools'
parts) is the import contract in pyproject.toml, checked by `make lint` (lint-imports) and here on
the tree and on copies with a planted import; what the contract cannot say is checked here: at
most MAX_FLOORS floors (imports read with ast, lazy ones included), modules short unless their
docstring says why. The last tests hold docs/architecture.md and the README's summary to the
contract's wings, in order, and to every folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from functools import partial
from pathlib import Path

import pytest

from ftenv import variables
from support import ROOT, architecture_doc, child_env, house_rules, package_shape
from support.doc_refs import broken_links
from support.package_shape import graph, longest_chain

PACKAGE = ROOT / "scripts/ftenv"
MAX_FLOORS = 5  # modules in the longest import chain below the CLI
MAX_LINES = 300
LONG_REASON = "Long because"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
IGNORED = shutil.ignore_patterns("__pycache__")
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
#: The layers contract, top first: the CLI, the wings, then floor 0 from `stack` down.
LAYERS = next(c for c in CONTRACTS if c["type"] == "layers")["layers"]
#: The wings, lowest first: a module may import its own wing and the ones before it.
WINGS = tuple(reversed(LAYERS[1 : LAYERS.index("stack") + 1]))
#: Floor-0 modules every wing may import (the layers below the lowest wing).
SHARED = {"ftenv"} | {
    f"ftenv.{m.strip()}" for layer in LAYERS[LAYERS.index("stack") + 1 :] for m in layer.split("|")
}


#: The readings of tests/support/package_shape.py, bound to this package's rules.
wing_of = partial(package_shape.wing_of, wings=WINGS)
long_modules = partial(package_shape.long_modules, max_lines=MAX_LINES, reason=LONG_REASON)


def lint_imports(scripts: Path) -> subprocess.CompletedProcess:
    """lint-imports with pyproject.toml's contracts over the ftenv and imagetools under `scripts`."""
    env = child_env()
    env["PYTHONPATH"] = f"{scripts}:{env['PYTHONPATH']}"
    return subprocess.run(
        [str(LINT_IMPORTS), str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=scripts.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# --- the tree as it is -----------------------------------------------------------------------------

EDGES = graph(PACKAGE)


def test_the_import_contracts_hold():
    run = lint_imports(ROOT / "scripts")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in run.stdout
    assert WINGS[0] == "stack" and WINGS[-1] == "commands" and {"ftenv.text", "ftenv.variables"} <= SHARED


def test_at_most_five_floors():
    """The CLI imports every command (ftenv.commands), each a parser over its wing: they stand on top
    of every chain, and the floors are below them. The shared modules are floor 0 under every wing
    (the variables, the exit codes, the wording of numbers), so the floors are counted above them."""
    assert EDGES["ftenv.cli"], "the CLI imports its commands explicitly"
    below_cli = {
        m: e - SHARED
        for m, e in EDGES.items()
        if m != "ftenv.cli" and wing_of(m) != "commands" and m not in SHARED
    }
    chain = longest_chain(below_cli)
    assert len(chain) <= MAX_FLOORS, " <- ".join(reversed(chain))


def test_the_graph_sees_the_package():
    assert len(EDGES) > 20 and "ftenv.text" in EDGES and EDGES["ftenv.text"] == set()


def test_modules_are_short_or_say_why():
    assert long_modules(PACKAGE) == []


def test_the_host_tools_are_short_or_say_why_too():
    """imagetools and the scripts beside it (the GPU kit, the build and mutation scripts) keep the
    same rule, though they never go into the image."""
    assert long_modules(ROOT / "scripts/imagetools") == []
    long_scripts = [p for p in (ROOT / "scripts").glob("*.py") if len(p.read_text().splitlines()) > MAX_LINES]
    assert long_scripts == []


def test_every_folder_of_the_package_is_a_package():
    """A folder without __init__.py is a namespace package: pytest's and tools' rules for packages
    (and the package's own docstring) miss it."""
    folders = [d for d in PACKAGE.rglob("*") if d.is_dir() and d.name != "__pycache__"]
    assert folders and [d for d in folders if not (d / "__init__.py").exists()] == []


# --- each rule on a copy with a planted violation ---------------------------------------------------


@pytest.fixture
def copy(tmp_path) -> Path:
    dest = tmp_path / "ftenv"
    shutil.copytree(PACKAGE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


#: One planted import per contract (the file under scripts/, the line), and what lint-imports says.
PLANTED_IMPORTS = {
    "ftenv: each wing imports": (
        "ftenv/attention/sdpa.py",
        "from ftenv.trainer import stall",
        "ftenv.attention.sdpa -> ftenv.trainer.stall",
    ),
    "ftenv: no import circle": (
        "ftenv/watchdog/thresholds.py",
        "from ftenv.watchdog import silence",
        ".thresholds -> .silence",
    ),
    "ftenv (the image's package)": (
        "ftenv/text.py",
        "import imagetools.tags",
        "ftenv.text -> imagetools.tags",
    ),
    "imagetools: one job": (
        "imagetools/release/checks.py",
        "from imagetools.local import machine",
        "imagetools.release.checks -> imagetools.local.machine",
    ),
    "imagetools: the shared top": (
        "imagetools/bake.py",
        "from imagetools import gpukit",
        "imagetools.bake -> imagetools.gpukit",
    ),
    "imagetools imports ftenv's stack": (
        "imagetools/local/build_and_run.py",
        "from ftenv.report import render",
        "imagetools.local.build_and_run -> ftenv.report.render",
    ),
}


def test_each_contract_is_planted():
    assert sorted(next(n for n in PLANTED_IMPORTS if c["name"].startswith(n)) for c in CONTRACTS) == sorted(
        PLANTED_IMPORTS
    )


def test_each_contract_breaks_on_its_planted_import(tmp_path):
    """lint-imports once over a copy of scripts/ftenv and scripts/imagetools with every planted
    import: each contract is broken, with its planted import named under it (a plant may break
    more than its own: layers are transitive)."""
    scripts = tmp_path / "scripts"
    for package in ("ftenv", "imagetools"):
        shutil.copytree(ROOT / "scripts" / package, scripts / package, ignore=IGNORED)
    for module, line, _ in PLANTED_IMPORTS.values():
        package_shape.plant(scripts, module, line)
    run = lint_imports(scripts)
    assert run.returncode != 0 and f"Contracts: 0 kept, {len(CONTRACTS)} broken." in run.stdout, run.stdout
    broken = run.stdout.split("Broken contracts", 1)[1]
    starts = sorted(broken.find(n) for n in PLANTED_IMPORTS)
    for contract, (_, _, named) in PLANTED_IMPORTS.items():
        mine = broken.find(contract)
        assert mine > 0 and named in broken[mine : next((i for i in starts if i > mine), None)], contract


def test_a_planted_long_chain_is_found(tmp_path):
    package = tmp_path / "ftenv"
    (package / "stack").mkdir(parents=True)
    for path in ("__init__.py", "stack/__init__.py", "stack/m0.py"):
        (package / path).write_text('"""x"""\n')
    for i in range(1, MAX_FLOORS + 1):
        (package / f"stack/m{i}.py").write_text(f"from ftenv.stack import m{i - 1}\n")
    chain = longest_chain(graph(package))
    assert chain == [f"ftenv.stack.m{i}" for i in range(MAX_FLOORS, -1, -1)]
    assert len(chain) == MAX_FLOORS + 1
    (package / f"stack/m{MAX_FLOORS}.py").write_text('"""x"""\n')  # cut the top: within the limit
    assert len(longest_chain(graph(package))) == MAX_FLOORS


def test_a_planted_long_module_is_found_unless_it_says_why(copy):
    before = long_modules(copy)
    body = "".join(f"X{i} = {i}\n" for i in range(MAX_LINES))
    (copy / "watchdog/planted.py").write_text('"""A planted module."""\n' + body)
    assert [m for m in long_modules(copy) if m not in before] == [
        f"ftenv/watchdog/planted.py ({MAX_LINES + 1} lines)"
    ]
    (copy / "watchdog/planted.py").write_text(
        f'"""A planted module.\n\n{LONG_REASON} it is a table of {MAX_LINES} constants."""\n' + body
    )
    assert long_modules(copy) == before


# --- docs/architecture.md describes this tree -------------------------------------------------------

ARCHITECTURE_DOC = ROOT / "docs/architecture.md"


def test_the_architecture_doc_names_the_wings_in_order_and_every_folder():
    text = ARCHITECTURE_DOC.read_text()
    assert architecture_doc.problems(text, ROOT, WINGS, SHARED) == []
    assert broken_links(ARCHITECTURE_DOC, text) == []
    rows = {
        w: next(r for r in text.splitlines() if r.startswith(f"| `{w}` |")) for w in ("watchdog", "model")
    }
    wings = "the doc's wings, lowest first"
    broken = {
        wings: [
            text.replace(rows["watchdog"], rows["watchdog"].replace("`watchdog`", "`watch`")),  # renamed
            text.replace(rows["model"] + "\n", ""),  # dropped
            text.replace(
                f"{rows['watchdog']}\n{rows['model']}", f"{rows['model']}\n{rows['watchdog']}"
            ),  # swapped
            text.replace(rows["model"], rows["model"] + "\n| `widgets` | x |"),  # not in the package
        ],
        "scripts/ftenv/launch/runlife/ is not a wing": [
            text.replace("`launch/runlife/`", "`launch/run-life/`")
        ],
        "does not name ftenv.text": [text.replace("`ftenv.text`", "`ftenv.texts`")],
        "tests/schemas/ is not named": [text.replace("`tests/schemas/`", "`tests/schema/`")],
    }
    for expected, copies in broken.items():
        for copy_ in copies:
            found = architecture_doc.problems(copy_, ROOT, WINGS, SHARED)
            assert copy_ != text and [p for p in found if expected in p] == found != [], (expected, found)


def test_the_readme_sums_up_the_same_wings_and_links_the_doc():
    readme = (ROOT / "README.md").read_text()
    assert architecture_doc.readme_problems(readme, ROOT, WINGS) == []
    for broken in (
        readme.replace("watchdog, model,", "model, watchdog,"),
        readme.replace("(docs/architecture.md)", ""),
    ):
        assert broken != readme and architecture_doc.readme_problems(broken, ROOT, WINGS)


# --- the variable and exit-code rules, over every Python folder ---------------------------------------

#: Every Python folder the rules cover, and the file of each the planted tests break.
RULE_FOLDERS = {
    "scripts/ftenv": "watchdog/timer.py",
    "scripts/imagetools": "local/emulated.py",
    "scripts": "gpu_checks.py",  # the scripts beside the packages (scripts/*.py)
    "benchmarks": "nccl_network.py",
    "tests/support": "example_runs.py",
}
#: The one home of each rule, where its names and reads belong.
RULE_HOMES = {
    "spelling": {"scripts/ftenv/variables.py"},
    "reads": {"scripts/ftenv/variables.py"},
    "exit": {"scripts/ftenv/outcome.py"},
}
REGISTERED = {v.name for v in variables.REGISTRY}


def rule_files(root: Path, folder: str) -> list[Path]:
    """The Python files of a folder the rules cover (scripts/ itself: only the files beside the
    packages, whose own folders are listed apart)."""
    base = root / folder
    return sorted(base.glob("*.py")) if folder == "scripts" else sorted(base.rglob("*.py"))


def rule_findings(root: Path, folder: str, rule: str) -> list[str]:
    """`path:line: what; fix` for each breach of rule in folder, less its home."""
    files = [p for p in rule_files(root, folder) if str(p.relative_to(root)) not in RULE_HOMES[rule]]
    return house_rules.findings(files, root, REGISTERED, rule)


@pytest.mark.parametrize("rule", sorted(RULE_HOMES))
@pytest.mark.parametrize("folder", sorted(RULE_FOLDERS))
def test_every_folder_keeps_the_variable_and_exit_code_rules(folder, rule):
    """spelling: a registered variable's name only in ftenv/variables.py; reads: a registered
    variable read only through its accessors; exit: an exit code only as ftenv/outcome.py names it."""
    assert rule_files(ROOT, folder)
    assert rule_findings(ROOT, folder, rule) == []


#: One breach of each rule as planted at the end of a file: the code, and each finding's words with its
#: line counted from the end of the code.
PLANTS = {
    "spelling": (
        'SWITCH = "FTENV_PLANTED"\nGPUS = "CUDA_VISIBLE_DEVICES"\nHOME = "HOME"\n',
        [("FTENV_PLANTED", 2), ("CUDA_VISIBLE_DEVICES", 1)],
    ),
    "reads": (
        "import os\n\nHOME = os.environ.get('HOME')\nHELD = os.environ.get(variables.CUDA_VISIBLE_DEVICES)\n"
        "SET = variables.REPORT in os.environ\n",
        [("os.environ.get(variables.CUDA_VISIBLE_DEVICES)", 1), ("variables.REPORT in a mapping", 0)],
    ),
    "exit": ("\n\ndef main():\n    return 2\n", [("main() returns 2", 0)]),
}
FIXES = {"spelling": house_rules.SPELLING_FIX, "reads": house_rules.READ_FIX, "exit": house_rules.EXIT_FIX}


@pytest.mark.parametrize("rule", sorted(PLANTS))
@pytest.mark.parametrize("folder", sorted(RULE_FOLDERS))
def test_a_planted_breach_is_found_in_every_folder(tmp_path, folder, rule):
    """The folder's walk reaches the file, and the planted breach is found there, named by file,
    line and fix."""
    rel = f"{folder}/{RULE_FOLDERS[folder]}"
    assert ROOT / rel in rule_files(ROOT, folder)
    planted = tmp_path / rel
    planted.parent.mkdir(parents=True)
    text = (ROOT / rel).read_text()
    code, expected = PLANTS[rule]
    assert house_rules.findings([ROOT / rel], ROOT, REGISTERED, rule) == []
    planted.write_text(text + "\n" + code)
    last = len((text + "\n" + code).splitlines())
    found = house_rules.findings([planted], tmp_path, REGISTERED, rule)
    assert found == [f"{rel}:{last - back}: {words}; {FIXES[rule]}" for words, back in expected]
