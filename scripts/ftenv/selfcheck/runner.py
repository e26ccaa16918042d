"""`ftenv selfcheck`: runs one mode in a work folder and prints its verdict, because a step that is
slow the first time its (batch, padded length) appears (cuDNN attention first, torch >= 2.10 on
sm_90/sm_100/sm_103) is what a fine-tuner must see before a long run. Exit codes: 0 PASS, 1 FAIL,
3 INCONCLUSIVE, 2 could not run.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

from ftenv import variables
from ftenv.launch import cache_dirs, node_count
from ftenv.outcome import EXIT, UNUSABLE
from ftenv.report import startup
from ftenv.selfcheck import mode_compile, mode_inprocess, mode_recipe, render
from ftenv.selfcheck.options import SelfcheckOptions
from ftenv.selfcheck.verdict import verdict_of
from ftenv.trainer import compile_setting


def run(options: SelfcheckOptions, plan: mode_recipe.TrainerOverrides) -> int:
    """`plan`: the trainer's overrides as `ftenv finetune` renders them, for --recipe."""
    cache_dirs.redirect("ftenv selfcheck")  # first: the steps import libraries that read them
    # In this process (it uses the GPU anyway), unless the entrypoint showed it.
    startup.show_once(
        "ftenv selfcheck",
        compile_line=compile_setting.report_line(),
        nodes=node_count.node_count(variables.environment()),
    )
    if not options.compile and (options.force_recompiles or options.loss_rtol is not None):
        print("ftenv selfcheck: --force-recompiles and --loss-rtol need --compile", file=sys.stderr)
        return UNUSABLE
    if options.compile and options.inject_stall:
        print("ftenv selfcheck: --inject-stall tests the eager steps: drop --compile", file=sys.stderr)
        return UNUSABLE
    own_workdir = not options.workdir
    workdir = Path(tempfile.mkdtemp(prefix="ftenv-selfcheck-")) if own_workdir else Path(options.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    rc = _run_in(options, workdir, plan)
    if own_workdir:
        if rc == 0 and not options.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"ftenv selfcheck: outputs kept in {workdir}", file=sys.stderr)
    return rc


def _run_in(options: SelfcheckOptions, workdir: Path, plan: mode_recipe.TrainerOverrides) -> int:
    try:
        # FunASR prints to stdout (its version, tables): keep stdout for the result alone.
        with contextlib.redirect_stdout(sys.stderr):
            if options.recipe:
                measured = mode_recipe.run_recipe(options, workdir, plan)
            elif options.compile:
                measured = mode_compile.run_compiled(options, workdir)
            else:
                measured = mode_inprocess.run_inprocess(options, workdir)
            result = verdict_of(measured)
    except Exception as exc:  # say what went wrong in one line, keep the traceback for --json
        import traceback

        msg = f"ftenv selfcheck could not run: {type(exc).__name__}: {exc}"
        if options.json:
            print(json.dumps({"verdict": "ERROR", "error": msg, "traceback": traceback.format_exc()}))
        else:
            traceback.print_exc()
            print(msg, file=sys.stderr)
        return UNUSABLE
    if options.json:
        print(json.dumps(result, indent=2))
    else:
        print(render.render(result))
    return EXIT.get(result["verdict"], UNUSABLE)
