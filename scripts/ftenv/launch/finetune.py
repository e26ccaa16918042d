"""`ftenv finetune`: upstream's Fun-ASR-Nano recipe as one command that checks its inputs first,
finds its nodes, stays offline and runs under the watchdog, so that a fine-tuner's first run is
right on one GPU or many nodes. The launch is planned once (ftenv.launch.launch_plan); every step
here reads the plan.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable

from ftenv import outcome, variables
from ftenv.attention import sdpa
from ftenv.data import check, check_cache, lists
from ftenv.data.rules import rules_for
from ftenv.launch import cache_dirs, compile_cache, gpu_gate
from ftenv.launch.inputs import InputError, make_output_dir
from ftenv.launch.launch_plan import FinetuneOptions, LaunchPlan, plan_launch, torchrun_argv
from ftenv.launch.runlife import folder, lease, space
from ftenv.report import startup

PROG = "ftenv finetune"


def _takes_lease(p: LaunchPlan) -> bool:
    """Node 0's launcher holds the folder (the others share its run); a dry run only reads it. An
    elastic launch of several nodes learns its node ranks at the rendezvous, after this: none holds it."""
    if p.dry_run:
        return False
    return p.launch.node_rank == 0 or (p.launch.node_rank is None and p.launch.nnodes == "1")


def _take_folder(p: LaunchPlan) -> lease.Held | str | None:
    """The output folder's lease (ftenv.launch.runlife.lease), or the refusal; None when this
    launcher does not hold it."""
    try:
        me = lease.Holder.here(p.start.job_id, p.start.restart, lease.every_s())
        if not _takes_lease(p):
            if p.dry_run and (other := lease.live_holder(p.output_dir, me)):
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


def _check_folder(p: LaunchPlan) -> str | int | None:
    """Say what the output folder holds and make it ready (not in a dry run); the refusal, if any,
    or 0 when a restart finds the run finished (the line is printed)."""
    out = p.output_dir
    if p.fresh:
        moved = "--fresh: the earlier run's checkpoints would move to a replaced-<time>/ folder"
        if p.changes_folder:
            moved = folder.start_over(out) or "--fresh: no earlier checkpoint here"
        print(f"{PROG}: {moved}", file=sys.stderr)
        state = folder.FolderState("fresh", "a fresh run (--fresh)")
    else:
        state = folder.inspect(out, p.max_epoch, p.resume, restart=p.start.restart)
    if state.kind == "done":
        print(f"{PROG}: {state.line}", file=sys.stderr)
        return 0
    if state.kind in ("finished", "broken"):
        return state.line
    print(f"{PROG}: {state.line}", file=sys.stderr)
    existing = (state.relink or state.checkpoint).path if state.checkpoint else None
    problem, line = space.check(out, p.model_pt, p.keep_nbest_models, p.max_epoch, existing)
    if problem is not None:
        return problem
    print(f"{PROG}: {line}", file=sys.stderr)
    if p.changes_folder:
        for note in folder.prepare(out, state):
            print(f"{PROG}: {note}", file=sys.stderr)
    return None


def run(options: FinetuneOptions, watched: Callable[[LaunchPlan], int]) -> int:
    """The launch: planned, checked, the folder held; `watched(plan)` runs torchrun under the
    watchdog and returns its exit code (ftenv.commands.finetune gives it: the watchdog is above
    this wing's floors), and the folder's lease is given up when it returns."""
    try:
        p = plan_launch(options)
    except InputError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return outcome.UNUSABLE
    if not p.dry_run and (problems := make_output_dir(p.output_dir)):
        print(f"{PROG}: " + "\n".join(problems), file=sys.stderr)
        return outcome.UNUSABLE
    # Before the report and the trainer import anything that reads them (Hugging Face reads HF_HOME
    # at import): the trainer and everything it starts inherit writable caches. A dry run only says
    # where they would go.
    if moved := cache_dirs.moves_needed():
        cache_dirs.apply(PROG, moved if p.dry_run else cache_dirs.made(moved))
    if not p.dry_run:
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
    if not p.dry_run and (no_gpu := gpu_gate.refusal()):  # before the folder is taken or read
        print(f"{PROG}: {no_gpu}", file=sys.stderr)
        return outcome.UNUSABLE
    held = _take_folder(p)
    if isinstance(held, str):
        print(f"{PROG}: {held}", file=sys.stderr)
        return outcome.UNUSABLE
    try:
        ended = _before_launch(p)
        if ended is not None:
            return ended
        print(f"{PROG}: running {shlex.join(torchrun_argv(p))}", file=sys.stderr, flush=True)
        return watched(p)
    finally:
        if held is not None:  # the run has ended: the next start need not wait for the renewer
            held.release()


def _before_launch(p: LaunchPlan) -> int | None:
    """The folder and the data checked, the trainer's environment set; the exit code when the
    command ends here (a dry run prints the command)."""
    refusal = _check_folder(p)
    if isinstance(refusal, int):
        return refusal
    if refusal is not None:
        print(f"{PROG}: {refusal}", file=sys.stderr)
        return outcome.UNUSABLE
    if p.dry_run:
        print(shlex.join(torchrun_argv(p)))
        return 0
    if refused := check_data(PROG, p):
        return refused
    if p.speed.cache_root is not None:
        compile_cache.prepare(p.speed.cache_root)
    variables.export(dict(p.env))
    return None


def check_data(prog: str, plan: LaunchPlan) -> int | None:
    """The data check (ftenv.data.check) before torchrun, once per node, with the plan's data,
    model folder and settings on its processes in all, so that bad data refuses the run (exit 2)
    instead of failing or being silently dropped inside every rank: None when training may start,
    else the exit code (the report says what to fix)."""
    if plan.skip_data_check or variables.read(variables.DATA_CHECK) == "0":
        why = "--skip-data-check" if plan.skip_data_check else f"{variables.DATA_CHECK}=0"
        print(f"{prog}: data check skipped ({why})", file=sys.stderr)
        return None
    try:
        rules = rules_for(plan.model_dir, plan.settings, plan.world_size)
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return outcome.UNUSABLE
    out, node_rank, cwd = plan.output_dir, plan.launch.node_rank, plan.cwd
    name = (
        check.REPORT_NAME if not node_rank else check.REPORT_NAME.replace(".json", f".node{node_rank}.json")
    )
    train, valid = (lists.manifests(str(path) if path else None, cwd) for path in (plan.train, plan.valid))
    key = check_cache.fingerprint(train, valid, rules, cwd)
    if since := check_cache.unchanged_since(out / name, key):
        print(f"{prog}: data check: unchanged since {since}, skipped ({out / name})", file=sys.stderr)
        return None
    print(f"{prog}: checking every line of the data ({rules.describe()})", file=sys.stderr, flush=True)
    usable, report = check.check_and_report(
        train, valid, rules, cwd, out / name, prog=prog, stamp=check_cache.stamp(key)
    )
    if not usable:
        print(
            f"{prog}: refusing to start: the data has {report.errors} error(s) (listed above and in "
            f"{out / name}); fix them, or run anyway with --skip-data-check",
            file=sys.stderr,
        )
    return None if usable else outcome.UNUSABLE
