"""Per-file work of `ftenv data prepare` (header reads, audio written out) over worker processes,
in input order, with a progress bar: the corpus is read once, at the speed of the usable cores
(how many: default_jobs, for `ftenv data check` too)."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence


def default_jobs() -> int:
    """The worker processes `--jobs` defaults to: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def parallel_map(fn: Callable, items: Sequence, jobs: int, desc: str, unit: str = "file") -> list:
    """[fn(item) for item in items], over `jobs` processes (fork: fn may be any module function)."""
    from tqdm import tqdm

    bar = tqdm(total=len(items), desc=desc, unit=unit, file=sys.stderr, disable=None)
    out = []
    try:
        if jobs <= 1 or len(items) <= 1:
            for item in items:
                out.append(fn(item))
                bar.update()
            return out
        context = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            for result in pool.map(fn, items, chunksize=max(1, min(64, len(items) // (4 * jobs)))):
                out.append(result)
                bar.update()
        return out
    finally:
        bar.close()
