"""ftenv.launch.cache_dirs: caches that cannot be written where the image puts them move under the
temporary directory, one line says so, and writable ones stay.

"Not writable" is made with a regular file where a folder would be (nothing can be created under
it, even by root, who ignores permission bits): the same answer os.access() gives on a read-only
filesystem or for a HOME owned by another uid:gid. The container test (tests/container/
test_read_only_root.py) runs the real case: a read-only root and uid:gid 12345:12345.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

import pytest

from ftenv import cli
from ftenv.launch import cache_dirs
from support import GOOD_RECORD


@pytest.fixture
def blocked(tmp_path: Path) -> Path:
    """A HOME that cannot be written: its parent is a file."""
    (tmp_path / "ro").write_text("")
    return tmp_path / "ro/home"


def image_env(home: Path) -> dict[str, str]:
    """The cache variables as the image's Dockerfile sets them, under `home`."""
    return {
        "HOME": str(home),
        "XDG_CACHE_HOME": f"{home}/.cache",
        "HF_HOME": f"{home}/.cache/huggingface",
        "MODELSCOPE_CACHE": f"{home}/.cache/modelscope",
        "TORCH_HOME": f"{home}/.cache/torch",
        "TRITON_CACHE_DIR": f"{home}/.cache/triton",
    }


def test_writable_home_moves_nothing(tmp_path):
    assert cache_dirs.moves_needed(image_env(tmp_path / "home"), tmp=str(tmp_path)) is None


def test_unwritable_home_moves_every_cache_under_one_folder(blocked, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    moved = cache_dirs.made(cache_dirs.moves_needed(image_env(blocked), tmp=str(tmp)))
    base = tmp / f"ftenv-cache-{os.getuid()}"
    assert moved.base == base and base.is_dir() and stat.S_IMODE(base.stat().st_mode) == 0o700
    assert moved.env["HF_HOME"] == f"{base}/.cache/huggingface"
    assert moved.env["TRITON_CACHE_DIR"] == f"{base}/.cache/triton"
    # Unset ones whose library default is under HOME are set too (Triton's ~/.triton, CUDA's ~/.nv).
    assert moved.env["TRITON_HOME"] == str(base)
    assert moved.env["CUDA_CACHE_PATH"] == f"{base}/.nv/ComputeCache"
    # Inductor's default is in the temporary directory already: left alone when unset.
    assert "TORCHINDUCTOR_CACHE_DIR" not in moved.env
    names = {n for n, _ in cache_dirs.CACHE_VARS} - {"TORCHINDUCTOR_CACHE_DIR"}
    assert set(moved.env) == names
    assert all(cache_dirs.writable(Path(p)) for p in moved.env.values())
    assert "\n" not in moved.line and str(base) in moved.line and "HF_HOME" in moved.line


def test_a_writable_volume_keeps_its_cache(blocked, tmp_path):
    env = image_env(blocked) | {"HF_HOME": str(tmp_path / "hf-volume")}
    moved = cache_dirs.moves_needed(env, tmp=str(tmp_path))
    assert "HF_HOME" not in moved.env and "MODELSCOPE_CACHE" in moved.env


def test_a_set_variable_outside_home_moves_under_its_own_name(tmp_path, blocked):
    env = {"HOME": str(tmp_path / "home"), "TORCHINDUCTOR_CACHE_DIR": str(blocked / "inductor")}
    moved = cache_dirs.moves_needed(env, tmp=str(tmp_path))
    assert moved.env == {
        "TORCHINDUCTOR_CACHE_DIR": f"{tmp_path}/ftenv-cache-{os.getuid()}/torchinductor_cache_dir"
    }


def test_no_writable_temporary_directory_moves_nothing(blocked, tmp_path):
    """Nowhere better to go: the caches stay, and the library that needs one says what failed."""
    assert cache_dirs.moves_needed(image_env(blocked), tmp=str(blocked.parent / "tmp")) is None


def test_planning_the_moves_creates_nothing(blocked, tmp_path):
    moved = cache_dirs.moves_needed(image_env(blocked), tmp=str(tmp_path))
    assert moved is not None and not moved.base.exists()


def test_someone_elses_folder_in_a_shared_tmp_is_not_used(blocked, tmp_path, monkeypatch):
    taken = tmp_path / f"ftenv-cache-{os.getuid()}"
    taken.mkdir()
    real_stat = Path.stat

    def stat_of(self, *args, **kwargs):
        st = real_stat(self, *args, **kwargs)
        if self == taken:  # as if another user had made it
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, os.getuid() + 1, *st[5:]))
        return st

    monkeypatch.setattr(Path, "stat", stat_of)
    moved = cache_dirs.made(cache_dirs.moves_needed(image_env(blocked), tmp=str(tmp_path)))
    assert moved.base != taken and moved.base.parent == tmp_path and moved.base.is_dir()
    assert moved.env["HF_HOME"] == f"{moved.base}/.cache/huggingface" and str(moved.base) in moved.line


def test_redirect_updates_the_environment_and_prints_one_line(blocked, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    env = image_env(blocked)
    cache_dirs.redirect("ftenv finetune", env)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ftenv finetune: caches: ")
    assert env["HF_HOME"].startswith(str(tmp_path))


GOOD = GOOD_RECORD


def test_finetune_moves_them_and_says_so_once(blocked, tmp_path, monkeypatch, capsys):
    (tmp_path / "model").mkdir()
    (tmp_path / "model/config.yaml").write_text("model: FunASRNano\n")
    (tmp_path / "model/model.pt").write_bytes(b"")
    (tmp_path / "wav").mkdir()
    (tmp_path / "wav/a.wav").write_bytes(b"")
    for name in ("train.jsonl", "val.jsonl"):
        (tmp_path / name).write_text(json.dumps(GOOD, ensure_ascii=False) + "\n", encoding="utf-8")
    for key, value in image_env(blocked).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    monkeypatch.chdir(tmp_path)
    argv = ["finetune", "--dry-run", "--model-dir", "model", "--train", "train.jsonl", "--valid", "val.jsonl",
            "--output-dir", "out", "--gpus-per-node", "1"]  # fmt: skip
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "caches:" in line]
    assert len(lines) == 1 and lines[0].startswith("ftenv finetune: caches: ") and "HF_HOME" in lines[0], err
    assert os.environ["HF_HOME"].startswith(f"{tmp_path}/ftenv-cache-")
    assert not (tmp_path / f"ftenv-cache-{os.getuid()}").exists(), "a dry run creates nothing"


class _Stop(Exception):
    pass


def test_selfcheck_moves_them_before_its_report(blocked, tmp_path, monkeypatch, capsys):
    from ftenv.selfcheck import runner

    for key, value in image_env(blocked).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    seen = {}

    def report(*args, **kwargs):
        seen["HF_HOME"] = os.environ["HF_HOME"]
        raise _Stop

    monkeypatch.setattr(runner.startup, "show_once", report)
    assert cli.main(["selfcheck"]) != 0  # stopped at the report (the command line names the error)
    assert seen["HF_HOME"] == f"{tmp_path}/ftenv-cache-{os.getuid()}/.cache/huggingface"
    assert capsys.readouterr().err.startswith("ftenv selfcheck: caches: ")
