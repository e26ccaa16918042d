"""The LM head and the loss over labelled positions only (`--compile-parts ...,lmhead`), because the
head over every position is about a quarter of the decoder's FLOPs for a loss that reads about a
fifth of them; the collator picks the positions on the CPU so the device needs no sync.
"""

from __future__ import annotations

import torch

#: The batch key the collator adds: flat indices of the positions whose next token is labelled.
LABEL_INDEX = "ftenv_label_index"
#: Labels FunASR's collator pads with (-1) and the loss ignores (-100).
IGNORED = (-1, -100)


def label_index(labels) -> torch.Tensor:
    """Flat indices into (rows, tokens - 1) of the positions whose next token is labelled."""
    nxt = labels[:, 1:]
    keep = (nxt != IGNORED[0]) & (nxt != IGNORED[1])
    return keep.flatten().nonzero().flatten()


def add_label_index(batch: dict) -> dict:
    """The collated batch with LABEL_INDEX (CPU), for a forward without the sync."""
    if "labels_ids" in batch:
        batch[LABEL_INDEX] = label_index(batch["labels_ids"])
    return batch


def loss_and_accuracy(llm, inputs_embeds, attention_mask, labels, index=None):
    """Qwen3ForCausalLM's mean cross entropy and FunASR's accuracy, the head over labelled
    positions only. `labels` already have -100 where ignored; `index` is LABEL_INDEX (None: found
    on the device)."""
    hidden = llm.model(inputs_embeds=inputs_embeds, attention_mask=attention_mask, use_cache=False)
    hidden = hidden.last_hidden_state[:, :-1, :]
    if index is None:
        index = label_index(labels)
    index = index.to(hidden.device)
    picked = hidden.reshape(-1, hidden.shape[-1]).index_select(0, index)
    targets = labels[:, 1:].reshape(-1).index_select(0, index)
    logits = llm.lm_head(picked)
    loss = torch.nn.functional.cross_entropy(logits.float(), targets)
    with torch.no_grad():
        acc = (logits.argmax(-1) == targets).sum().float() / index.numel()
    return loss, acc
