"""Importing funasr without the dozens of optional-submodule import errors it logs on a clean
install, which a user would read as failures (the self-check, the eval and the tests share it), and
the environment that keeps FunASR and transformers off the hubs (the trainer, the eval, the export)."""

from __future__ import annotations

from ftenv import variables

#: Set for the trainer unless --allow-hub, and for every local model load: no hub download, no
#: PyPI update check.
OFFLINE_ENV = {
    name: variables.default(name)
    for name in (variables.HF_HUB_OFFLINE, variables.TRANSFORMERS_OFFLINE, variables.MODELSCOPE_OFFLINE)
}


def quiet_funasr_import():
    """Import funasr with its optional-submodule import errors kept off the terminal."""
    import contextlib
    import io
    import logging

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            import funasr  # noqa: F401
            from funasr.register import tables
    finally:
        root.setLevel(level)
    return tables
