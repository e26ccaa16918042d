"""The model card (README.md) of an exported folder: what it was fine-tuned from and on, how it
scored, with which image and stack, and the sha256 of its weights, so that whoever receives the
folder can tell what it is and check that it is whole."""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from pathlib import Path

from ftenv import __version__, text, variables
from ftenv.attention.facts import package_version
from ftenv.data.check import REPORT_NAME as DATA_CHECK_REPORT
from ftenv.evaluate.checkpoints import ModelLoadError

NAME = "README.md"
#: `ftenv eval`'s table, read by `--eval DIR`.
SUMMARY = "summary.json"
#: Columns of the eval table in the card, in order: (header, the keys a summary.json row may use for
#: it). A column no row has is left out; keys of a row not listed here get a column of their own,
#: so a table written by another version of `ftenv eval` is shown whole rather than cut.
COLUMNS = (
    ("model", ("model", "label", "name")),
    ("error rate", ("error_rate", "rate", "cer", "wer", "mer")),
    ("sub", ("substitutions", "sub")),
    ("del", ("deletions", "del")),
    ("ins", ("insertions", "ins")),
    ("ref tokens", ("reference_tokens", "ref_tokens", "tokens")),
    ("utterances", ("utterances",)),
    ("hours", ("hours",)),
    ("decode s", ("decode_seconds", "decode_s", "seconds")),
    ("RTF", ("rtf", "real_time_factor")),
)
#: Row keys the card does not show (the model's full path is long, the label names it).
HIDDEN = {"path"}
STACK = ("torch", "torchaudio", "funasr", "transformers")


@dataclass(frozen=True)
class CardFacts:
    name: str
    checkpoint: Path
    base: Path
    model_class: str
    weights_sha256: str
    weights_bytes: int
    tensors: int
    data: list[str]
    summary: dict | None
    eval_dir: Path | None


def read_summary(eval_dir: Path) -> dict:
    """summary.json of an `ftenv eval` folder as {"rows": [...], "normalization": str|None}; a
    missing or malformed file is refused with its path (the card never shows a half table)."""
    path = Path(eval_dir) / SUMMARY
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelLoadError(
            f"{path}: not found; --eval names the --out folder of an `ftenv eval` run"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(
            f"{path}: not readable JSON ({type(exc).__name__}); run `ftenv eval` again"
        ) from None
    rows = data.get("rows") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise ModelLoadError(
            f"{path}: holds no table (a list of rows, one per model); run `ftenv eval` again"
        )
    normalization = data.get("normalization") if isinstance(data, dict) else None
    return {"rows": rows, "normalization": normalization if isinstance(normalization, str) else None}


def read_data(run: Path) -> list[str]:
    """The data the run trained on, from the data check `ftenv finetune` wrote into its folder."""
    report = run / DATA_CHECK_REPORT
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
        files = data["files"]
        lines = [
            f"- {f['kind']} `{f['path']}`: {f['lines']} lines, {f['trained']} trained, "
            f"{f['seconds'] / 3600:.2f} h of audio"
            for f in files
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return [
            f"Not recorded: the run folder `{run}` has no readable `{DATA_CHECK_REPORT}` (`ftenv finetune` "
            "writes it when it checks the data before training). Describe the data here."
        ]
    verdict = f"Data check verdict: {data.get('verdict', 'unknown')}, {data.get('errors', '?')} error(s)."
    return [f"From `{report}`:", "", *lines, "", verdict]


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value == value else "n/a"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _value(row: dict, keys: tuple):
    return next((row[k] for k in keys if k in row), None)


def eval_table(summary: dict, eval_dir: Path | None) -> list[str]:
    rows = summary["rows"]
    known = {k for _, keys in COLUMNS for k in keys}
    columns = [(h, keys) for h, keys in COLUMNS if any(_value(r, keys) is not None for r in rows)]
    extra = dict.fromkeys(k for r in rows for k in r if k not in known and k not in HIDDEN)
    columns += [(k, (k,)) for k in extra]
    lines = [
        f"From `{Path(eval_dir).resolve() / SUMMARY}` (`ftenv eval`), as it wrote them." if eval_dir else ""
    ]
    if summary.get("normalization"):
        lines += ["", f"Normalization: {summary['normalization']}"]
    cells = [[_cell(_value(r, keys)) for _, keys in columns] for r in rows]
    lines += ["", *text.markdown_table([h for h, _ in columns], cells)]
    return lines


def versions() -> list[str]:
    image = variables.read(variables.IMAGE) or f"not in the image ({variables.IMAGE} unset)"
    out = [f"- image: {image}", f"- variant: {variables.read(variables.VARIANT) or 'unknown'}"]
    out.append(f"- ftenv: {__version__}")
    out += [f"- {name}: {package_version(name) or 'unknown'}" for name in STACK]
    out.append(f"- python: {platform.python_version()}")
    return out


def render(facts: CardFacts) -> str:
    lines = [
        f"# {facts.name}",
        "",
        f"A fine-tuned {facts.model_class} (Fun-ASR-Nano) model folder, exported by `ftenv export`. It loads "
        "as the released model folder does, with nothing outside this folder:",
        "",
        "```python",
        "from funasr import AutoModel",
        "",
        f'model = AutoModel(model="path/to/{facts.name}", disable_update=True)',
        "```",
        "",
        "## Fine-tuned from",
        "",
        f"- base model folder: `{facts.base}` (its `config.yaml`, with the decoder and tokenizer files it "
        "names, is copied here)",
        f"- checkpoint: `{facts.checkpoint}`",
        "",
        "## Fine-tuned on",
        "",
        *facts.data,
        "",
        "## Evaluation",
        "",
        *(
            eval_table(facts.summary, facts.eval_dir)
            if facts.summary
            else ["Not evaluated (no `--eval DIR`)."]
        ),
        "",
        "## Weights",
        "",
        f"`model.pt`: the model's {facts.tensors} tensors only (no optimizer, scheduler or scaler state), "
        f"{facts.weights_bytes} bytes,",
        "",
        f"sha256 `{facts.weights_sha256}`",
        "",
        "Check it with `sha256sum model.pt`.",
        "",
        "## Made with",
        "",
        *versions(),
        "",
    ]
    return "\n".join(lines)


def render_hf(facts: CardFacts, unused: list[str], weights: str) -> str:
    """The card of a folder in transformers' layout (`ftenv export --format hf`): how transformers
    loads it, what it was fine-tuned from, its weights and what of the checkpoint is not in them."""
    left_out = (
        f"{len(unused)} tensor(s) of the checkpoint are not used here: the CTC branch (timestamps), which "
        f"transformers' model does not have (e.g. `{unused[0]}`)."
        if unused
        else "Every tensor of the checkpoint is here."
    )
    lines = [
        f"# {facts.name}",
        "",
        f"A fine-tuned {facts.model_class} (Fun-ASR-Nano) in transformers' own layout "
        "(`FunAsrNanoForConditionalGeneration`, the layout of FunAudioLLM/Fun-ASR-Nano-2512-hf), exported "
        "by `ftenv export --format hf`; it needs a transformers with that model (the one below has it):",
        "",
        "```python",
        "from transformers import AutoProcessor, FunAsrNanoForConditionalGeneration",
        "",
        f'processor = AutoProcessor.from_pretrained("path/to/{facts.name}")',
        f'model = FunAsrNanoForConditionalGeneration.from_pretrained("path/to/{facts.name}")',
        'inputs = processor.apply_transcription_request(audio=["audio.wav"])',
        "ids = model.generate(**inputs, max_new_tokens=512, do_sample=False)",
        'print(processor.batch_decode(ids[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True))',
        "```",
        "",
        "FunASR's `AutoModel`, `AutoModelVLLM` and `funasr-server` read the other layout: "
        "`ftenv export` without `--format hf`.",
        "",
        "## Fine-tuned from",
        "",
        f"- base model folder: `{facts.base}` (its `config.yaml` gave this `config.json`; its decoder's "
        "tokenizer is copied here)",
        f"- checkpoint: `{facts.checkpoint}`",
        "",
        "## Fine-tuned on",
        "",
        *facts.data,
        "",
        "## Evaluation",
        "",
        *(
            eval_table(facts.summary, facts.eval_dir)
            if facts.summary
            else ["Not evaluated (no `--eval DIR`)."]
        ),
        "",
        "## Weights",
        "",
        f"`{weights}`: the {facts.tensors} tensors of transformers' model, in the checkpoint's own dtypes "
        "(transformers' published conversion casts to bfloat16; pass `dtype=torch.bfloat16` to "
        f"`from_pretrained` for that), {facts.weights_bytes} bytes, sha256 `{facts.weights_sha256}`.",
        "",
        left_out,
        "",
        "## Made with",
        "",
        *versions(),
        "",
    ]
    return "\n".join(lines)
