"""The one collator hook the fast path's batch parts share (ftenv.trainer.fastpath.collator): the
change runs on every collated batch, once however often it is installed, and an unknown dataset
class is refused with the part's name."""

from __future__ import annotations

import pytest
import torch

from ftenv.trainer.fastpath import buckets, collator, labelled_head


class Dataset:
    def collator(self, samples=None):
        return {"rows": list(samples or [])}


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setattr(Dataset, "collator", Dataset.collator)  # restored after the test
    return Dataset


CLASSES = {"FtenvTestDataset": Dataset}  # FunASR's registry stands here (importing funasr takes seconds)


def add_count(batch):
    batch["count"] = len(batch["rows"])
    return batch


def test_the_change_runs_on_every_batch_once(registered):
    assert collator.hook("FtenvTestDataset", "ftenv_test_mark", 7, add_count, "test part", CLASSES)
    assert registered().collator([1, 2, 3]) == {"rows": [1, 2, 3], "count": 3}
    assert registered.collator.ftenv_test_mark == 7
    installed = registered.collator
    assert not collator.hook("FtenvTestDataset", "ftenv_test_mark", 8, add_count, "test part", CLASSES)
    assert registered.collator is installed and registered.collator.ftenv_test_mark == 7


def test_an_unknown_dataset_class_names_the_part():
    with pytest.raises(ValueError, match="no dataset class 'Nowhere': test part is for Fun-ASR-Nano's"):
        collator.hook("Nowhere", "ftenv_test_mark", True, add_count, "test part", CLASSES)


class ChatDataset:
    def collator(self, samples=None):
        labels = torch.tensor([[-1, -1, 5, 6, 7], [-1, -1, -1, 8, 9]])
        return {"input_ids": torch.zeros(2, 5, dtype=torch.long), "attention_mask": labels.ne(-1).long(),
                "labels_ids": labels}  # fmt: skip


def test_the_label_positions_index_the_padded_batch(monkeypatch):
    """With lmhead and buckets, the positions are those of the batch the model sees (padded)."""
    monkeypatch.setattr(ChatDataset, "collator", ChatDataset.collator)
    notes = collator.install(("lmhead",), buckets.parse("8:2"), "Chat", {"Chat": ChatDataset})
    assert len(notes) == 2
    batch = ChatDataset().collator([])
    assert batch["labels_ids"].shape == (2, 8)
    assert (
        batch[labelled_head.LABEL_INDEX].tolist() == labelled_head.label_index(batch["labels_ids"]).tolist()
    )
    assert batch[labelled_head.LABEL_INDEX].tolist() == [1, 2, 3, 9, 10]
