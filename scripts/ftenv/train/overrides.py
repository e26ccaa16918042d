"""Hydra `++key=value` overrides: the recipe's defaults merged with the user's and checked with the
parser `funasr-train-ds` uses, so that a bad override is refused once before torchrun, not by
every rank after it.
"""

from __future__ import annotations

from ftenv.train.inputs import InputError

EXAMPLE = "++train_conf.max_epoch=5"
_parser = None


def parse(item: str):
    """One user override, parsed by Hydra (a hydra Override); InputError says what is wrong and
    how to write it. Hydra is imported here, not at import time: every `ftenv` command (the
    start-up report too) imports this module's command, and Hydra's parser takes a third of a
    second to import."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from hydra.errors import HydraException

    global _parser
    if item.startswith("-"):
        raise InputError(
            f"{item!r} comes after a Hydra override: put ftenv's options first, then the "
            "++key=value overrides"
        )
    if _parser is None:
        _parser = OverridesParser.create()
    try:
        override = _parser.parse_override(item)
    except HydraException as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreadable"
        raise InputError(
            f"{item!r} is not a Hydra override ({reason}): extra arguments must look like "
            f"++key=value (for example {EXAMPLE}); quote a value with symbols or non-ASCII letters: "
            "++key='value'"
        ) from None
    own_setting = override.type == OverrideType.CHANGE and override.key_or_group.startswith("hydra.")
    if override.type not in (OverrideType.FORCE_ADD, OverrideType.DEL) and not own_setting:
        raise InputError(
            f"{item!r} is not a Hydra override ftenv passes on: write ++{override.key_or_group}="
            f"{item.split('=', 1)[1] if '=' in item else 'VALUE'} (extra arguments must look like "
            f"++key=value, for example {EXAMPLE})"
        )
    return override


def merge_overrides(defaults: list[tuple[str, str]], extra: list[str]) -> list[str]:
    """The recipe's `++key=value`s with every key the user overrides left out, then the user's."""
    taken = {parse(item).key_or_group for item in extra}
    return [f"++{k}={v}" for k, v in defaults if k not in taken] + list(extra)
