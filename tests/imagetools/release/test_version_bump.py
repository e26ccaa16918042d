"""A version bump is one edit of versions.toml plus `make generate`: on a copy of the repository,
funasr and transformers are bumped, the regeneration runs (its lock step stubbed by
tests/support/lock_stub.py: no network here), and only versions.toml, generated files and the locks change,
no file still spells the old versions, and the tests that check the pins pass unedited. A version
planted by hand is shown to fail both checks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from imagetools.release import generated
from support import ROOT

LOCK_STUB = f"{sys.executable} {ROOT / 'tests/support/lock_stub.py'}"
BUMPED = ("funasr", "transformers")
#: The tests that check tags, labels, bake targets and locks against the pins.
PIN_TESTS = (
    "tests/imagetools/release/test_release.py",
    "tests/imagetools/test_locks.py",
    "tests/imagetools/test_tags_build_args.py",
    "tests/ftenv/stack/test_versions.py",
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def copy_repo(dest: Path) -> Path:
    """The working tree's tracked and untracked (not ignored) files, committed in a new repo."""
    names = git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "copy")
    return dest


def next_patch(version: str) -> str:
    *head, last = version.split(".")
    return ".".join([*head, str(int(last) + 1)])


def bump(repo: Path) -> dict[str, tuple[str, str]]:
    """The one edit: funasr and transformers to their next patch release; {name: (old, new)}."""
    path = repo / "versions.toml"
    text = path.read_text()
    pins = tomllib.loads(text)["python"]
    changes = {name: (pins[name], next_patch(pins[name])) for name in BUMPED}
    for name, (old, new) in changes.items():
        text, n = re.subn(rf'(?m)^{name} = "{re.escape(old)}"$', f'{name} = "{new}"', text)
        assert n == 1, name
    path.write_text(text)
    return changes


def regenerate(repo: Path) -> None:
    r = subprocess.run(
        # PY: the venv's python renders the docs (the copy has no venv of its own).
        ["make", "-s", "-C", str(repo), "generate", f"LOCK_COMPILE={LOCK_STUB}", f"PY={sys.executable}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def changed_files(repo: Path) -> set[str]:
    stat = git(repo, "diff", "--stat=200", "--stat-name-width=200")
    return {line.split("|")[0].strip() for line in stat.splitlines() if "|" in line}


def leftovers(repo: Path, old: set[str]) -> list[str]:
    """path:line of each tracked file (locks aside) that still spells one of the old versions."""
    pattern = generated.literal_pattern(old)
    found = []
    for name in git(repo, "ls-files").splitlines():
        if name.startswith("docker/locks/") and name.endswith(".txt"):
            continue
        path = repo / name
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        found += [f"{name}:{n}: {lit}" for n, lit in generated.literals_in(text, pattern)]
    return found


def generated_files(root: Path) -> list[str]:
    """The scanned files that hold a generated part (relative paths)."""
    out = []
    for p in generated.scanned_files(root):
        text = p.read_text(errors="replace")
        if generated.BLOCK.search(text) or generated.VALUE.search(text) or generated.TAG.search(text):
            out.append(p.relative_to(root).as_posix())
    return out


@pytest.fixture(scope="module")
def bumped(tmp_path_factory):
    repo = copy_repo(tmp_path_factory.mktemp("bump"))
    changes = bump(repo)
    regenerate(repo)
    return repo, changes


def test_a_bump_changes_only_versions_generated_files_and_locks(bumped):
    repo, changes = bumped
    changed = changed_files(repo)
    allowed = {"versions.toml", "docker/docker-bake.json", *generated_files(repo)}
    assert {p for p in changed if p not in allowed and not p.startswith("docker/locks/")} == set()
    # ...and the regeneration did reach every kind of generated part.
    assert {"versions.toml", "README.md", "docker/docker-bake.json", "docker/locks/cu130.txt"} <= changed
    assert "docs/examples/docker/finetune-one-gpu.sh" in changed
    assert generated.check(repo) == []
    readme = (repo / "README.md").read_text()
    for name, (old, new) in changes.items():
        assert f"{name} {new}" in readme and f"{name} {old}" not in readme


def test_no_file_spells_the_old_versions_after_a_bump(bumped):
    repo, changes = bumped
    old = {old for old, _ in changes.values()}
    assert leftovers(repo, old) == []


def test_the_pin_tests_pass_on_the_bumped_copy(bumped):
    """They derive what they expect from versions.toml, so the bump needs no edit of a test."""
    repo, _ = bumped
    env = {k: v for k, v in os.environ.items() if k != "FTENV_VERSIONS_FILE"}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *PIN_TESTS],
        cwd=repo,
        env=env | {"PYTHONPATH": str(repo / "scripts")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_a_version_planted_by_hand_fails_the_checks(tmp_path):
    repo = copy_repo(tmp_path)
    funasr = tomllib.loads((repo / "versions.toml").read_text())["python"]["funasr"]
    with (repo / "docs/finetune.md").open("a") as f:
        f.write(f"\nTested with funasr {funasr}.\n")
    with (repo / "scripts/ftenv/trainer/stall.py").open("a") as f:
        f.write(f"# works with funasr {funasr}\n")
    git(repo, "commit", "-qam", "plant")
    # The docs check names the planted line before any bump...
    assert any(p.startswith("docs/finetune.md:") and funasr in p for p in generated.check(repo))
    # ...and after a bump both planted lines are left behind, while the diff looks clean.
    changes = bump(repo)
    regenerate(repo)
    found = leftovers(repo, {old for old, _ in changes.values()})
    assert {x.split(":")[0] for x in found} == {"docs/finetune.md", "scripts/ftenv/trainer/stall.py"}
    # A line that says it quotes a past version is not a leftover.
    lines = (
        (repo / "docs/finetune.md")
        .read_text()
        .replace(f"funasr {funasr}.", f"funasr {funasr}. <!-- quoted: the run of that day -->")
    )
    assert generated.literals_in(lines, generated.literal_pattern({funasr})) == []
    # So is a recorded run's region; a version after the region's end is a literal again.
    region = f"<!-- quoted: a run -->\nfunasr {funasr}\n<!-- /quoted -->\nfunasr {funasr}\n"
    assert generated.literals_in(region, generated.literal_pattern({funasr})) == [(4, funasr)]


def test_a_stale_generated_part_fails_the_check(tmp_path):
    repo = copy_repo(tmp_path)
    readme = repo / "README.md"
    readme.write_text(readme.read_text().replace("| `cu130` (default) |", "| `cu130` |", 1))
    assert generated.check(repo) == [
        "README.md: generated parts differ from versions.toml: run `make generate`"
    ]


def test_the_docs_spell_versions_only_in_generated_parts():
    assert generated.check(ROOT) == []
