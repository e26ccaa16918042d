"""`ftenv data prepare` and `ftenv data check`: the command line of the data wing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftenv.data import check, settings
from ftenv.data.rules import DEFAULTS, RECIPE_KEYS, LengthRules
from ftenv.steps.stats import UNUSABLE

PROG = "ftenv data"


def rules_for(model_dir: Path | None, overrides: list[str], world_size: int = 1) -> LengthRules:
    """The length rules of a run of upstream's recipe on this model, with these overrides."""
    recipe = [f"{settings.PREFIX}{key}={DEFAULTS[key]}" for key in RECIPE_KEYS]
    conf = settings.apply_overrides(settings.model_dataset_conf(model_dir), [*recipe, *overrides])
    return LengthRules.from_conf(conf, world_size)


def run_check(
    train: list[Path],
    valid: list[Path],
    rules: LengthRules,
    base: Path,
    report_path: Path | None,
    jobs: int | None = None,
    prog: str = f"{PROG} check",
    read_audio: bool = True,
) -> tuple[int, check.Report]:
    """Check, print the summary, write the report; 0 when usable, UNUSABLE (2) on any error."""
    missing = [p for p in (*train, *valid) if not p.is_file()]
    if missing:
        for p in missing:
            print(f"{prog}: {p} is not a file", file=sys.stderr)
        return UNUSABLE, check.Report(rules)
    files = [(p, check.TRAIN) for p in train] + [(p, check.VALID) for p in valid]
    report = check.check(files, rules, base, jobs, read_audio)
    written = None
    if report_path is not None:
        try:
            check.write_report(report, report_path)
            written = report_path
        except OSError as exc:
            print(f"{prog}: cannot write the report {report_path}: {exc.strerror or exc}", file=sys.stderr)
    for line in check.summary_lines(report, written):
        print(f"{prog}: {line}", file=sys.stderr)
    return (UNUSABLE if report.errors else 0), report


def _check(args: argparse.Namespace) -> int:
    overrides = [x for x in args.files if x.startswith("+")]
    train = [Path(x) for x in args.files if not x.startswith("+")]
    if not train and not args.valid:
        print(f"{PROG} check: no file given; usage: {PROG} check [--valid FILE] FILE...", file=sys.stderr)
        return UNUSABLE
    try:
        rules = rules_for(Path(args.model_dir) if args.model_dir else None, overrides, args.world_size)
    except ValueError as exc:
        print(f"{PROG} check: {exc}", file=sys.stderr)
        return UNUSABLE
    out = Path(args.output_dir) / check.REPORT_NAME
    rc, _ = run_check(train, [Path(v) for v in args.valid], rules, Path.cwd(), out, args.jobs)
    return rc


def add_parser(sub) -> None:
    p = sub.add_parser("data", help="prepare and check Fun-ASR-Nano training data (ChatML JSONL)")
    data = p.add_subparsers(dest="data_command", metavar="prepare|check", required=True)
    c = data.add_parser(
        "check",
        help="check every line of JSONL manifests as FunASR will read them",
        description=(
            "Streams every line: UTF-8, JSON, ChatML roles and the speech marker, the audio "
            "(present, decodable, its duration against speech_length), empty transcripts, "
            "duplicates, and what FunASR's length rules drop with the run's settings (upstream's "
            "recipe, the model's config.yaml, then ++dataset_conf.KEY=VALUE overrides). Exit 0 "
            "when usable (warnings allowed), 2 on any error. See docs/data.md."
        ),
        usage=f"{PROG} check [--valid FILE] [--model-dir DIR] [--output-dir DIR] FILE... "
        "[++dataset_conf.KEY=VALUE ...]",
    )
    c.add_argument(
        "files", nargs="*", metavar="FILE", help="training manifests, then any ++dataset_conf overrides"
    )
    c.add_argument("--valid", action="append", default=[], metavar="FILE", help="a validation manifest")
    c.add_argument("--model-dir", help="the model folder: its config.yaml's dataset_conf applies")
    c.add_argument("--output-dir", default=".", help=f"where {check.REPORT_NAME} is written (default: here)")
    c.add_argument("--world-size", type=int, default=1, help="GPUs of the run in all (sampler buffers; 1)")
    c.add_argument("--jobs", type=int, help="worker processes (default: the usable cores)")
    c.set_defaults(func=_check)
    from ftenv.data import prepare

    prepare.add_arguments(data)
