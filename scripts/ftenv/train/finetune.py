"""`ftenv finetune`: upstream's Fun-ASR-Nano recipe as one command that checks its inputs first,
finds its nodes, stays offline and runs under the watchdog, so that a fine-tuner's first run is
right on one GPU or many nodes.
"""

from __future__ import annotations

import os
import shlex
import sys

from ftenv import outcome, variables
from ftenv.attention import sdpa
from ftenv.report import startup
from ftenv.train import cache_dirs, data_gate, gpu_gate
from ftenv.train.inputs import InputError
from ftenv.train.runlife import folder, lease, space
from ftenv.train.torchrun_command import FinetuneOptions, TorchrunCommand, work_out

PROG = "ftenv finetune"


def _run_watched(p: TorchrunCommand) -> int:
    """Become `ftenv watch --output-dir OUT -- argv` (exec: same process, so signals and the exit
    code are the trainer's as the watchdog passes them on), as a user's own `ftenv watch -- CMD`
    runs; the output folder is handed over, not read back from the command."""
    cmd = [sys.executable, "-m", "ftenv.cli", "watch", "--output-dir", str(p.output_dir), "--", *p.argv]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, cmd)
    except OSError as exc:
        print(f"{PROG}: cannot start {shlex.join(cmd)}: {exc}", file=sys.stderr)
        return outcome.NOT_FOUND


def _takes_lease(options: FinetuneOptions, p: TorchrunCommand) -> bool:
    """Node 0's launcher holds the folder (the others share its run); a dry run only reads it. An
    elastic launch of several nodes learns its node ranks at the rendezvous, after this: none holds it."""
    if options.dry_run:
        return False
    return p.launch.node_rank == 0 or (p.launch.node_rank is None and p.launch.nnodes == "1")


def _take_folder(options: FinetuneOptions, p: TorchrunCommand) -> lease.Held | str | None:
    """The output folder's lease (ftenv.train.runlife.lease), or the refusal; None when this
    launcher does not hold it."""
    try:
        me = lease.Holder.here(p.start.job_id, p.start.restart, lease.every_s())
        if not _takes_lease(options, p):
            if options.dry_run and (other := lease.live_holder(p.output_dir, me)):
                print(
                    f"{PROG}: (dry run) another run holds {p.output_dir}: {other.describe()}",
                    file=sys.stderr,
                )
            return None
        held = lease.acquire(p.output_dir, me)
    except (ValueError, lease.Refused) as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot write the lease in {p.output_dir}: {exc}. Give a writable --output-dir"
    held.keep_renewed()
    print(f"{PROG}: {held.line}", file=sys.stderr)
    return held


def _check_folder(options: FinetuneOptions, p: TorchrunCommand) -> str | int | None:
    """Say what the output folder holds and make it ready (not in a dry run); the refusal, if any,
    or 0 when a restart finds the run finished (the line is printed)."""
    out = p.output_dir
    resume = p.setting("train_conf.resume", "true").lower() == "true"
    try:
        max_epoch = int(p.setting("train_conf.max_epoch", "50"))
        keep = int(p.setting("train_conf.keep_nbest_models", "20"))
    except ValueError as exc:
        return f"train_conf.max_epoch and keep_nbest_models must be whole numbers: {exc}"
    # Only node 0 changes the folder (other nodes may share it; their trainers read model.pt only
    # after torchrun's rendezvous, which waits for node 0).
    changes = not options.dry_run and p.launch.node_rank in (0, None)
    if options.fresh:
        moved = "--fresh: the earlier run's checkpoints would move to a replaced-<time>/ folder"
        if changes:
            moved = folder.start_over(out) or "--fresh: no earlier checkpoint here"
        print(f"{PROG}: {moved}", file=sys.stderr)
        state = folder.FolderState("fresh", "a fresh run (--fresh)")
    else:
        state = folder.inspect(out, max_epoch, resume, restart=p.start.restart)
    if state.kind == "done":
        print(f"{PROG}: {state.line}", file=sys.stderr)
        return 0
    if state.kind in ("finished", "broken"):
        return state.line
    print(f"{PROG}: {state.line}", file=sys.stderr)
    existing = (state.relink or state.checkpoint).path if state.checkpoint else None
    problem, line = space.check(out, p.model_pt, keep, max_epoch, existing)
    if problem is not None:
        return problem
    print(f"{PROG}: {line}", file=sys.stderr)
    if changes:
        for note in folder.prepare(out, state):
            print(f"{PROG}: {note}", file=sys.stderr)
    return None


def run(options: FinetuneOptions) -> int:
    try:
        p = work_out(options)
    except InputError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return outcome.UNUSABLE
    # Before the report and the trainer import anything that reads them (Hugging Face reads HF_HOME
    # at import): the trainer and everything it starts inherit writable caches.
    cache_dirs.redirect(PROG, create=not options.dry_run)
    if not options.dry_run:
        startup.show_once(PROG)
    raw = variables.read(variables.SDPA_DEPRIORITIZED)
    setting = sdpa.interpret_deprioritized(raw)
    info = [
        f"launch: {p.launch.describe()}",
        f"{variables.SDPA_DEPRIORITIZED}={'unset' if raw is None else raw}: {setting.meaning}",
        *p.notes,
    ]
    if p.env:
        info.append("environment for the trainer: " + " ".join(f"{k}={v}" for k, v in p.env.items()))
    for line in info:
        print(f"{PROG}: {line}", file=sys.stderr)
    if not options.dry_run and (no_gpu := gpu_gate.refusal()):  # before the folder is taken or read
        print(f"{PROG}: {no_gpu}", file=sys.stderr)
        return outcome.UNUSABLE
    held = _take_folder(options, p)
    if isinstance(held, str):
        print(f"{PROG}: {held}", file=sys.stderr)
        return outcome.UNUSABLE
    try:
        ended = _before_launch(options, p)
    except BaseException:
        if held is not None:
            held.release()
        raise
    if ended is not None:
        if held is not None:
            held.release()
        return ended
    if held is not None:  # the watchdog this process becomes gives it up at the end
        variables.export({variables.LEASE_TOKEN: held.holder.token})
    print(f"{PROG}: running {shlex.join(p.argv)}", file=sys.stderr, flush=True)
    return _run_watched(p)


def _before_launch(options: FinetuneOptions, p: TorchrunCommand) -> int | None:
    """The folder and the data checked, the trainer's environment set; the exit code when the
    command ends here."""
    refusal = _check_folder(options, p)
    if isinstance(refusal, int):
        return refusal
    if refusal is not None:
        print(f"{PROG}: {refusal}", file=sys.stderr)
        return outcome.UNUSABLE
    if options.dry_run:
        print(shlex.join(p.argv))
        return 0
    if refused := data_gate.check_before_launch(
        PROG, p.settings, p.world_size, p.launch.node_rank, options.working_folder(), options.skip_data_check
    ):
        return refused
    variables.export(p.env)
    return None
