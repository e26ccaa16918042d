"""The verdicts and the exit codes of every ftenv command, each with its meaning.

Floor 0 (the standard library and ftenv.text only) so that every wing exits with the same numbers:
a CI gate, a launcher or a Kubernetes podFailurePolicy reads them, and a crash must never read as a
verdict.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from ftenv import text

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"

#: Too few steps to compare (`ftenv analyze`, `ftenv selfcheck`).
INCONCLUSIVE_CODE = 3
#: No usable input (unreadable files, no step lines) or a usage error.
UNUSABLE = 2
#: A crash inside ftenv (ftenv.cli): never 0 or 1, so that a CI gate cannot read a bug as a verdict.
INTERNAL_ERROR = 4
#: `ftenv watch` stopped a command that printed no trainer line for the hard limit
#: (ftenv.watchdog.silence): the job hung, a scheduler may retry it. Otherwise watch exits with the
#: command's own code.
HUNG = 6
#: `ftenv finetune`: the run stopped on a signal (SIGTERM, SIGINT, SIGUSR1) after saving exactly where
#: it was; the same command continues it. 75 is sysexits.h's EX_TEMPFAIL ("try again later"): not a
#: crash (1), not bad input (2, which a Kubernetes podFailurePolicy fails the job on), not the
#: watchdog's codes; Kubeflow's ExitCode restart policy retries it (it treats only 1, 2, 126, 127,
#: 128 and 139 as permanent).
STOPPED = 75
#: The signals a watched run passes on to its command (`ftenv watch`) and torchrun to its workers
#: (`ftenv finetune`'s --signals-to-handle): a scheduler's stop (SIGTERM, Slurm's `--signal`
#: USR1/USR2), Ctrl-C, a hang-up, a quit. One list, so that what the watchdog passes on is handled.
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
#: `ftenv watch`: its command was found but cannot be run (not executable, not a program): the
#: shell's code for it, so that a wrapped command fails as it would unwrapped.
NOT_RUNNABLE = 126
#: `ftenv watch`: its command was not found; `ftenv finetune`: the watchdog could not be started.
#: The shell's code for a command that cannot be started.
NOT_FOUND = 127

#: The line a stopped run prints (rank 0, then `ftenv finetune`): written by ftenv.trainer.runlife,
#: read back by the watchdog's closing lines and `ftenv analyze`, so that a saved stop never reads as
#: a failure. Here, below both, so that the writer and the readers share one format.
STOP_LINE = re.compile(
    r"stopped on (?P<signal>\S+(?: signal)?) at epoch (?P<epoch>\S+) step (?P<step>\S+) "
    r"\(batches done in that epoch\); saved to (?P<file>.+?); run the same command again to continue"
)


def stop_line(data: dict) -> str:
    """The one line that says where a stopped run was saved and how to continue it."""
    return (
        f"stopped on {data.get('signal')} at epoch {data.get('epoch')} step {data.get('step')} "
        f"(batches done in that epoch); saved to {data.get('file')}; run the same command again "
        "to continue"
    )


#: The exit code of each verdict (`ftenv analyze`, `ftenv selfcheck`).
EXIT = {PASS: 0, FAIL: 1, INCONCLUSIVE: INCONCLUSIVE_CODE}


@dataclass(frozen=True)
class ExitCode:
    code: int
    name: str
    meaning: str


#: Every exit code ftenv itself chooses, lowest first (a wrapped command's own code passes through).
EXIT_CODES = (
    ExitCode(EXIT[PASS], PASS, "the check passed, or the command finished"),
    ExitCode(EXIT[FAIL], FAIL, "the check failed, or the command crashed"),
    ExitCode(UNUSABLE, "UNUSABLE", "unusable input or a usage error (the message names the fix)"),
    ExitCode(INCONCLUSIVE_CODE, INCONCLUSIVE, "too few steps to compare"),
    ExitCode(
        INTERNAL_ERROR,
        "INTERNAL_ERROR",
        "an internal error of ftenv (never 0 or 1: a crash is not a verdict)",
    ),
    ExitCode(HUNG, "HUNG", "`ftenv watch` ended a run that printed nothing for the hard limit"),
    ExitCode(STOPPED, "STOPPED", "stopped on a signal with everything saved: run the same command again"),
    ExitCode(NOT_RUNNABLE, "NOT_RUNNABLE", "the command was found but cannot be run (the shell's code)"),
    ExitCode(NOT_FOUND, "NOT_FOUND", "the command was not found or could not be started (the shell's code)"),
)


def markdown_table() -> str:
    """The exit codes as the docs show them (docs/variables.md's generated block)."""
    rows = [(c.code, f"`{c.name}`", c.meaning) for c in EXIT_CODES]
    return "\n".join(text.markdown_table(("code", "name", "meaning"), rows)) + "\n"
