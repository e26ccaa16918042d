"""The data check (ftenv.data.check) before torchrun, once per node, with the settings the trainer
will get (the launch's one mapping of them, ftenv.train.overrides), so that bad data
refuses the run (exit 2) instead of failing or being silently dropped inside every rank.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from ftenv import variables
from ftenv.data import check, check_cache, dataset_conf, lists
from ftenv.outcome import UNUSABLE

REPORT_NAME = check.REPORT_NAME
#: The trainer's settings that name the training and the validation data.
DATA_KEYS = ("train_data_set_list", "valid_data_set_list")


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def check_before_launch(
    prog: str, settings: Mapping[str, object], world_size: int, node_rank: int | None, cwd: Path, skip: bool
) -> int | None:
    """None when training may start, else the exit code (the report says what to fix); `settings`:
    the trainer's (TorchrunCommand.settings), `world_size`: its processes in all."""
    if skip or variables.read(variables.DATA_CHECK) == "0":
        why = "--skip-data-check" if skip else f"{variables.DATA_CHECK}=0"
        print(f"{prog}: data check skipped ({why})", file=sys.stderr)
        return None
    model = settings.get("model")
    try:
        rules = dataset_conf.rules_for(Path(str(model)) if model else None, settings, world_size)
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return UNUSABLE
    out = Path(str(settings.get("output_dir") or cwd))
    name = REPORT_NAME if not node_rank else REPORT_NAME.replace(".json", f".node{node_rank}.json")
    train, valid = (lists.manifests(_text(settings.get(key)), cwd) for key in DATA_KEYS)
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
    return None if usable else UNUSABLE
