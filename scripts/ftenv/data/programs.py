"""The programs wav.scp commands start (`sox ... |`, `flac -c -d -s ... |`, `sph2pipe -f wav ... |`),
looked up before any command runs: a missing one is one line naming it and its fix, instead of the
shell's `not found` (exit 127) once per utterance of every recording that uses it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass

from ftenv.data.rows import Row

#: What separates the stages of a shell command line: the word after one is a program again.
_SEPARATORS = frozenset({"|", "||", "&&", ";", "&", "|&", "(", ")", ";;"})
#: Words after which the next word is still the program (`if sox ...`, `exec sox ...`).
_LEADS = frozenset({"!", "{", "}", "if", "then", "else", "elif", "while", "until", "do", "exec", "time"})
#: What /bin/sh runs itself: nothing to look up.
_BUILTINS = frozenset({":", ".", "[", "case", "cd", "done", "echo", "esac", "eval", "exit", "export"})
_BUILTINS |= {"false", "fi", "for", "printf", "read", "set", "test", "true", "wait"}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_REDIRECTION = re.compile(r"[0-9]*[<>&|]+")

#: The fix for a program the image cannot carry; any other missing one gets GENERIC.
FIXES = {
    "sph2pipe": (
        "Debian and Ubuntu package no sph2pipe, so the image has none: convert the SPHERE files to WAV "
        "where sph2pipe is installed (`sph2pipe -f wav IN.sph OUT.wav`) and list the WAV files in "
        "wav.scp, or build LDC's sph2pipe (as Kaldi's tools/Makefile does) and put it on PATH; an "
        "uncompressed SPHERE file also reads with `sox -t sph IN.sph -t wav - |`"
    ),
}
GENERIC = "install it or put it on PATH, or write the audio out first and list the files in wav.scp"


def programs(command: str) -> list[str]:
    """The programs the stages of one command start, in order. A word the shell expands when it
    runs (`$KALDI_ROOT/...`, a backquote, a glob) and an unclosed quote are left to the shell."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return []
    found: list[str] = []
    at_start, skip = True, False
    for token in tokens:
        if token in _SEPARATORS:
            at_start, skip = True, False
        elif not at_start:
            continue
        elif skip:
            skip = False  # the file of a redirection before the program (`<in.wav sox ...`)
        elif _REDIRECTION.fullmatch(token):
            skip = True
        elif _ASSIGNMENT.match(token) or token in _LEADS:
            continue
        else:
            at_start = False
            if token not in _BUILTINS and not any(c in token for c in "$`*?~"):
                found.append(token)
    return found


def _here(program: str) -> bool:
    """Whether /bin/sh would find the program: a path names an executable file, a name one on PATH."""
    if "/" in program:
        return os.path.isfile(program) and os.access(program, os.X_OK)
    return shutil.which(program) is not None


@dataclass(frozen=True)
class Missing:
    """A program no command can start, how many recordings' commands start it, and the first."""

    program: str
    recordings: int
    key: str
    command: str

    def line(self) -> str:
        name = os.path.basename(self.program)
        where = "not an executable file" if "/" in self.program else "not found on PATH"
        plural = "s" if self.recordings != 1 else ""
        return (
            f"{self.program} ({where}; in the command{plural} of {self.recordings} recording{plural}, "
            f"the first for {self.key}: `{self.command} |`): {FIXES.get(name, GENERIC)}"
        )


def missing(rows: list[Row]) -> list[Missing]:
    """One entry per program the rows' commands start that is not here, in the order first met;
    each command counted once however many segments are cut from its recording."""
    seen: dict[str, bool] = {}
    found: dict[str, list] = {}
    done: set[str] = set()
    for row in rows:
        if row.command is None or row.command in done:
            continue
        done.add(row.command)
        for program in dict.fromkeys(programs(row.command)):
            if program not in seen:
                seen[program] = _here(program)
            if not seen[program]:
                entry = found.setdefault(program, [0, row.key, row.command])
                entry[0] += 1
    return [Missing(p, n, key, command) for p, (n, key, command) in found.items()]


def refusal(lacking: list[Missing]) -> str:
    """What `ftenv data prepare` says before running no command: one line per missing program."""
    head = (
        f"wav.scp's commands start {len(lacking)} program{'s' if len(lacking) != 1 else ''} "
        "that cannot run here (no command was run, nothing written):"
    )
    return "\n  ".join([head, *(m.line() for m in lacking)])
