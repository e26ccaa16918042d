"""Work of `ftenv data prepare` (header reads, audio written out) and `ftenv data check` (chunks of
lines) over forked worker processes, results in input order: the corpus is read once, at the speed
of the usable cores."""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence


def default_jobs() -> int:
    """The worker processes `--jobs` defaults to: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def ordered(fn: Callable, items: Iterable, jobs: int) -> Iterator:
    """fn(item) for each item, in order, over `jobs` processes (fork: fn may be any module function
    or a partial of one); a few items in flight per process, so that a stream of items is read as
    its results are taken, never held whole."""
    if jobs <= 1:
        yield from map(fn, items)
        return
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        pending: collections.deque = collections.deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 3 * jobs:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _each(fn: Callable, batch: Sequence) -> list:
    return [fn(item) for item in batch]


def parallel_map(fn: Callable, items: Sequence, jobs: int, desc: str, unit: str = "file") -> list:
    """[fn(item) for item in items], with a progress bar; the items go to the processes in batches
    (one each where there is one process), since one file's work is short."""
    from tqdm import tqdm

    size = 1 if jobs <= 1 else max(1, min(64, len(items) // (4 * jobs)))
    batches = [items[i : i + size] for i in range(0, len(items), size)]
    bar = tqdm(total=len(items), desc=desc, unit=unit, file=sys.stderr, disable=None)
    out = []
    try:
        for done in ordered(functools.partial(_each, fn), batches, jobs if len(items) > 1 else 1):
            out += done
            bar.update(len(done))
        return out
    finally:
        bar.close()
