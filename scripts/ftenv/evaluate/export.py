"""`ftenv export`: a fine-tuned checkpoint as a model folder that FunASR's `AutoModel(model=OUT)`
loads as it loads the released Fun-ASR-Nano folder, with no path back to the base folder or the
run: config, the weights alone, the decoder and tokenizer files, a model card. Written into a
temporary folder beside OUT and renamed into place, so a failure leaves nothing half-written."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ftenv import variables
from ftenv.data import writes
from ftenv.evaluate import arguments, card, decode, hf_export
from ftenv.evaluate.model_files import (
    CONFIGURATION,
    base_configuration,
    configuration,
    listed_files,
    model_files,
    set_in,
)
from ftenv.evaluate.score import named
from ftenv.evaluate.summary import read_summary
from ftenv.model import checkpoints, lora
from ftenv.model import folder as model_folder
from ftenv.model.folder import CONFIG, WEIGHTS, ModelLoadError
from ftenv.model.funasr_import import OFFLINE_ENV, quiet_funasr_import
from ftenv.outcome import UNUSABLE

PROG = "ftenv export"

#: The key of configuration.json that records an export (FunASR reads only the keys it knows):
#: what `--force` recognises an earlier export by, with the entries it wrote.
EXPORT_RECORD = "ftenv_export"


@dataclass(frozen=True)
class ExportOptions:
    source: Path  # a checkpoint file or a run folder
    out: Path
    base: Path | None = None  # the model folder fine-tuned from; default: the run's config.yaml
    eval_dir: Path | None = None  # an `ftenv eval` output folder with summary.json
    force: bool = False
    format: str = "funasr"  # "hf": transformers' layout (ftenv.evaluate.hf_export)


@dataclass(frozen=True)
class Exported:
    out: Path
    checkpoint: Path
    base: Path
    weights: str  # the weights file's name in OUT (model.pt, or model.safetensors in transformers' layout)
    sha256: str


def sha256_of(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def base_folder(options: ExportOptions, checkpoint: Path) -> Path:
    """--base, else the model folder the run's config.yaml (written by FunASR's trainer) names:
    its model_path, else its model (the folder `ftenv finetune` was given)."""
    run = arguments.run_folder(checkpoint)
    run_config = run / CONFIG
    if options.base is not None:
        base = options.base
    elif recorded := arguments.run_base(run):
        base = recorded
    else:
        model = arguments.run_config(run).get("model")
        if not model or not Path(str(model)).is_dir():
            raise ModelLoadError(
                f"{checkpoint}: the model folder it was fine-tuned from is not recorded in {run_config} "
                "as an existing folder; name it with --base MODEL_DIR"
            )
        base = Path(str(model))
    if not (base / CONFIG).is_file():
        raise ModelLoadError(
            f"{base}: not a model folder (no {CONFIG}); --base names the Fun-ASR-Nano folder"
        )
    return base.resolve()


class _BaseWeights:
    """The base folder's own weights standing in for its model where FunASR cannot build it."""

    def __init__(self, weights: dict):
        self.weights = weights

    def state_dict(self) -> dict:
        return self.weights


def expected_model(conf: dict, base: Path):
    """What the weights must fit: the model config.yaml builds, on the meta device (no memory, no
    init); else the base folder's own model.pt."""
    try:
        return _meta_model(model_folder.located(conf, base, Path.cwd()))
    except Exception as exc:  # any model FunASR cannot build this way: fall back to the base's weights
        print(
            f"{PROG}: could not build {base / CONFIG}'s model to check the weights against "
            f"({type(exc).__name__}: {exc}); checking against {base / WEIGHTS} instead",
            file=sys.stderr,
        )
        return _BaseWeights(checkpoints.read_weights(base / WEIGHTS))


def _meta_model(conf: dict):
    """The model conf builds, on the meta device (no memory, no initialisation)."""
    import torch

    tables = quiet_funasr_import()
    # The build prints progress: not this command's output.
    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
        torch.device("meta"),
    ):
        return decode.funasr_model(conf, tables)[0]


def _copy(path: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        shutil.copytree(path, target, symlinks=False)
    else:
        shutil.copy2(path, target)


def earlier_export(out: Path) -> str | None:
    """None when `out` is a folder an earlier `ftenv export` wrote and holds nothing else (its
    configuration.json records the export and the entries it wrote, and the folder holds exactly
    those), else why not: only such a folder may be replaced with --force."""
    try:
        record = json.loads((out / CONFIGURATION).read_text(encoding="utf-8")).get(EXPORT_RECORD)
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("entries"), list):
        return f"its {CONFIGURATION} does not record an `ftenv export`"
    extra = sorted({p.name for p in out.iterdir()} - set(map(str, record["entries"])))
    if extra:
        return f"it holds more than the export wrote ({named(extra)})"
    return None


def check_out_folder(options: ExportOptions, inputs: list[tuple[str, Path]]) -> None:
    """Refuse, before any work, an OUT that is, holds or lies inside what the export reads, and a
    non-empty OUT unless --force and it is an earlier export holding nothing else."""
    out = options.out
    if out.exists() and not out.is_dir():
        raise ModelLoadError(f"{out}: exists and is not a folder; choose another OUT")
    if problem := writes.folder_problem(out):
        raise ModelLoadError(f"{out}: {problem}")
    try:
        writes.refuse_clobber([("the export folder", out)], inputs, "choose another OUT (a new folder)")
    except writes.ClobberError as exc:
        raise ModelLoadError(str(exc)) from None
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not options.force:
        raise ModelLoadError(
            f"{out}: exists and is not empty; choose another OUT, or add --force to replace an earlier "
            "export there"
        )
    if why := earlier_export(out):
        raise ModelLoadError(
            f"{out}: not replaced: {why}; --force replaces only a folder `ftenv export` wrote, holding "
            "nothing else; choose another OUT"
        )


def export(options: ExportOptions) -> Exported:
    """Write the folder; ModelLoadError (nothing written) for any input that cannot make one."""
    variables.export(OFFLINE_ENV)  # an export reads local files only: never a hub, even by mistake
    checkpoint = arguments.export_choice(options.source).resolve()
    base = base_folder(options, checkpoint)
    run = arguments.run_folder(checkpoint)
    inputs = [("the checkpoint", checkpoint), ("its run folder", run), ("--base", base)]
    check_out_folder(options, [*inputs, ("--eval", options.eval_dir)])
    adapters = lora.of_run(arguments.run_config(run))
    conf = model_folder.checked_config(base)
    files = model_files(conf, base)
    base_data = base_configuration(base)
    weights = checkpoints.read_weights(checkpoint)
    expected = expected_model(lora.applied(conf, adapters), base)
    try:
        checkpoints.check_fit(expected, weights, checkpoint)
    except ModelLoadError as exc:
        raise ModelLoadError(f"{exc}; {base} was taken as that folder: --base names another") from None
    folded = lora.described(expected) if adapters is not None else ""
    if adapters is not None:  # a plain model in every format: the adapters folded, use_lora false
        try:
            weights, conf = lora.fold(expected, weights), lora.without(conf)
        except ValueError as exc:
            raise ModelLoadError(f"{checkpoint}: {exc}") from None
    summary = read_summary(options.eval_dir) if options.eval_dir else None

    out = options.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        tmp = writes.temp_dir_beside(out)  # a new folder of this export alone (mkdtemp)
        if options.format == "hf":
            name, digest, tensors, unused = _write_hf(tmp, weights, conf, files, checkpoint, base)
        else:
            name, digest, tensors, unused = _write_funasr(tmp, weights, conf, files, base, base_data)
        facts = card.CardFacts(
            name=out.name,
            checkpoint=checkpoint,
            base=base,
            model_class=str(conf.get("model")),
            weights_sha256=digest,
            weights_bytes=(tmp / name).stat().st_size,
            tensors=tensors,
            data=card.read_data(run),
            summary=summary,
            eval_dir=options.eval_dir,
            lora=folded,
        )
        rendered = card.render_hf(facts, unused, name) if options.format == "hf" else card.render(facts)
        (tmp / card.NAME).write_text(rendered, encoding="utf-8")
        os.chmod(tmp, 0o777 & ~writes.umask())  # mkdtemp makes 0o700; OUT gets the usual mode
        _replace(tmp, out)
    except OSError as exc:  # a full disk, a folder not writable: OUT's place, not the checkpoint
        raise ModelLoadError(f"{out}: could not be written ({exc}); nothing was written there") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return Exported(out=out, checkpoint=checkpoint, base=base, weights=name, sha256=digest)


def _write_funasr(tmp: Path, weights: dict, conf: dict, files: dict, base: Path, base_data: dict):
    """FunASR's layout: config.yaml naming the copied files, model.pt, configuration.json recording
    the export; (the weights file's name, its sha256, tensors written, tensors left out)."""
    import torch
    import yaml

    exported = copy.deepcopy(conf)
    copied = set(files.values()) | listed_files(base_data.get("file_path_metas", {}), base)
    for path, name in sorted(copied):  # a set: the LLM and tokenizer share a folder
        _copy(path, tmp / name)
    for trail, (_path, name) in files.items():
        set_in(exported, trail, name)
    (tmp / CONFIG).write_text(yaml.safe_dump(exported, sort_keys=False, allow_unicode=True), encoding="utf-8")
    torch.save(weights, tmp / WEIGHTS)
    digest = sha256_of(tmp / WEIGHTS)
    written = {CONFIG, CONFIGURATION, WEIGHTS, card.NAME} | {Path(name).parts[0] for _, name in copied}
    record = {EXPORT_RECORD: {"weights_sha256": digest, "entries": sorted(written)}}
    (tmp / CONFIGURATION).write_text(
        json.dumps({**configuration(base_data, files), **record}, indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    return WEIGHTS, digest, len(weights), []


def _write_hf(tmp: Path, weights: dict, conf: dict, files: dict, checkpoint: Path, base: Path):
    """The checked checkpoint in transformers' layout (ftenv.evaluate.hf_export), with the decoder
    and tokenizer folders config.yaml names; returns as _write_funasr does."""
    trails = [(section, "init_param_path") for section in ("llm_conf", "tokenizer_conf")]
    llm, tok = (files[t][0] if t in files else base for t in trails)
    try:
        tensors, unused = hf_export.write(tmp, weights, conf, llm, tok)
    except ModelLoadError as exc:
        raise ModelLoadError(f"{checkpoint}: {exc}") from None
    return hf_export.WEIGHTS, sha256_of(tmp / hf_export.WEIGHTS), tensors, unused


def _replace(tmp: Path, out: Path) -> None:
    """Rename tmp to out; an existing out (empty, or an earlier export with --force) goes only once
    tmp is whole, moved first onto a new empty folder of its own (rename replaces an empty folder)."""
    if not out.exists():
        tmp.rename(out)
        return
    old = writes.temp_dir_beside(out)
    out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def run(options: ExportOptions) -> int:
    """The command's run: what was written and its weights' sha256, or the error and exit 2."""
    try:
        done = export(options)
    except ModelLoadError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return UNUSABLE
    print(f"{PROG}: wrote {done.out} from {done.checkpoint} (base {done.base})")
    print(f"{PROG}: {done.weights} sha256 {done.sha256}")
    return 0
