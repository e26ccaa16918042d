"""The sets `ftenv data split` writes and their file names: the names the docs' examples pass to
`ftenv finetune` and the tiny model's data use, so that a copied example finds the split's files.
"""

from __future__ import annotations

SETS = ("train", "valid", "test")
#: The file each set is written to in the split's output folder.
FILE_NAMES = {name: f"{name}.jsonl" for name in SETS}
