"""Hydra `++key=value` overrides: the user's parsed once, with the parser `funasr-train-ds` uses, into
one mapping where the last value of a key wins (as in Hydra), then merged over the recipe's
defaults, so that a bad override is refused once before torchrun, not by every rank after it, and
every check before torchrun reads the values the trainer will get.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ftenv.launch.inputs import InputError

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


@dataclass(frozen=True)
class Overrides:
    """The user's overrides as given (`items`, for the trainer's command line) and as one mapping
    (`values`: each key's last value, as Hydra parsed it; a `~key` deletion leaves the key out and
    in `deleted`). Built by parse_all only."""

    items: tuple[str, ...] = ()
    values: Mapping[str, object] = field(default_factory=dict)
    deleted: frozenset[str] = frozenset()

    def over(self, defaults: Iterable[tuple[str, str]]) -> list[str]:
        """The trainer's overrides: the defaults with every key the user overrides left out, then
        the user's as given."""
        taken = {*self.values, *self.deleted}
        return [f"++{k}={v}" for k, v in defaults if k not in taken] + list(self.items)

    def settings(self, defaults: Iterable[tuple[str, str]]) -> dict[str, object]:
        """Each key's value in the trainer's config as the overrides leave it: the defaults, then
        the user's values (the last one of a key winning), less the deleted keys."""
        merged: dict[str, object] = dict(defaults)
        for key in self.deleted:
            merged.pop(key, None)
        merged.update(self.values)
        return merged


def parse_all(items: Iterable[str]) -> Overrides:
    """The one parse of a command line's `++key=value` overrides (after a `--`, if any); InputError
    names the first bad one and how to write it."""
    given = list(items)
    if given[:1] == ["--"]:
        given = given[1:]
    values: dict[str, object] = {}
    deleted: set[str] = set()
    for item in given:
        override = parse(item)
        key = override.key_or_group
        if override.is_delete():
            values.pop(key, None)
            deleted.add(key)
        else:
            values.pop(key, None)  # a later value is the key's newest, also in order
            values[key] = override.value()
            deleted.discard(key)
    return Overrides(tuple(given), values, frozenset(deleted))
