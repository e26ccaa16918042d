"""The tiny model fine-tuned on the CPU to overfit a handful of utterances, saved as FunASR's trainer
saves a checkpoint (trainer_ds.save_checkpoint: a dict with 'state_dict', 'optimizer', 'epoch', ...):
a short training loop on the model object, FunASRNano's own training forward, because a real
`ftenv finetune` needs hundreds of steps at the recipe's warm-up to get there."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ftenv.evaluate import decode
from ftenv.selfcheck import tinymodel


def train_lines(tiny: Path, n: int) -> list[str]:
    return tinymodel.paths(tiny).train_jsonl.read_text(encoding="utf-8").splitlines()[:n]


def overfit(tiny: Path, lines: list[str], steps: int = 60, lr: float = 3e-3, seed: int = 0) -> dict:
    """The state_dict after `steps` AdamW steps, one utterance a step, LLM trained in fp32 (the
    CPU's dtype, as the CPU recipe's ++llm_conf.llm_dtype=fp32), encoder and adaptor frozen as the
    recipe freezes them; returns the checkpoint dict FunASR writes."""
    torch.manual_seed(seed)
    loaded = decode.load_model(tinymodel.paths(tiny).root, device="cpu")
    model = loaded.model
    model.llm_dtype = "fp32"
    batches = []
    for raw in lines:
        contents = model.data_template(json.loads(raw)["messages"])
        batches.append(model.data_load_speech(contents, loaded.tokenizer, loaded.frontend))
    params = [p for p in model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=lr)
    model.eval()
    model.llm.train()  # the encoder and adaptor stay frozen and without dropout
    for step in range(steps):
        b = {
            k: v.clone() if isinstance(v, torch.Tensor) else v
            for k, v in batches[step % len(batches)].items()
        }
        loss, _, _ = model(
            speech=b["speech"],
            speech_lengths=b["speech_lengths"],
            input_ids=b["input_ids"],
            attention_mask=b["attention_mask"],
            labels_ids=b["labels_ids"][None],
            fbank_beg=b["fbank_beg"],
            fbank_mask=b["fbank_mask"],
            fake_token_len=b["fake_token_len"],
        )
        optim.zero_grad()
        loss.backward()
        optim.step()
    model.eval()
    return {
        "epoch": 1,
        "state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "optimizer": optim.state_dict(),
        "scheduler": {},
        "saved_ckpts": {"model.pt.ep1": 1.0},
        "val_acc_step_or_epoch": {"model.pt.ep1": 1.0},
        "val_loss_step_or_epoch": {"model.pt.ep1": float(loss.detach())},
        "best_step_or_epoch": "model.pt.ep1",
        "avg_keep_nbest_models_type": "acc",
        "step": None,
        "step_in_epoch": None,
        "data_split_i": 0,
        "data_split_num": 1,
        "batch_total": steps,
        "train_loss_avg": float(loss.detach()),
        "train_acc_avg": 1.0,
    }
