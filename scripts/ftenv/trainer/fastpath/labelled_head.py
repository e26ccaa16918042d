"""The LM head and the loss over labelled positions only (`--compile-parts ...,lmhead`).

FunASRNano's loss is Qwen3ForCausalLM's: the LM head (1,024 x 151,936 in Fun-ASR-Nano) over every
position of every row, fp32 logits of the whole (batch, tokens, vocabulary), then a cross entropy
that ignores all positions but the labelled ones (the transcript: about a fifth of the sequence).
The head is about a quarter of the decoder's FLOPs and its logits the largest memory traffic of
the step. Here the decoder stack runs as before, and the head, the loss and the accuracy run over
the positions whose next token is labelled only: the same mean cross entropy and the same accuracy
(FunASR's compute_accuracy counts exactly those positions).

Picking the positions on the device would need a `nonzero` (a host sync: its size is data), so the
collator adds them to each batch on the CPU (`LABEL_INDEX`, flat indices into (batch, tokens - 1));
the trainer moves them to the device with the batch. Without them (another collator) the forward
picks them on the device, one sync.
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
