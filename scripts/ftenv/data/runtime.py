"""Counting FunASR's silent data losses in the trainer (substituted samples, collator drops, index
and sampler skips): FunASR's own methods wrapped at run time, each event printed as one
ftenv.watchdog.data_loss line for `ftenv watch`. Nothing in site-packages changes.
"""

from __future__ import annotations

import contextlib
import functools
import os

from ftenv import upstream, variables
from ftenv.data import lists
from ftenv.watchdog import data_loss as D

DATASET = "FunASR"


def _emit(event: str, dataset: str, count: int, of: int = 0, detail: str = "") -> None:
    line = D.event_line(event, os.environ.get("RANK", "0"), dataset, count, of, detail) + "\n"
    with contextlib.suppress(OSError):  # one write: the lines of many processes never mix
        os.write(2, line.encode("utf-8", "replace"))


def _kind(obj) -> str:
    return getattr(obj, "_ftenv_set", "train")


def _what(item) -> str:
    """A requested sample, named for the log: its key, else its user turn (the audio path)."""
    if not isinstance(item, dict):
        return ""
    return str(item.get("key") or (item.get("user") or [""])[0])[:200]


def _lines(path) -> int | None:
    """Lines of a JSONL file as FunASR iterates them; None for a list of files."""
    if lists.is_list(path):
        return None
    count, last = 0, b"\n"
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def _wrap_dataset(cls) -> None:
    init, getitem, collator = cls.__init__, cls.__getitem__, cls.collator

    @functools.wraps(init)
    def __init__(self, path, *args, **kwargs):
        init(self, path, *args, **kwargs)
        self._ftenv_set = "train" if kwargs.get("is_training", True) else "valid"
        lines = _lines(path)
        if lines is not None:
            _emit(D.DROPPED_INDEX, self._ftenv_set, lines - len(self.index_ds), lines)

    @functools.wraps(getitem)
    def __getitem__(self, index):
        requested = self.index_ds[index]
        output = getitem(self, index)
        if output is None:
            _emit(D.LOST, _kind(self), 1, detail=_what(requested))
        elif output.get("item") is not requested:
            _emit(D.SUBSTITUTED, _kind(self), 1, detail=_what(requested))
        return output

    @functools.wraps(collator)
    def collate(self, samples=None):
        given = sum(s is not None for s in samples or ())
        try:
            outputs = collator(self, samples)
        except KeyError:
            if not given:
                _emit(D.EMPTY_BATCH, _kind(self), 1, detail="a batch with no sample: see `ftenv data check`")
            raise
        ids = outputs.get("input_ids") if isinstance(outputs, dict) else None
        kept = int(ids.shape[0]) if hasattr(ids, "shape") else given
        if kept < given:
            _emit(D.DROPPED_BATCH, _kind(self), given - kept, detail="b*t over batch_size_token_max")
        return outputs

    cls.__init__, cls.__getitem__, cls.collator = __init__, __getitem__, collate


def _wrap_sampler(cls) -> None:
    iterate = cls.__iter__

    @functools.wraps(iterate)
    def __iter__(self):
        batches = iterate(self)
        limit = getattr(self, "max_token_length", None)
        if limit is not None and self.batch_type != "example":
            total = len(self.dataset)
            skipped = sum(self.dataset.get_source_len(i) > limit for i in range(total))
            _emit(D.DROPPED_SAMPLER, "train" if self.is_training else "valid", skipped, total)
        return batches

    cls.__iter__ = __iter__


def install() -> str:
    """Wrap FunASR's Fun-ASR dataset and the recipe's sampler in this process; a line for the log."""
    from funasr.datasets.audio_datasets import samplers
    from funasr.register import tables

    cls = tables.dataset_classes.get(DATASET)
    if cls is None:
        return f"data-loss counting off: FunASR has no dataset class {DATASET!r}"
    if getattr(cls, "_ftenv_counted", False):
        return "data-loss counting already installed"
    if refused := upstream.refusal(upstream.DATA_LOSS):
        return refused
    _wrap_dataset(cls)
    _wrap_sampler(samplers.CustomDistributedBufferDynamicBatchSampler)
    cls._ftenv_counted = True
    return f"counting FunASR's substituted and dropped samples ({D.MARK} lines, read by ftenv watch)"


def install_from_env() -> list[str]:
    """install() unless FTENV_DATA_COUNT=0 (the trainer entry still runs, for the run's life); the
    lines for the log."""
    return [install()] if variables.read(variables.DATA_COUNT) != "0" else []
