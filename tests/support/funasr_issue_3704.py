"""The figures of FunASR issue #3704, the public report of the slow steps: "Fine-tuning
Fun-ASR-Nano on a B200: one step in six takes 1 s because cuDNN SDPA builds a plan for every new
batch shape" (https://github.com/modelscope/FunASR/issues/3704).

docs/cudnn-sdpa-guide.md marks the figures it takes from there with **[FR]**, and tests/support/steplogs.py
generates a run with the same shape; tests/test_guide.py checks the guide against the excerpts below
(short quotes of the issue, each stating the figures it is kept for) with figures_not_in_the_issue,
so that no test needs anything outside the repository.
"""

import re

URL = "https://github.com/modelscope/FunASR/issues/3704"

EXCERPTS = (
    # The run: one process on one B200, the Fun-ASR-Nano recipe, one epoch.
    "my AISHELL-1 jsonl (3600 train / 200 dev utterances), max_epoch=1, seed=1234",
    "GPU model: NVIDIA B200 (183 GB), one GPU used",
    # The symptom.
    "got 0.245 s per step on average: 323 of 382 steps took 0.098 s and 59 took about 1.05 s",
    "cuDNN builds a new execution plan per shape, 0.44 s forward and 0.55 s backward",
    # The fix.
    "the same step took 0.100 s on average, with the loss within bf16 rounding of the unmodified run",
    # The environment.
    "FunASR version: 1.4.15",
    "PyTorch / torchaudio version: 2.11.0+cu128 / 2.11.0+cu128, transformers 5.17.0",  # quoted: issue
    "CUDA/cuDNN version: 12.8 / 9.19, driver 580.126.20",
)

#: The figures the guide must quote from the issue (each is in EXCERPTS).
FIGURES = ("0.098", "1.05", "0.245", "0.44", "0.55", "0.100", "323", "382", "59", "3600", "B200")


def fr_sentences(text: str) -> list[str]:
    """The sentences of a doc marked **[FR]** (a figure taken from the issue)."""
    return [s for s in re.split(r"(?<=[.:])\s", text.replace("\n", " ")) if "**[FR]**" in s]


def figures_not_in_the_issue(guide: str) -> list[str]:
    """Figures the guide takes from FunASR issue #3704 that the issue does not state."""
    source = " ".join(EXCERPTS)
    bad = [f for f in FIGURES if f not in guide or f not in source]
    # Every number in an [FR] sentence is the issue's (issue and PR references are not figures).
    for sentence in fr_sentences(guide):
        sentence = re.sub(r"#\d+|/issues/\d+|/pull/\d+", "", sentence)
        bad += [n for n in re.findall(r"\d+\.\d+|\d{2,}", sentence) if n not in source]
    return bad
