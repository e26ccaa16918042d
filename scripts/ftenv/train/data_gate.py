"""The data check (ftenv.data.check) before torchrun, once per node, with the settings read from the
very command the trainer will get, so that bad data refuses the run (exit 2) instead of failing or
being silently dropped inside every rank.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ftenv import variables
from ftenv.data import check, check_cache, dataset_conf, lists
from ftenv.outcome import UNUSABLE

REPORT_NAME = check.REPORT_NAME


def _value(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) else None


def _override(argv: list[str], key: str) -> str | None:
    found = [a.split("=", 1)[1] for a in argv if a.startswith(f"++{key}=")]
    return found[-1] if found else None


def world_size(argv: list[str]) -> int:
    """nnodes x nproc_per_node of a torchrun command (the most nodes of an elastic range)."""
    try:
        nodes = int((_value(argv, "--nnodes") or "1").split(":")[-1])
        return max(1, nodes) * max(1, int(_value(argv, "--nproc_per_node") or "1"))
    except ValueError:
        return 1


def check_before_launch(
    prog: str, argv: list[str], cwd: Path, skip: bool, node_rank: int | None
) -> int | None:
    """None when training may start, else the exit code (the report says what to fix)."""
    if skip or variables.read(variables.DATA_CHECK) == "0":
        why = "--skip-data-check" if skip else f"{variables.DATA_CHECK}=0"
        print(f"{prog}: data check skipped ({why})", file=sys.stderr)
        return None
    model = _override(argv, "model")
    overrides = [a for a in argv if a.startswith("++dataset_conf.")]
    try:
        rules = dataset_conf.rules_for(Path(model) if model else None, overrides, world_size(argv))
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return UNUSABLE
    out = Path(_override(argv, "output_dir") or cwd)
    name = REPORT_NAME if not node_rank else REPORT_NAME.replace(".json", f".node{node_rank}.json")
    train = lists.manifests(_override(argv, "train_data_set_list"), cwd)
    valid = lists.manifests(_override(argv, "valid_data_set_list"), cwd)
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
