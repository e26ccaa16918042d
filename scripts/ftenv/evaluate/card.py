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

NAME = "README.md"
#: Columns of the eval table in the card, in order: (header, the key of a summary.json row, as
#: ftenv.evaluate.summary writes it). A column no row fills is left out.
COLUMNS = (
    ("model", "label"),
    ("error rate", "error_rate"),
    ("sub", "substitutions"),
    ("del", "deletions"),
    ("ins", "insertions"),
    ("ref tokens", "reference_tokens"),
    ("utterances", "utterances"),
    ("hours", "hours"),
    ("decode s", "decode_seconds"),
    ("RTF", "real_time_factor"),
)
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
    lora: str = ""  # the folded adapters (ftenv.model.lora.described); "" for a run without LoRA


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


def eval_table(summary: dict, eval_dir: Path | None) -> list[str]:
    rows = summary["rows"]
    columns = [(h, key) for h, key in COLUMNS if any(r.get(key) is not None for r in rows)]
    lines = [f"From `{summary['source']}` (`ftenv eval`), as it wrote them." if eval_dir else ""]
    if summary.get("normalization"):
        lines += ["", f"Normalization: {summary['normalization']}"]
    cells = [[_cell(r.get(key)) for _, key in columns] for r in rows]
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
        *([f"- LoRA: {facts.lora}"] if facts.lora else []),
        "",
        *_data_and_evaluation(facts),
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


def _data_and_evaluation(facts: CardFacts) -> list[str]:
    """The sections both layouts' cards share: the data the run trained on, and its evaluation."""
    evaluation = (
        eval_table(facts.summary, facts.eval_dir) if facts.summary else ["Not evaluated (no `--eval DIR`)."]
    )
    return ["## Fine-tuned on", "", *facts.data, "", "## Evaluation", "", *evaluation]


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
        *([f"- LoRA: {facts.lora}"] if facts.lora else []),
        "",
        *_data_and_evaluation(facts),
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
