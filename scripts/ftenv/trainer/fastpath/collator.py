"""One way to change every batch FunASR's dataset collates, for the parts that add to a batch on the
CPU (label positions, speech fingerprints, bucket padding), so that each installs once per process.
"""

from __future__ import annotations

import functools


def hook(dataset: str, mark: str, value, change, part: str, classes=None) -> bool:
    """Run `change(batch)` on every batch FunASR's dataset class `dataset` collates in this process
    (and in its DataLoader workers, which fork from it), the collator marked `mark` = `value`;
    False when a collator so marked is there already. `classes`: FunASR's registry unless given."""
    if classes is None:
        from funasr.register import tables

        classes = tables.dataset_classes
    cls = classes.get(dataset)
    if cls is None:
        raise ValueError(f"FunASR has no dataset class {dataset!r}: {part} is for Fun-ASR-Nano's dataset")
    original = cls.collator
    if getattr(original, mark, None) is not None:
        return False

    @functools.wraps(original)
    def collator(self, samples=None):
        return change(original(self, samples))

    setattr(collator, mark, value)
    cls.collator = collator
    return True
