"""Generate FunASR trainer logs in the real line format (funasr/train_utils/trainer_ds.py), for the
tests and the benchmark. Deterministic (seeded).

- issue_run(): the run of FunASR issue #3704 (tests/funasr_issue_3704.py): 382 steps, 59 distinct
  (batch, padded length), the slow ones (about 1.05 s: +0.44 s forward, +0.55 s backward) exactly
  the first occurrences of their shape, the others about 0.098 s. Mean 0.245 s.
- fixed_run(): the same shapes with the fix: every step 0.100 s with +-5% jitter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

STEPS, SHAPES = 382, 59
FAST, SLOW = 0.098, 1.05


@dataclass(frozen=True)
class GenStep:
    rank: int
    index: int
    batch: int
    padded: int
    data_load: float
    forward: float
    backward: float
    optim: float

    @property
    def seconds(self) -> float:
        return round(self.data_load + self.forward + self.backward + self.optim, 3)


def shape_sequence(n: int = STEPS, distinct: int = SHAPES, seed: int = 1234) -> list[tuple[int, int]]:
    """n (batch, padded length) pairs with exactly `distinct` different ones, first occurrences
    front-loaded as with a shuffled, length-sorted token-budget sampler; step 1 is always new."""
    rng = random.Random(seed)
    shapes, seen_pairs = [], set()
    while len(shapes) < distinct:
        padded = rng.randrange(60, 700, 4)
        batch = max(1, 6000 // padded - rng.randrange(0, 3))
        if (batch, padded) not in seen_pairs:
            seen_pairs.add((batch, padded))
            shapes.append((batch, padded))
    firsts = {0}
    while len(firsts) < distinct:
        firsts.add(int((n - 1) * rng.random() ** 2) + 1 if len(firsts) % 3 else rng.randrange(1, n))
    seq, k = [], 0
    for i in range(n):
        if i in firsts:
            seq.append(shapes[k])
            k += 1
        else:
            seq.append(shapes[rng.randrange(k)])
    return seq


def _split(total: float, rng: random.Random, slow: bool) -> tuple[float, float, float, float]:
    data_load = 0.011
    optim = 0.012
    extra_f, extra_b = (0.44, 0.55) if slow else (0.0, 0.0)
    rest = total - data_load - optim - extra_f - extra_b
    forward = round(rest * 0.4 + extra_f, 3)
    backward = round(total - data_load - optim - forward, 3)
    return data_load, forward, backward, optim


def issue_run(rank: int = 0, seed: int = 1234, jitter: float = 0.01) -> list[GenStep]:
    rng = random.Random(seed + 7 * rank)
    seen, out = set(), []
    for i, shape in enumerate(shape_sequence(seed=seed + rank), start=1):
        slow = shape not in seen
        seen.add(shape)
        base = SLOW if slow else FAST
        total = base * (1 + rng.uniform(-jitter, jitter))
        out.append(GenStep(rank, i, *shape, *_split(total, rng, slow)))
    return out


def fixed_run(rank: int = 0, seed: int = 1234, jitter: float = 0.05, n: int = STEPS) -> list[GenStep]:
    rng = random.Random(seed + 11 * rank)
    out = []
    for i, shape in enumerate(shape_sequence(n=n, seed=seed + rank), start=1):
        total = 0.100 * (1 + rng.uniform(-jitter, jitter))
        out.append(GenStep(rank, i, *shape, *_split(total, rng, False)))
    return out


def train_line(
    s: GenStep,
    epoch: int = 0,
    steps_in_epoch: int = STEPS,
    *,
    step_in_epoch: int | None = None,
    total_time: float | None = None,
    max_epoch: int = 1,
) -> str:
    """One training log line exactly as Trainer.log writes it through Hydra's console format.
    step_in_epoch defaults to the step's index, total_time to its phases plus 1 ms."""
    real_tokens = s.batch * s.padded - s.batch * 3
    frames = s.padded * 6
    stats = [
        ("batch_size_speech", s.batch),
        ("batch_size_x_frames", s.batch * frames),
        ("batch_size_real_frames", s.batch * frames - s.batch),
        ("padding_frames", s.batch),
        ("acc", 0.412),
        ("loss", 3.127),
        ("batch_size", s.batch),
        ("batch_size_x_tokens", s.batch * s.padded),
        ("batch_size_real_tokens", real_tokens),
        ("padding_tokens", s.batch * s.padded - real_tokens),
        ("dialog_turns_max", 1),
        ("dialog_turns_avg", 1.0),
    ]
    speed = {
        "data_load": f"{s.data_load:0.3f}",
        "forward_time": f"{s.forward:0.3f}",
        "backward_time": f"{s.backward:0.3f}",
        "optim_time": f"{s.optim:0.3f}",
        "total_time": f"{s.seconds + 0.001 if total_time is None else total_time:0.3f}",
    }
    in_epoch = s.index if step_in_epoch is None else step_in_epoch
    sec = 15 * 60 + s.index // 10
    return (
        f"[2026-11-29 15:{sec // 60 % 60:02d}:{sec % 60:02d},{(s.index * 37) % 1000:03d}][root][INFO] - "
        f"train, rank: {s.rank}, epoch: {epoch}/{max_epoch}, data_slice: 0/1, "
        f"step_in_slice: {in_epoch}/{steps_in_epoch}, step_in_epoch: {in_epoch}, total step: {s.index}, "
        f"(loss_avg_rank: 3.127), (loss_avg_slice: 3.301), (ppl_avg_slice: 2.714e+01), "
        f"(acc_avg_slice: 0.398), (lr: 2.000e-04), {stats}, {speed}, "
        "GPU, memory: usage: 3.412 GB, peak: 9.870 GB, cache: 11.250 GB, cache_peak: 11.250 GB"
    )


def val_line(rank: int, index: int, total: int = 200) -> str:
    speed = {"data_load": "0.004", "forward_time": "0.041", "total_time": "0.052"}
    stats = [("acc", 0.402), ("loss", 3.3), ("batch_size", 8), ("batch_size_x_tokens", 2048)]
    return (
        f"[2026-11-29 15:30:00,000][root][INFO] - val, rank: {rank}, epoch: 0/1, data_slice: 0/1, "
        f"step_in_slice: {index}/{total}, step_in_epoch: {index}, total step: 100, "
        f"(loss_avg_rank: 3.300), (loss_avg_slice: 3.310), (ppl_avg_slice: 2.739e+01), "
        f"(acc_avg_slice: 0.402), (lr: 0.000e+00), {stats}, {speed}, "
        "GPU, memory: usage: 3.412 GB, peak: 9.870 GB, cache: 11.250 GB, cache_peak: 11.250 GB"
    )


NOISE = [
    "[2026-11-29 15:00:01,001][root][INFO] - Train epoch: 0, rank: 0",
    "[2026-11-29 15:00:01,002][root][INFO] - Validate epoch: 0, rank: 0",
    "ffmpeg is not installed",
    "  3%|▎         | 12/382 [00:03<01:30,  4.08it/s]",
    "train, rank: zero, epoch: 0/1, total step: 5",  # almost a step line: no readable rank
    "[2026-11-29 15:00:02,000][root][INFO] - train, rank: 0, epoch: 0/1, total step: 6, no times",
    "retrain, rank: 0, {'total_time': '9.000'}",  # 'train, rank:' inside a word: not a step
    "interval, rank: 0, {'total_time': '9.000'}",
]


def issue_log(ranks: int = 1, with_val: bool = True, with_noise: bool = True, fixed: bool = False):
    """Lines of a whole run, ranks interleaved step by step, plus validation and noise lines."""
    runs = [(fixed_run if fixed else issue_run)(rank=r) for r in range(ranks)]
    lines = list(NOISE[:3]) if with_noise else []
    for i in range(len(runs[0])):
        for run in runs:
            lines.append(train_line(run[i]))
        if with_val and (i + 1) % 100 == 0:
            lines.extend(val_line(r, k) for r in range(ranks) for k in (1, 2))
        if with_noise and i % 50 == 7:
            lines.append(NOISE[3 + (i // 50) % (len(NOISE) - 3)])
    return lines, runs


def flood(which: int, total_bytes: int, seed: int = 42):
    """Deterministic chunks (bytes) for one stream (0 stdout, 1 stderr) of a flood test: lines of
    every length (up to 200 kB), `\\r` progress pieces, invalid UTF-8, and steady step lines (no
    hints), cut at arbitrary points. Yields about total_bytes in all."""
    rng = random.Random(seed * 2 + which)
    step = 0
    sent = 0
    pool = [bytes(rng.randrange(256) for _ in range(4096)) for _ in range(4)]
    while sent < total_bytes:
        kind = rng.random()
        if kind < 0.3:
            step += 1
            gen = GenStep(which, step, 8, 200 + 4 * (step % 5), 0.011, 0.030, 0.045, 0.012)
            piece = (train_line(gen) + "\n").encode()
        elif kind < 0.5:
            piece = b"".join(f" {p}%|####   | {p}/100\r".encode() for p in range(rng.randrange(1, 30)))
        elif kind < 0.52:
            piece = b"L" * rng.randrange(60_000, 200_000) + b"\n"
        elif kind < 0.7:
            piece = pool[rng.randrange(4)][: rng.randrange(1, 4096)]  # raw bytes, newlines or not
        else:
            piece = b"noise line %d \xff\xfe caf\xc3\xa9\n" % rng.randrange(10**6) * rng.randrange(1, 200)
        sent += len(piece)
        yield piece


#: Former names, until every caller says issue_run / issue_log.
field_report_run, field_report_log = issue_run, issue_log


def ddp_run(ranks: int = 2, n: int = 120, distinct: int = 20, seed: int = 77) -> list[list[GenStep]]:
    """Ranks in lockstep under DDP, each with its own shape sequence. At a step where a rank meets
    a new shape, that rank pays the plan build (+0.44 s forward, +0.55 s backward) and every other
    rank waits for it in the gradient all-reduce: on a shape it has seen, its step is as slow, with
    the extra time in backward_time only."""
    rng = random.Random(seed)
    seqs = [shape_sequence(n=n, distinct=distinct, seed=seed + r) for r in range(ranks)]
    seen: list[set] = [set() for _ in range(ranks)]
    out: list[list[GenStep]] = [[] for _ in range(ranks)]
    for i in range(n):
        new = [seqs[r][i] not in seen[r] for r in range(ranks)]
        for r in range(ranks):
            seen[r].add(seqs[r][i])
            total = (SLOW if any(new) else FAST) * (1 + rng.uniform(-0.01, 0.01))
            if new[r] or not any(new):
                parts = _split(total, rng, new[r])
            else:  # waits in the all-reduce: forward as usual, the wait lands in backward
                forward = round((FAST - 0.023) * 0.4, 3)
                parts = (0.011, forward, round(total - 0.023 - forward, 3), 0.012)
            out[r].append(GenStep(r, i + 1, *seqs[r][i], *parts))
    return out


def ddp_log(ranks: int = 2, only_rank: int | None = None) -> tuple[list[str], list[list[GenStep]]]:
    """ddp_run()'s lines, ranks interleaved step by step (or one rank's lines only)."""
    runs = ddp_run(ranks)
    keep = range(ranks) if only_rank is None else [only_rank]
    return [train_line(runs[r][i]) for i in range(len(runs[0])) for r in keep], runs


# --- a multi-epoch run shaped like FunASR's recipe --------------------------------------------

#: The recipe's shape, scaled down: 3 epochs of 120 steps, validation and a checkpoint every 40
#: steps of an epoch (validate_interval = save_checkpoint_interval), num_workers=4.
EPOCHS, EPOCH_STEPS, INTERVAL = 3, 120, 40
#: What the lines around a step cost, as FunASR's trainer measures them (trainer_ds.py): the
#: DataLoader's start in the data_load of each epoch's first step, CUDA and library warm-up on the
#: run's first step, and validation + checkpoint saving carried by the total_time of the step
#: after them.
WORKER_START_S, CUDA_WARMUP_S, VALIDATION_S, SAVE_S = 4.2, 2.5, 3.1, 1.4
HEAD_CKPT = "[2026-11-30 09:10:03,000][root][INFO]"


@dataclass(frozen=True)
class RecipeRun:
    lines: list[str]
    #: (epoch, step_in_epoch, total step) of the steps that pay the per-shape stall and are not
    #: start-up (an epoch's first step, the run's first step): what the verdict must count.
    stalled: list[int]
    epoch_starts: list[int]
    pauses_after: list[int]  # total steps after which validation and a checkpoint save ran


def recipe_run(stall: bool, seed: int = 5, rank: int = 0) -> RecipeRun:
    """A healthy multi-epoch run, or (stall=True) the same run with the per-shape stall of FunASR
    issue #3704: the first step on each (batch, padded length) in the PROCESS pays +0.44 s forward
    and +0.55 s backward (cuDNN's plan cache lives as long as the process, so later epochs meet
    fewer new shapes). Every step is otherwise 0.098 s with 2% jitter."""
    rng = random.Random(seed)
    shapes = shape_sequence(n=EPOCHS * EPOCH_STEPS, distinct=45, seed=seed)
    lines = ["[2026-11-30 09:00:00,000][root][INFO] - funasr version: 0.0.1."]
    seen: set[tuple[int, int]] = set()
    stalled, starts, pauses = [], [], []
    total = 0
    for epoch in range(EPOCHS):
        lines.append(f"[2026-11-30 09:00:01,000][root][INFO] - Train epoch: {epoch}, rank: {rank}")
        carried = 0.0
        for in_epoch in range(1, EPOCH_STEPS + 1):
            total += 1
            shape = shapes[total - 1]
            new = shape not in seen
            seen.add(shape)
            slow = stall and new
            step_total = FAST * (1 + rng.uniform(-0.02, 0.02))
            d, f, b, o = _split(step_total + (0.99 if slow else 0.0), rng, slow)
            if in_epoch == 1:
                d += WORKER_START_S  # the DataLoader's workers start inside the timer
                starts.append(total)
                if total == 1:
                    f += CUDA_WARMUP_S
            elif slow:
                stalled.append(total)
            gen = GenStep(rank, total, *shape, round(d, 3), round(f, 3), round(b, 3), o)
            total_time = gen.seconds + 0.001 + carried
            lines.append(
                train_line(
                    gen,
                    epoch,
                    EPOCH_STEPS,
                    step_in_epoch=in_epoch,
                    total_time=total_time,
                    max_epoch=EPOCHS,
                )
            )
            carried = 0.0
            if in_epoch % INTERVAL == 0 and in_epoch < EPOCH_STEPS:
                pauses.append(total)
                carried = VALIDATION_S + SAVE_S
                lines.append(f"[2026-11-30 09:10:00,000][root][INFO] - Validate epoch: {epoch}, rank: {rank}")
                lines.extend(val_line(rank, k, 2) for k in (1, 2))
                lines.append(f"{HEAD_CKPT} - Save checkpoint: {epoch}, rank: {rank}, local_rank: 0")
                lines.append("[2026-11-30 09:10:04,000][root][INFO] - ")
                lines.append(f"Checkpoint saved to /out/model.pt.ep{epoch}.{in_epoch}")
                lines.append(f"{HEAD_CKPT} - Update best acc: 0.4021, /out/model.pt.best")
        # At the epoch's end (train_ds.py): validate and save outside train_epoch, in no total_time.
        lines.append(f"[2026-11-30 09:20:00,000][root][INFO] - Validate epoch: {epoch + 1}, rank: {rank}")
        lines.extend(val_line(rank, k, 2) for k in (1, 2))
        lines.append(f"{HEAD_CKPT} - Save checkpoint: {epoch + 1}, rank: {rank}, local_rank: 0")
        lines.append(f"Checkpoint saved to /out/model.pt.ep{epoch + 1}")
    return RecipeRun(lines, stalled, starts, pauses)
