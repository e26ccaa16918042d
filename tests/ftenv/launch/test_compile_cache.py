"""Inductor's and Triton's caches under the run's output dir: writable by any UID, so that a re-run
of the same job starts warm, and a run as another UID (an arbitrary one, or the image's 1000 after
a root run) still works.

The other UID is a forked child that drops to it with os.setuid (the tests run as root in CI and
on the development machines; elsewhere they skip)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from ftenv.launch import cache_dirs, compile_cache

needs_root = pytest.mark.skipif(os.getuid() != 0, reason="needs root to become another UID")


@pytest.fixture
def out():
    """An output dir another UID can reach (pytest's own temporary dirs are private to root)."""
    base = Path(tempfile.mkdtemp(prefix="ftenv-cache-test-"))
    os.chmod(base, 0o755)
    (base / "out").mkdir(mode=0o755)
    yield base / "out"
    shutil.rmtree(base)


def _as_uid(uid: int, output_dir) -> int:
    """In a child running as uid: prepare the caches and write a file in each; its exit code."""
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            os.setgid(uid)
            os.setuid(uid)
            env = compile_cache.prepare(compile_cache.cache_root(output_dir))
            for path in env.values():
                with open(os.path.join(path, "kernel.bin"), "wb") as f:
                    f.write(b"x")
            code = 0
        except OSError:
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@needs_root
@pytest.mark.parametrize("uid", [1000, 123457], ids=["image-user", "arbitrary-uid"])
def test_another_uid_writes_its_caches_after_a_root_run(out, uid):
    first = compile_cache.prepare(compile_cache.cache_root(out))  # a first run, as root
    assert set(first) == set(compile_cache.COMPILER_CACHE_VARS)
    root = compile_cache.cache_root(out)
    assert stat.S_IMODE(root.stat().st_mode) == 0o1777
    assert _as_uid(uid, out) == 0
    assert (root / f"uid-{uid}" / "inductor" / "kernel.bin").is_file()


@needs_root
def test_the_control_without_the_sticky_world_writable_dir_another_uid_fails(out):
    compile_cache.prepare(compile_cache.cache_root(out))
    os.chmod(compile_cache.cache_root(out), 0o755)  # what a plain mkdir by the first run leaves
    assert _as_uid(1000, out) == 3


def test_a_re_run_gets_the_same_dirs_and_set_variables_are_kept(tmp_path):
    first = compile_cache.cache_env(tmp_path, environ={})
    assert compile_cache.cache_env(tmp_path, environ={}) == first
    assert all(str(tmp_path / compile_cache.CACHE_DIRNAME) in p for p in first.values())
    kept = compile_cache.cache_env(tmp_path, environ={"TRITON_CACHE_DIR": "/mnt/triton"})
    assert list(kept) == ["TORCHINDUCTOR_CACHE_DIR"]
    mounted = compile_cache.cache_env(tmp_path, environ={}, mount=str(tmp_path / "mnt"))
    assert all(p.startswith(str(tmp_path / "mnt")) for p in mounted.values())
    assert not (tmp_path / "mnt").exists()  # the plan creates nothing: the launch runs prepare


def test_caches_moved_to_tmp_by_the_read_only_rule_still_go_under_the_output_dir(tmp_path, capsys):
    """On a read-only root (enroot, pyxis) cache_dirs first points Triton's cache into /tmp; a
    compiled run then keeps its caches under the output dir, where the next run finds them."""
    (tmp_path / "ro").write_text("")  # HOME under a file: not writable, even by root
    env = {"HOME": str(tmp_path / "ro/home"), "TRITON_CACHE_DIR": str(tmp_path / "ro/home/.cache/triton")}
    cache_dirs.redirect("ftenv finetune", env)
    assert env["TRITON_CACHE_DIR"].startswith(tempfile.gettempdir())
    out = tmp_path / "out"
    caches = compile_cache.cache_env(out, environ=env)
    assert set(caches) == {"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"}
    assert all(p.startswith(str(out / compile_cache.CACHE_DIRNAME)) for p in caches.values())
