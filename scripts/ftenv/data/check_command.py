"""`ftenv data check` run over the manifests it names (the command line: ftenv.commands.data)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ftenv.data import check, lists
from ftenv.data.rules import rules_for
from ftenv.model import folder as model_folder
from ftenv.outcome import UNUSABLE

PROG = check.PROG


@dataclass(frozen=True)
class CheckOptions:
    """What `ftenv data check` was asked for; `files` the manifests and `settings` the recipe's
    settings under the `++` overrides, as one mapping (both from ftenv.commands.data)."""

    files: tuple[str, ...] = ()  # training manifests
    valid: tuple[str, ...] = ()
    model_dir: str | None = None
    output_dir: str = "."
    world_size: int = 1
    jobs: int | None = None
    settings: Mapping[str, object] = field(default_factory=dict)


def _tokenizer(model_dir: Path):
    """The model folder's tokenizer, which counts text_length (as `ftenv data prepare` does), or
    None when it does not load (the model folder's own findings say why)."""
    try:
        return model_folder.load_tokenizer(model_folder.tokenizer_dir(model_dir))
    except Exception as exc:  # a model folder without a loadable tokenizer: the lengths go unchecked
        print(
            f"{PROG}: text_length not checked: no tokenizer loads from {model_dir} ({exc})", file=sys.stderr
        )
        return None


def run(options: CheckOptions) -> int:
    try:
        train = [p for x in options.files for p in lists.manifests(x, Path.cwd())]
        valid = [p for v in options.valid for p in lists.manifests(v, Path.cwd())]
    except lists.DataListError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return UNUSABLE
    if not train and not options.valid:
        print(f"{PROG}: no file given; usage: {PROG} [--valid FILE] FILE...", file=sys.stderr)
        return UNUSABLE
    try:
        rules = rules_for(
            Path(options.model_dir) if options.model_dir else None, options.settings, options.world_size
        )
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return UNUSABLE
    model_errors = 0
    if options.model_dir:
        for problem in model_folder.inspect(Path(options.model_dir), Path.cwd()):
            model_errors += problem.severity == model_folder.ERROR
            print(f"{PROG}: model: {problem.severity}: {problem.message}", file=sys.stderr)
    out = Path(options.output_dir) / check.REPORT_NAME
    usable, _ = check.check_and_report(
        train,
        valid,
        rules,
        Path.cwd(),
        out,
        options.jobs,
        tokenizer=_tokenizer(Path(options.model_dir)) if options.model_dir else None,
    )
    if model_errors:
        print(f"{PROG}: UNUSABLE: the model folder has {model_errors} error(s) (above)", file=sys.stderr)
    return 0 if usable and not model_errors else UNUSABLE
