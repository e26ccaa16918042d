"""The self-check's training loop: the tiny Fun-ASR-Nano loaded by FunASR's AutoModel, the scheduled
batches collated by FunASR's own dataset class and trained as the recipe trains, every step timed,
so that the check measures the real code path (also used by benchmarks/compile_speedup.py).
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ftenv import variables
from ftenv.selfcheck import tinymodel
from ftenv.selfcheck.schedule import ScheduledStep, shape_schedule
from ftenv.trainer import recipe_step
from ftenv.watchdog.step import Step

#: FunASR's AutoModel prints its version (funasr/utils/version_checker.py, check_for_update) to
#: stdout even with disable_update: not the self-check's to print.
FUNASR_VERSION_LINE = re.compile(r"funasr version: \S+\.")


@contextlib.contextmanager
def without_funasr_banner():
    """Hold what FunASR prints to stdout; afterwards pass every line on to stderr except its version
    banner (a warning or an error FunASR prints is never hidden; exceptions pass as they are)."""
    held = io.StringIO()
    try:
        with contextlib.redirect_stdout(held):
            yield
    finally:
        rest = [ln for ln in held.getvalue().splitlines() if not FUNASR_VERSION_LINE.fullmatch(ln.strip())]
        if rest:
            print("\n".join(rest), file=sys.stderr)


@dataclass
class Prepared:
    model: object
    batches: list[dict]
    schedule: list[ScheduledStep]
    setup_seconds: float
    notes: list[str] = field(default_factory=list)


def prepare(tiny: Path, device: str, n_new: int, recur: int, seed: int, dtype: str = "bf16") -> Prepared:
    """Load the model with FunASR's AutoModel and collate the scheduled batches with FunASR's dataset."""
    t0 = time.perf_counter()
    variables.export(tinymodel.OFFLINE_ENV)
    tables = tinymodel.quiet_funasr_import()
    from funasr import AutoModel

    with without_funasr_banner():
        am = AutoModel(
            model=str(tiny),
            device=device,
            disable_update=True,
            disable_log=True,
            llm_conf={"llm_dtype": dtype},
        )
    kw = am.kwargs
    dataset_class = tables.dataset_classes.get(kw.get("dataset", "FunASR"))
    conf = dict(kw.get("dataset_conf", {}))
    dataset = dataset_class(
        str(tinymodel.paths(tiny).train_jsonl),
        frontend=kw["frontend"],
        tokenizer=kw["tokenizer"],
        is_training=True,
        **conf,
    )
    items = [dataset[i] for i in range(len(dataset))]
    lengths = [len(item["input_ids"]) for item in items]
    schedule = shape_schedule(lengths, n_new=n_new, recur=recur, seed=seed)
    batches = []
    for step in schedule:
        batch = dataset.collator([items[i] for i in step.indices])
        batch.pop("item", None)
        got = tuple(batch["input_ids"].shape)
        if got != step.shape:
            raise RuntimeError(f"collated batch has shape {got}, scheduled {step.shape}")
        batches.append(batch)
    return Prepared(am.model, batches, schedule, time.perf_counter() - t0)


def train(
    model,
    batches: list[dict],
    device: str,
    seed: int = 0,
    after_step=None,
):
    """The recipe's step: forward, backward, clip, AdamW step; each timed with the GPU synced.
    Seeded, so that two runs from the same weights (eager and compiled) see the same randomness;
    `after_step()` is called after each timed step (the compiled mode counts graphs there).

    Returns (seconds per step, loss per step)."""
    import torch
    from funasr.train_utils.device_funcs import to_device

    torch.manual_seed(seed)
    recipe_step.set_backends()
    model.train()
    optim = recipe_step.optimizer(model)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    seconds, losses = [], []
    for batch in batches:
        fresh = recipe_step.fresh(batch, "cpu")  # copied before the clock; moved to the device on it
        sync()
        t0 = time.perf_counter()
        fresh = to_device(fresh, device, non_blocking=True)
        loss, _stats, _weight = model(**fresh)
        loss.backward()
        recipe_step.update(model, optim)
        sync()
        seconds.append(time.perf_counter() - t0)
        losses.append(float(loss.detach()))
        if after_step is not None:
            after_step()
    return seconds, losses


def timed_steps(schedule: list[ScheduledStep], seconds: list[float]) -> list[Step]:
    return [
        Step(index=i, seconds=sec, batch=p.shape[0], padded_len=p.shape[1])
        for i, (sec, p) in enumerate(zip(seconds, schedule, strict=True))
    ]
