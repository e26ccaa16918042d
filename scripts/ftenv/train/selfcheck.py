"""`ftenv selfcheck`: a few real Fun-ASR-Nano fine-tune steps, offline, and a verdict on step times.

The stall it guards against: with cuDNN first in torch's attention order (torch >= 2.10 on sm_90,
sm_100, sm_103 unless TORCH_CUDNN_SDPA_DEPRIORITIZED=1), a training step is slow the FIRST time its
(batch, padded length) appears in the process, and fast when that shape recurs. So the check

1. loads the tiny offline Fun-ASR-Nano (ftenv.train.tinymodel: FunASR's packaged `FunASRNano`, a Qwen3
   LLM in bf16 with transformers' sdpa attention and the padding mask) through FunASR's AutoModel;
2. builds batches with FunASR's own dataset class and collator from the tiny ChatML JSONL, on a
   schedule in which every (batch, padded length) first appears and then recurs;
3. trains as the recipe does (encoder and adaptor frozen, LLM trainable, AdamW, grad clip 10),
   timing each step with the GPU synchronised;
4. compares the steps on new shapes with the steps on seen shapes (ftenv.steps.stats) and says
   PASS or FAIL, why, and what to do.

`--recipe` runs the real `funasr-train-ds` through torchrun instead (see selfcheck_recipe.py).
Exit codes: 0 PASS, 1 FAIL, 3 INCONCLUSIVE, 2 could not run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ftenv.report.sdpa import ENV_VAR, FIX
from ftenv.steps import stats
from ftenv.train import startup_report, tinymodel

#: Where the image keeps the tiny model (built at image build time, read-only for the user).
IMAGE_TINY_DIR = "/opt/ftenv/tiny"
TINY_ENV = "FTENV_TINY_DIR"

EXIT = {stats.PASS: 0, stats.FAIL: 1, stats.INCONCLUSIVE: 3}
EXIT_ERROR = 2

#: Steps at the start left out of the statistics: the first step pays one-time costs (allocator,
#: kernel loading, autograd set-up) that have nothing to do with shapes.
WARMUP = 3

#: Per device kind. GPU: the field report's pattern (new-shape steps 10x) fails by far; a healthy
#: run measures about 1x. CPU: the same shape rule, looser tails, because a shared CPU is noisy and
#: the check there shows that the machinery works rather than measuring a GPU stall.
THRESHOLDS = {
    "cuda": stats.Thresholds(new_over_seen=2.0, p95_over_median=2.0, max_over_median=10.0, warmup=WARMUP),
    "cpu": stats.Thresholds(new_over_seen=2.0, p95_over_median=4.0, max_over_median=20.0, warmup=WARMUP),
}


@dataclass(frozen=True)
class PlannedStep:
    shape: tuple[int, int]  # (batch, padded token length) of the LLM input
    indices: tuple[int, ...]  # dataset items


def plan_schedule(
    lengths: list[int], n_new: int = 8, recur: int = 3, warmup: int = WARMUP, seed: int = 0
) -> list[PlannedStep]:
    """Steps whose shapes first appear, then recur.

    lengths[i] is item i's token length. Shape 0 is the largest (batch 3, longest length) and is
    the only shape of the warm-up steps, so that on a GPU the allocator's pool is as large as it
    will need to be before the timed steps. Then each of n_new further shapes appears once (a new
    shape) followed by `recur` steps on shapes introduced so far (seen shapes), in a seeded random
    order. Every batch holds one item of exactly the padded length and shorter ones, so every
    batch is padded and the LLM's attention gets an explicit mask, as in real fine-tuning.
    """
    rng = random.Random(seed)
    by_len: dict[int, list[int]] = defaultdict(list)
    for i, n in enumerate(lengths):
        by_len[n].append(i)
    distinct = sorted(by_len)
    padded = [n for n in distinct if n > distinct[0]]  # lengths with something shorter to pad
    if len(padded) < n_new + 1:
        raise ValueError(
            f"the data has {len(padded)} usable distinct lengths, {n_new + 1} are needed: use more "
            "utterances (ftenv tinymodel --n-train) or fewer shapes (--shapes)"
        )
    # n_new + 1 lengths spread over the range, the longest first.
    picks = [padded[round(i * (len(padded) - 1) / n_new)] for i in range(n_new + 1)]
    picks = sorted(set(picks), reverse=True)
    while len(picks) < n_new + 1:  # rounding collided: fill with unused lengths
        picks.append(next(n for n in reversed(padded) if n not in picks))
    shapes = [(3 if i % 2 == 0 else 2, n) for i, n in enumerate(picks)]
    turn: dict[int, int] = defaultdict(int)

    def batch_for(shape: tuple[int, int]) -> PlannedStep:
        b, n = shape
        longest = by_len[n][turn[n] % len(by_len[n])]
        turn[n] += 1
        shorter = [i for m in distinct if m < n for i in by_len[m]][-(4 * b) :]
        others = []
        for k in range(b - 1):
            others.append(shorter[(turn[-n] + k) % len(shorter)])
        turn[-n] += 1
        return PlannedStep(shape, (longest, *others))

    steps = [batch_for(shapes[0]) for _ in range(warmup)]
    order = shapes[1:]
    rng.shuffle(order)
    for k, shape in enumerate(order):
        steps.append(batch_for(shape))
        for _ in range(recur):
            steps.append(batch_for(rng.choice(order[: k + 1])))
    return steps


def tiny_dir(requested: str | None, workdir: Path) -> Path:
    """The tiny model to use: --tiny, $FTENV_TINY_DIR, the image's copy, or one built now."""
    for candidate in (requested, os.environ.get(TINY_ENV), IMAGE_TINY_DIR):
        if candidate and tinymodel.is_built(candidate):
            return Path(candidate)
        if candidate and candidate == requested:
            raise FileNotFoundError(f"{candidate} holds no tiny model (build one: ftenv tinymodel DIR)")
    out = workdir / "tiny"
    print(f"building the tiny model in {out} ...", file=sys.stderr)
    tinymodel.build(out)
    return out


def pick_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda but torch sees no GPU")
    return requested


def environment(device: str) -> dict:
    import torch

    env = {
        "device": device,
        "torch": torch.__version__,
        "cudnn": None,
        ENV_VAR: os.environ.get(ENV_VAR),
        "cpu_threads": torch.get_num_threads(),
    }
    with contextlib.suppress(Exception):
        env["cudnn"] = torch.backends.cudnn.version()
    if device == "cuda":
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        env["gpu"] = p.name
        env["sm"] = f"sm_{p.major}{p.minor}"
    return env


@dataclass
class Prepared:
    model: object
    batches: list[dict]
    plan: list[PlannedStep]
    setup_seconds: float
    notes: list[str] = field(default_factory=list)


def prepare(tiny: Path, device: str, n_new: int, recur: int, seed: int, llm_dtype: str = "bf16") -> Prepared:
    """Load the model with FunASR's AutoModel and collate the planned batches with FunASR's dataset."""
    t0 = time.perf_counter()
    os.environ.update(tinymodel.OFFLINE_ENV)
    tables = tinymodel.quiet_funasr_import()
    from funasr import AutoModel

    am = AutoModel(
        model=str(tiny),
        device=device,
        disable_update=True,
        disable_log=True,
        llm_conf={"llm_dtype": llm_dtype},
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
    plan = plan_schedule(lengths, n_new=n_new, recur=recur, seed=seed)
    batches = []
    for planned in plan:
        batch = dataset.collator([items[i] for i in planned.indices])
        batch.pop("item", None)
        got = tuple(batch["input_ids"].shape)
        if got != planned.shape:
            raise RuntimeError(f"collated batch has shape {got}, planned {planned.shape}")
        batches.append(batch)
    return Prepared(am.model, batches, plan, time.perf_counter() - t0)


def train(model, batches: list[dict], device: str, lr: float = 2e-4, grad_clip: float = 10.0):
    """The recipe's step: forward, backward, clip, AdamW step; each timed with the GPU synced.

    Returns (seconds per step, loss per step)."""
    import torch
    from funasr.train_utils.device_funcs import to_device

    # As funasr/bin/train_ds.py sets them before training.
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = True
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=lr)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    seconds, losses = [], []
    for batch in batches:
        # The model edits its inputs in place (negative ids, pads): give it a fresh copy.
        fresh = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in batch.items()}
        sync()
        t0 = time.perf_counter()
        fresh = to_device(fresh, device, non_blocking=True)
        loss, _stats, _weight = model(**fresh)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_clip)
        optim.step()
        optim.zero_grad(set_to_none=True)
        sync()
        seconds.append(time.perf_counter() - t0)
        losses.append(float(loss.detach()))
    return seconds, losses


def llm_dtype(args: argparse.Namespace, device: str) -> str:
    """bf16 on a GPU, as the recipe trains (and as cuDNN attention needs); fp32 on a CPU, where
    bf16 matmuls go through oneDNN, which builds a primitive per new shape: a CPU-only per-shape
    cost that would mask what the check is for."""
    if args.llm_dtype != "auto":
        return args.llm_dtype
    return "bf16" if device == "cuda" else "fp32"


def thresholds_from(args: argparse.Namespace, device: str) -> stats.Thresholds:
    base = THRESHOLDS["cuda" if device == "cuda" else "cpu"]
    changes = {
        name: getattr(args, name)
        for name in ("new_over_seen", "p95_over_median", "max_over_median")
        if getattr(args, name, None) is not None
    }
    from dataclasses import replace

    return replace(base, **changes)


def _fmt_s(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f} s"


def _fmt_x(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}x"


def render(result: dict) -> str:
    s = result["summary"]
    t = result["thresholds"]
    env = result["environment"]
    where = env["device"]
    if env.get("gpu"):
        where = f"{env['gpu']} ({env['sm']})"
    cudnn = env.get("cudnn")
    cudnn_txt = f"{cudnn // 10000}.{cudnn // 100 % 100}.{cudnn % 100}" if cudnn else "n/a"
    raw = env.get(ENV_VAR)
    lines = [
        f"== ftenv selfcheck ({result['mode']}): Fun-ASR-Nano fine-tune steps on {where} ==",
        f"stack     torch {env['torch']}, cuDNN {cudnn_txt}, {ENV_VAR}="
        f"{'unset' if raw is None else repr(raw)}",
    ]
    if result.get("injected_stall_s"):
        lines.append(f"TEST AID  an SDPA stall of {result['injected_stall_s']} s per new shape was injected")
    lines += [
        f"steps     {s['n_steps']} timed after {s['n_warmup']} warm-up; {s['n_new']} on new shapes, "
        f"{s['n_seen']} on shapes seen before",
        f"  median new-shape step    {_fmt_s(s['new_median'])}",
        f"  median seen-shape step   {_fmt_s(s['seen_median'])}",
        f"  new / seen               {_fmt_x(s['new_over_seen'])}   (FAIL at >= {t['new_over_seen']:g}x)",
        f"  p95 / median             {_fmt_x(s['p95_over_median'])}   (FAIL at >= {t['p95_over_median']:g}x)",
        f"  max / median             {_fmt_x(s['max_over_median'])}   (FAIL at >= {t['max_over_median']:g}x)",
    ]
    losses = result.get("losses") or []
    if losses:
        lines.append(f"  loss                     {losses[0]:.3f} -> {losses[-1]:.3f}")
    lines.append(
        f"  wall time                {result['wall_seconds']:.1f} s (set-up {result['setup_seconds']:.1f} s)"
    )
    verdict = s["verdict"]
    if verdict == stats.PASS:
        lines.append(
            f"PASS: step times are flat: steps on new batch shapes take {_fmt_x(s['new_over_seen'])} "
            "the steps on shapes seen before"
        )
    else:
        lines.append(f"{verdict}:" if verdict == stats.FAIL else f"{verdict}: the check could not decide")
        lines.extend(f"  - {reason}" for reason in s["reasons"])
        if verdict == stats.FAIL:
            lines.append(f"fix: {s['fix'] or 'see docs/selfcheck.md'}")
    return "\n".join(lines)


def verdict_result(mode: str, steps: list[stats.Step], thresholds: stats.Thresholds, **extra) -> dict:
    summary = stats.summarize(steps, thresholds)
    result = {
        "mode": mode,
        "verdict": summary.verdict,
        "summary": summary.to_dict(),
        "thresholds": {
            "new_over_seen": thresholds.new_over_seen,
            "p95_over_median": thresholds.p95_over_median,
            "max_over_median": thresholds.max_over_median,
            "warmup": thresholds.warmup,
        },
        "steps": [s.to_dict() for s in stats.mark_new_shapes(steps)],
    }
    result.update(extra)
    if summary.verdict == stats.FAIL and summary.fix is None:
        result["summary"]["fix"] = (
            f"step times vary for a reason other than new shapes; if {FIX} is already set, run "
            "again on an idle machine, and read docs/selfcheck.md"
        )
    return result


def run_inprocess(args: argparse.Namespace, workdir: Path) -> dict:
    wall0 = time.perf_counter()
    tiny = tiny_dir(args.tiny, workdir)
    device = pick_device(args.device)
    undo = None
    if args.inject_stall:
        from ftenv.train import stall

        undo = stall.install(args.inject_stall)
    try:
        prepared = prepare(tiny, device, args.shapes, args.recur, args.seed, llm_dtype(args, device))
        seconds, losses = train(prepared.model, prepared.batches, device)
    finally:
        if undo:
            undo()
    steps = [
        stats.Step(index=i, seconds=sec, batch=p.shape[0], padded_len=p.shape[1])
        for i, (sec, p) in enumerate(zip(seconds, prepared.plan, strict=True))
    ]
    return verdict_result(
        "in-process",
        steps,
        thresholds_from(args, device),
        environment=environment(device),
        losses=losses,
        tiny_dir=str(tiny),
        injected_stall_s=args.inject_stall or None,
        setup_seconds=prepared.setup_seconds,
        wall_seconds=time.perf_counter() - wall0,
    )


def run(args: argparse.Namespace) -> int:
    startup_report.show_once("ftenv selfcheck", in_process=True)  # unless the entrypoint showed it
    own_workdir = not args.workdir
    workdir = Path(tempfile.mkdtemp(prefix="ftenv-selfcheck-")) if own_workdir else Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    rc = _run_in(args, workdir)
    if own_workdir:
        if rc == 0 and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"ftenv selfcheck: outputs kept in {workdir}", file=sys.stderr)
    return rc


def _run_in(args: argparse.Namespace, workdir: Path) -> int:
    try:
        # FunASR prints to stdout (its version, tables): keep stdout for the result alone.
        with contextlib.redirect_stdout(sys.stderr):
            if args.recipe:
                from ftenv.train import selfcheck_recipe

                result = selfcheck_recipe.run_recipe(args, workdir)
            else:
                result = run_inprocess(args, workdir)
    except Exception as exc:  # say what went wrong in one line, keep the traceback for --json
        import traceback

        msg = f"ftenv selfcheck could not run: {type(exc).__name__}: {exc}"
        if args.json:
            print(json.dumps({"verdict": "ERROR", "error": msg, "traceback": traceback.format_exc()}))
        else:
            traceback.print_exc()
            print(msg, file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result))
    return EXIT.get(result["verdict"], EXIT_ERROR)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "selfcheck",
        help="run a few real Fun-ASR-Nano fine-tune steps offline; FAIL if new batch shapes are slow",
        description=(__doc__ or "").split("\n\n")[0],
    )
    p.add_argument("--recipe", action="store_true", help="run the real funasr-train-ds via torchrun")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument("--tiny", help=f"tiny model dir (default: ${TINY_ENV}, {IMAGE_TINY_DIR}, or build one)")
    p.add_argument(
        "--workdir", help="writable dir for outputs (default: a new temp dir, removed after a PASS)"
    )
    p.add_argument("--keep", action="store_true", help="keep the default temp dir even after a PASS")
    p.add_argument("--shapes", type=int, default=8, help="new shapes after warm-up (default 8)")
    p.add_argument("--recur", type=int, default=3, help="seen-shape steps after each new one (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--llm-dtype",
        choices=["auto", "bf16", "fp32"],
        default="auto",
        help="LLM dtype (default: bf16 on a GPU, fp32 on a CPU)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable result on stdout")
    for name, what in (
        ("new-over-seen", "median new-shape step / median seen-shape step"),
        ("p95-over-median", "95th percentile step / median step"),
        ("max-over-median", "slowest step / median step"),
    ):
        key = name.replace("-", "_")
        gpu, cpu = getattr(THRESHOLDS["cuda"], key), getattr(THRESHOLDS["cpu"], key)
        p.add_argument(
            f"--{name}", type=float, help=f"FAIL when {what} >= this (defaults: GPU {gpu:g}, CPU {cpu:g})"
        )
    p.add_argument(
        "--inject-stall",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="TEST AID: sleep this long in attention the first time each shape is seen",
    )
    p.add_argument("--recipe-epochs", type=int, default=2, help="--recipe: epochs (default 2)")
    p.set_defaults(func=run)
