"""The package keeps its shape: the imports of scripts/ftenv (read with ast, lazy ones included)
form no circle and at most MAX_FLOORS floors, run one way between the wings, and modules stay
short unless their docstring says why. Each rule is also shown failing on a copy of the package
with a planted violation. The last tests hold docs/architecture.md and the README's summary to the
same wings, in order, and to every folder."""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path

import pytest

from ftenv import variables
from support import ROOT, architecture_doc, house_rules, package_shape
from support.doc_refs import broken_links
from support.package_shape import cycles, graph, imports, longest_chain, module_name, plant

PACKAGE = ROOT / "scripts/ftenv"
MAX_FLOORS = 5  # modules in the longest import chain below the CLI
MAX_LINES = 300
LONG_REASON = "Long because"
#: The wings, lowest first: a module may import its own wing and the ones before it.
WINGS = (
    "stack",
    "attention",
    "report",
    "steps",
    "model",
    "data",
    "trainer",
    "train",
    "evaluate",
    "selfcheck",
    "commands",
)
#: Floor-0 modules every wing may import (they import nothing of ftenv but ftenv.text).
SHARED = {"ftenv", "ftenv.text", "ftenv.variables", "ftenv.outcome"}


#: The readings of tests/support/package_shape.py, bound to this package's rules.
wing_of = partial(package_shape.wing_of, wings=WINGS)
wrong_way_imports = partial(
    package_shape.wrong_way_imports, wings=WINGS, shared=SHARED, top="ftenv.cli", host_only="imagetools"
)
long_modules = partial(package_shape.long_modules, max_lines=MAX_LINES, reason=LONG_REASON)


def floor_zero_breaches(edges: dict[str, set[str]]) -> list[str]:
    """Imports of a shared floor-0 module other than ftenv.text: every wing imports them, so any
    more would pull a wing under every other."""
    return [
        f"{name} imports {target}"
        for name in sorted(SHARED & edges.keys())
        for target in sorted(edges[name])
        if target != "ftenv.text"
    ]


# --- the tree as it is -----------------------------------------------------------------------------

EDGES, RAW = graph(PACKAGE)


def test_no_import_circle():
    assert cycles(EDGES) == []


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


def test_imports_run_one_way_between_the_wings():
    assert wrong_way_imports(EDGES, RAW) == []
    # The rule sees the package: every wing is there, and lower wings are imported from above.
    assert {wing_of(m) for m in EDGES} >= set(WINGS)
    assert any(wing_of(m) == "steps" and wing_of(t) == "report" for m in EDGES for t in EDGES[m])


def trainer_imports_of_train(edges: dict[str, set[str]]) -> list[str]:
    """What each training process runs (ftenv.trainer) importing what runs before torchrun
    (ftenv.train): every rank would carry the launcher, and the two could not be told apart."""
    return [
        f"{name} imports {target}"
        for name in sorted(edges)
        for target in sorted(edges[name])
        if wing_of(name) == "trainer" and wing_of(target) == "train"
    ]


def test_the_trainer_never_imports_the_launcher():
    assert trainer_imports_of_train(EDGES) == []
    # The rule sees the two wings: the launcher imports the trainer's side, not the reverse.
    assert any(wing_of(m) == "train" and wing_of(t) == "trainer" for m in EDGES for t in EDGES[m])


def test_a_planted_trainer_import_of_the_launcher_is_found(copy):
    plant(copy, "trainer/runlife/hooks.py", "from ftenv.train.runlife import folder")
    assert trainer_imports_of_train(graph(copy)[0]) == [
        "ftenv.trainer.runlife.hooks imports ftenv.train.runlife.folder"
    ]


def test_the_shared_modules_stay_on_floor_zero():
    assert SHARED - {"ftenv"} <= EDGES.keys()
    assert floor_zero_breaches(EDGES) == []


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


def test_the_graph_sees_the_package():
    assert len(EDGES) > 20 and "ftenv.text" in EDGES and EDGES["ftenv.text"] == set()


# --- each rule on a copy with a planted violation ---------------------------------------------------


@pytest.fixture
def copy(tmp_path) -> Path:
    dest = tmp_path / "ftenv"
    shutil.copytree(PACKAGE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_a_planted_circle_is_found(copy):
    before = cycles(graph(copy)[0])
    plant(copy, "attention/facts.py", "from ftenv.report import render")  # render imports facts
    assert [c for c in cycles(graph(copy)[0]) if c not in before] == [
        ["ftenv.attention.facts", "ftenv.report.render"]
    ]


def test_a_planted_long_chain_is_found(tmp_path):
    package = tmp_path / "ftenv"
    (package / "stack").mkdir(parents=True)
    for path in ("__init__.py", "stack/__init__.py", "stack/m0.py"):
        (package / path).write_text('"""x"""\n')
    for i in range(1, MAX_FLOORS + 1):
        (package / f"stack/m{i}.py").write_text(f"from ftenv.stack import m{i - 1}\n")
    chain = longest_chain(graph(package)[0])
    assert chain == [f"ftenv.stack.m{i}" for i in range(MAX_FLOORS, -1, -1)]
    assert len(chain) == MAX_FLOORS + 1
    (package / f"stack/m{MAX_FLOORS}.py").write_text('"""x"""\n')  # cut the top: within the limit
    assert len(longest_chain(graph(package)[0])) == MAX_FLOORS


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        (
            "attention/sdpa.py",
            "from ftenv.trainer import stall",
            "ftenv.attention.sdpa (attention) imports ftenv.trainer.stall",
        ),
        (
            "steps/stats.py",
            "import ftenv.train.finetune",
            "ftenv.steps.stats (steps) imports ftenv.train.finetune",
        ),
        (
            "trainer/funasr_entry.py",
            "from ftenv.train import torchrun_command",
            "ftenv.trainer.funasr_entry (trainer) imports ftenv.train.torchrun_command",
        ),
        ("stack/versions.py", "from ftenv.attention import facts", "ftenv.stack.versions (stack) imports"),
        ("steps/timer.py", "from ftenv import cli", "ftenv.steps.timer imports ftenv.cli"),
        ("report/render.py", "from .. import cli", "ftenv.report.render imports ftenv.cli"),
        ("text.py", "import imagetools.generated", "ftenv.text imports imagetools.generated"),
    ],
)
def test_a_planted_wrong_way_import_is_found(copy, module, line, expected):
    plant(copy, module, line)
    found = wrong_way_imports(*graph(copy))
    assert any(f.startswith(expected) for f in found), found


@pytest.mark.parametrize("module", ["outcome.py", "variables.py"])
def test_a_planted_import_in_a_floor_zero_module_is_found(copy, module):
    plant(copy, module, "from ftenv.steps import thresholds")
    name = "ftenv." + module.removesuffix(".py")
    assert floor_zero_breaches(graph(copy)[0]) == [f"{name} imports ftenv.steps.thresholds"]


def test_a_planted_long_module_is_found_unless_it_says_why(copy):
    before = long_modules(copy)
    body = "".join(f"X{i} = {i}\n" for i in range(MAX_LINES))
    (copy / "steps/planted.py").write_text('"""A planted module."""\n' + body)
    assert [m for m in long_modules(copy) if m not in before] == [
        f"ftenv/steps/planted.py ({MAX_LINES + 1} lines)"
    ]
    (copy / "steps/planted.py").write_text(
        f'"""A planted module.\n\n{LONG_REASON} it is a table of {MAX_LINES} constants."""\n' + body
    )
    assert long_modules(copy) == before


# --- docs/architecture.md describes this tree -------------------------------------------------------

ARCHITECTURE_DOC = ROOT / "docs/architecture.md"


def test_the_architecture_doc_names_the_wings_in_order_and_every_folder():
    text = ARCHITECTURE_DOC.read_text()
    assert architecture_doc.problems(text, ROOT, WINGS, SHARED) == []
    assert broken_links(ARCHITECTURE_DOC, text) == []
    rows = {w: next(r for r in text.splitlines() if r.startswith(f"| `{w}` |")) for w in ("steps", "model")}
    wings = "the doc's wings, lowest first"
    broken = {
        wings: [
            text.replace(rows["steps"], rows["steps"].replace("`steps`", "`step`")),  # renamed
            text.replace(rows["model"] + "\n", ""),  # dropped
            text.replace(f"{rows['steps']}\n{rows['model']}", f"{rows['model']}\n{rows['steps']}"),  # swapped
            text.replace(rows["model"], rows["model"] + "\n| `widgets` | x |"),  # not in the package
        ],
        "scripts/ftenv/train/runlife/ is not a wing": [text.replace("`train/runlife/`", "`train/run-life/`")],
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
        readme.replace("steps, model,", "model, steps,"),
        readme.replace("(docs/architecture.md)", ""),
    ):
        assert broken != readme and architecture_doc.readme_problems(broken, ROOT, WINGS)


# --- imagetools: the host tooling imports what its __init__ docstring says ---------------------------

TOOLS = ROOT / "scripts/imagetools"
#: The wings of ftenv each part of imagetools may import (the longest matching module prefix
#: decides), as scripts/imagetools/__init__.py states it.
TOOLS_MAY_IMPORT = {
    "imagetools": {"stack", "variables", "outcome"},
    "imagetools.gpukit": {"stack", "variables", "outcome", "attention"},
    "imagetools.release.generated": {"stack", "variables", "outcome", "attention", "report", "trainer"},
}
#: The jobs' subpackages: each imports the top and itself, never another job.
TOOL_JOBS = ("release", "local", "gpukit")


def tool_import_violations(tools: Path) -> list[str]:
    """Imports of imagetools (lazy ones included) against its rule: ftenv wings beyond those its
    part may import, and one job's subpackage (or the shared top) importing another job's."""
    bad = []
    for path in sorted(tools.rglob("*.py")):
        name = module_name(path, tools)
        part = max((p for p in TOOLS_MAY_IMPORT if name == p or name.startswith(p + ".")), key=len)
        job = name.split(".")[1] if name.count(".") and name.split(".")[1] in TOOL_JOBS else None
        for base, taken in imports(path, name):
            named = [f"{base}.{t}" for t in taken] if base in ("ftenv", "imagetools") and taken else [base]
            for target in named:
                top, _, rest = target.partition(".")
                first = rest.split(".")[0]
                if top == "ftenv" and first not in TOOLS_MAY_IMPORT[part]:
                    bad.append(
                        f"{name} imports {target}: {part} may import ftenv's {sorted(TOOLS_MAY_IMPORT[part])}"
                    )
                if top == "imagetools" and first in TOOL_JOBS and first != job:
                    bad.append(f"{name} ({job or 'top'}) imports {target} (job {first})")
    return bad


def test_imagetools_imports_what_its_docstring_says():
    assert tool_import_violations(TOOLS) == []
    # The rule sees the tools: the GPU kit imports the attention rule, the top reads the stack.
    kit = imports(TOOLS / "gpukit/gpu_run.py", "imagetools.gpukit.gpu_run")
    assert ("ftenv.attention", ["sdpa"]) in kit
    assert ("ftenv.stack", ["versions"]) in imports(TOOLS / "tags.py", "imagetools.tags")


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        (
            "local/local.py",
            "from ftenv.attention import sdpa",
            "imagetools.local.local imports ftenv.attention",
        ),
        (
            "gpukit/gpu_run.py",
            "from ftenv.report import render",
            "imagetools.gpukit.gpu_run imports ftenv.report",
        ),
        ("tags.py", "import ftenv.train.finetune", "imagetools.tags imports ftenv.train.finetune"),
        ("release/scan.py", "from ftenv import selfcheck", "imagetools.release.scan imports ftenv.selfcheck"),
        (
            "release/checks.py",
            "from imagetools.local import machine",
            "imagetools.release.checks (release) imports imagetools.local (job local)",
        ),
        (
            "bake.py",
            "from imagetools import gpukit",
            "imagetools.bake (top) imports imagetools.gpukit (job gpukit)",
        ),
    ],
)
def test_a_planted_imagetools_import_is_found(tmp_path, module, line, expected):
    copy = tmp_path / "imagetools"
    shutil.copytree(TOOLS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert tool_import_violations(copy) == []
    plant(copy, module, line)
    found = tool_import_violations(copy)
    assert any(f.startswith(expected) for f in found), found


# --- the variable and exit-code rules, over every Python folder ---------------------------------------

#: Every Python folder the rules cover, and the file of each the planted tests break.
RULE_FOLDERS = {
    "scripts/ftenv": "steps/timer.py",
    "scripts/imagetools": "local/emulated.py",
    "scripts": "gpu_checks.py",  # the scripts beside the packages (scripts/*.py)
    "benchmarks": "nccl_network.py",
    "tests/support": "example_runs.py",
}
#: The one home of each rule, where its names and reads belong.
RULE_HOMES = {
    "spelling": {"scripts/ftenv/variables.py"},
    "raw": {"scripts/ftenv/variables.py"},
    "exit": {"scripts/ftenv/outcome.py"},
}
#: Findings that are right as they are, each (file, rule, the finding's words) with why.
RULE_EXCEPTIONS = {
    **{
        ("scripts/imagetools/build_args.py", "spelling", name): "the Dockerfile's ARG of the same name"
        for name in (
            "CUDA_VERSION",
            "TORCHAUDIO_VERSION",
            "CUDNN_PACKAGE",
            "CUDNN_VERSION",
            "TRANSFORMERS_VERSION",
            "FUNASR_VERSION",
            "MODELSCOPE_VERSION",
        )
    },
    **{
        ("scripts/imagetools/release/checks.py", "spelling", name): "the Dockerfile's ARG of the same name"
        for name in ("TRANSFORMERS_VERSION", "FUNASR_VERSION", "MODELSCOPE_VERSION")
    },
}
REGISTERED = {v.name for v in variables.REGISTRY}


def rule_files(root: Path, folder: str) -> list[Path]:
    """The Python files of a folder the rules cover (scripts/ itself: only the files beside the
    packages, whose own folders are listed apart)."""
    base = root / folder
    return sorted(base.glob("*.py")) if folder == "scripts" else sorted(base.rglob("*.py"))


def rule_findings(root: Path, folder: str, rule: str) -> list[str]:
    """`path:line: what; fix` for each breach of rule in folder, less its home and the exceptions."""
    files = [p for p in rule_files(root, folder) if str(p.relative_to(root)) not in RULE_HOMES[rule]]
    return [f for f in house_rules.findings(files, root, REGISTERED, rule) if not _excepted(f, rule)]


def _excepted(finding: str, rule: str) -> bool:
    path, _, rest = finding.partition(":")
    what = rest.partition(": ")[2].partition(";")[0]
    return (path, rule, what) in RULE_EXCEPTIONS


@pytest.mark.parametrize("rule", sorted(RULE_HOMES))
@pytest.mark.parametrize("folder", sorted(RULE_FOLDERS))
def test_every_folder_keeps_the_variable_and_exit_code_rules(folder, rule):
    """spelling: a variable's name only in ftenv/variables.py; raw: the environment read and set only
    through its accessors; exit: an exit code only as ftenv/outcome.py names it."""
    assert rule_files(ROOT, folder)
    assert rule_findings(ROOT, folder, rule) == []


def test_each_exception_is_still_needed():
    found = {
        (path, rule, what)
        for folder in RULE_FOLDERS
        for rule in RULE_HOMES
        for f in house_rules.findings(rule_files(ROOT, folder), ROOT, REGISTERED, rule)
        for path, _, rest in [f.partition(":")]
        for what in [rest.partition(": ")[2].partition(";")[0]]
    }
    assert set(RULE_EXCEPTIONS) - found == set()


#: One breach of each rule as planted at the end of a file: the code, and each finding's words with its
#: line counted from the end of the code.
PLANTS = {
    "spelling": (
        'SWITCH = "FTENV_PLANTED"\nPORT = "MASTER_PORT"\n',
        [("FTENV_PLANTED", 1), ("MASTER_PORT", 0)],
    ),
    "raw": (
        "import os\n\nPLANTED = os.environ\nHELD = PLANTED.get(variables.RANK)\n",
        [("os.environ", 1), ("a mapping's .get(variables.RANK)", 0)],
    ),
    "exit": ("\n\ndef main():\n    return 2\n", [("main() returns 2", 0)]),
}
FIXES = {"spelling": house_rules.SPELLING_FIX, "raw": house_rules.RAW_FIX, "exit": house_rules.EXIT_FIX}


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
