"""FTENV_COMPILE: whether training gets the compiled decoder forward (`ftenv finetune --compile`).

The one home of the variable's name and how its value reads; the report prints it, the trainer
entry (ftenv.train.funasr_entry) acts on it through ftenv.train.compiled_decoder.
"""

from __future__ import annotations

import os

from ftenv import text

ENV = "FTENV_COMPILE"
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")


def compile_requested(environ=os.environ) -> bool:
    """Whether FTENV_COMPILE asks for the compiled decoder; a value that is neither on nor off is
    an error that names the fix, not a silent default."""
    raw = environ.get(ENV, "").strip().lower()
    if raw in _ON:
        return True
    if raw in _OFF:
        return False
    raise ValueError(f"{ENV}={environ.get(ENV)!r} is not understood: set {ENV}=1 (on) or {ENV}=0 (off)")


def report_line(environ=os.environ) -> str:
    raw = environ.get(ENV)
    try:
        state = (
            "on: the decoder forward is compiled (GPU batches of 2+)" if compile_requested(environ) else "off"
        )
    except ValueError as exc:
        state = f"off ({exc})"
    return f"compile {state} ({text.assignment(ENV, raw)}; ftenv finetune --compile)"
