"""`ftenv export --format hf`: the checkpoint in transformers' Fun-ASR-Nano layout (ftenv.evaluate.
hf_layout), checked and written as `--format funasr` is (ftenv.evaluate.export): the same choice of
checkpoint and base folder, the same fit check, offline, into a temporary folder renamed into place."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ftenv import variables
from ftenv.evaluate import card, checkpoints, export, hf_layout
from ftenv.evaluate.checkpoints import ModelLoadError
from ftenv.evaluate.model_files import CONFIG, check_decoder, model_files
from ftenv.train.recipe import OFFLINE_ENV

WEIGHTS = "model.safetensors"


def export_hf(options: export.ExportOptions) -> export.Exported:
    """Write the HF folder; ModelLoadError (nothing written) for any input that cannot make one."""
    variables.export(OFFLINE_ENV)
    export.check_out_folder(options)
    checkpoint = checkpoints.export_choice(options.source).resolve()
    base = export.base_folder(options, checkpoint)
    conf = export._yaml(base / CONFIG)
    files = model_files(conf, base)
    check_decoder(conf, base, files)
    weights = checkpoints.read_weights(checkpoint)
    try:
        checkpoints.check_fit(export.expected_model(conf, base, files), weights, checkpoint)
    except ModelLoadError as exc:
        raise ModelLoadError(f"{exc}; {base} was taken as that folder: --base names another") from None
    summary = card.read_summary(options.eval_dir) if options.eval_dir else None
    llm_dir = _folder(files, ("llm_conf", "init_param_path"), base)
    tok_dir = _folder(files, ("tokenizer_conf", "init_param_path"), base)

    out = options.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.export-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        try:
            tensors, unused = hf_layout.write(tmp, weights, conf, llm_dir, tok_dir)
        except ModelLoadError as exc:
            raise ModelLoadError(f"{checkpoint}: {exc}") from None
        digest = export.sha256_of(tmp / WEIGHTS)
        facts = card.CardFacts(
            name=out.name,
            checkpoint=checkpoint,
            base=base,
            model_class=str(conf.get("model")),
            weights_sha256=digest,
            weights_bytes=(tmp / WEIGHTS).stat().st_size,
            tensors=tensors,
            data=card.read_data(export.run_folder(checkpoint)),
            summary=summary,
            eval_dir=options.eval_dir,
        )
        (tmp / card.NAME).write_text(render(facts, unused), encoding="utf-8")
        export._replace(tmp, out)
    except OSError as exc:
        raise ModelLoadError(f"{out}: could not be written ({exc}); nothing was written there") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return export.Exported(out=out, checkpoint=checkpoint, base=base, sha256=digest)


def _folder(files: dict, trail: tuple, base: Path) -> Path:
    """The decoder or tokenizer folder config.yaml names (check_decoder made sure it is there)."""
    return files[trail][0] if trail in files else base


def render(facts: card.CardFacts, unused: list[str]) -> str:
    """The model card of the HF folder: how transformers loads it, what it is, its weights."""
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
        "(`FunAsrNanoForConditionalGeneration`, transformers >= 5.17.0; the layout of "
        "FunAudioLLM/Fun-ASR-Nano-2512-hf), exported by `ftenv export --format hf`:",
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
            card.eval_table(facts.summary, facts.eval_dir)
            if facts.summary
            else ["Not evaluated (no `--eval DIR`)."]
        ),
        "",
        "## Weights",
        "",
        f"`{WEIGHTS}`: the {facts.tensors} tensors of transformers' model, in the checkpoint's own dtypes "
        "(transformers' published conversion casts to bfloat16; pass `dtype=torch.bfloat16` to "
        f"`from_pretrained` for that), {facts.weights_bytes} bytes, sha256 `{facts.weights_sha256}`.",
        "",
        left_out,
        "",
        "## Made with",
        "",
        *card.versions(),
        "",
    ]
    return "\n".join(lines)
