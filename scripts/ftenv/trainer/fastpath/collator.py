"""What the fast path adds to every batch FunASR's dataset collates, on the CPU before the batch
moves (lmhead's label positions, audiocache's speech fingerprints, the buckets' padding), through
one hook that installs each once per process.
"""

from __future__ import annotations

import functools

from ftenv.trainer.fastpath import audio_cache, buckets, labelled_head

#: The dataset class whose collator is changed: the one Fun-ASR-Nano's config names.
DATASET = "FunASR"


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


def install(
    parts, bucketing: buckets.Buckets | None = None, dataset: str = DATASET, classes=None
) -> list[str]:
    """The additions the compile parts and the buckets need; lines for the log. The padding comes
    first: the label positions are flat indices into the padded batch the model sees."""
    notes = []
    if bucketing is not None:
        pad = functools.partial(buckets.pad_batch, buckets=bucketing)
        added = hook(dataset, "ftenv_buckets", bucketing, pad, "bucketing", classes)
        notes.append(
            f"buckets {bucketing.spec()}: every batch of the {dataset} dataset padded to its bucket"
            if added
            else f"buckets already installed on {dataset}.collator"
        )
    if "lmhead" in parts:
        added = hook(dataset, "ftenv_label_index", True, labelled_head.add_label_index, "lmhead", classes)
        notes.append(
            f"lmhead: the {dataset} collator adds each batch's labelled positions "
            f"({labelled_head.LABEL_INDEX})"
            if added
            else "label positions already added by the collator"
        )
    if "audiocache" in parts:
        added = hook(dataset, "ftenv_speech_keys", True, audio_cache.add_speech_keys, "audiocache", classes)
        notes.append(
            f"audiocache: the {dataset} collator adds each row's speech fingerprint "
            f"({audio_cache.SPEECH_KEYS})"
            if added
            else "speech fingerprints already added by the collator"
        )
    return notes
