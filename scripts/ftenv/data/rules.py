"""The pinned FunASR release's length rules for Fun-ASR-Nano data (indexing, the recipe's sampler),
read from its code, as functions of the declared lengths and the run's `dataset_conf` as FunASR
builds it: the model folder's config.yaml, then the run's settings (the rules and their sources:
docs/data.md). The dataset's per-sample limits are counted at run time (ftenv.data.runtime), not
predicted here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from ftenv.data.chatml import FRAMES_PER_SECOND
from ftenv.model import folder as model_folder

#: What the recipe (ftenv.launch.recipe) and FunASR's code use when the run does not say.
DEFAULTS = {
    "batch_size": 6000,
    "batch_type": "token",
    "sort_size": 1024,
    "max_token_length": 2048,
    "max_source_length": 8000,
    "min_source_length": 10,
    "max_target_length": 2048,
    "batch_size_sample_max": 200,
}
PREFIX = "dataset_conf."
#: Why a line is dropped, by rule (the report's keys).
NO_TEXT, TOO_LONG_SPEECH, TOO_SHORT_SPEECH, TOO_LONG_TEXT, OVER_TOKEN_LIMIT = (
    "text_length_below_1",
    "speech_over_max_source_length",
    "speech_under_min_source_length",
    "text_over_max_target_length",
    "over_max_token_length",
)


@dataclass(frozen=True)
class LengthRules:
    batch_size: int = DEFAULTS["batch_size"]
    batch_type: str = DEFAULTS["batch_type"]
    sort_size: int = DEFAULTS["sort_size"]
    max_token_length: int = DEFAULTS["max_token_length"]
    max_source_length: int = DEFAULTS["max_source_length"]
    min_source_length: int = DEFAULTS["min_source_length"]
    max_target_length: int = DEFAULTS["max_target_length"]
    batch_size_sample_max: int = DEFAULTS["batch_size_sample_max"]
    world_size: int = 1

    @classmethod
    def from_conf(cls, conf: Mapping[str, object], world_size: int = 1) -> LengthRules:
        """From a run's dataset_conf (the model's config.yaml, then the recipe, then ++overrides)."""
        values: dict = {}
        for key, default in DEFAULTS.items():
            raw = conf.get(key, default)
            try:
                values[key] = str(raw) if isinstance(default, str) else int(float(str(raw)))
            except ValueError:
                raise ValueError(f"dataset_conf.{key}={raw!r} is not a number") from None
        return cls(**values, world_size=max(1, world_size))

    def to_dict(self) -> dict:
        return asdict(self)

    def dropped(self, speech_length: int, text_length: int) -> str | None:
        """The rule under which FunASR never trains this utterance, or None."""
        if text_length < 1:
            return NO_TEXT
        if speech_length > self.max_source_length:
            return TOO_LONG_SPEECH
        if speech_length < self.min_source_length:
            return TOO_SHORT_SPEECH
        if text_length > self.max_target_length:
            return TOO_LONG_TEXT
        if self.token_batches and speech_length + text_length > self.max_token_length:
            return OVER_TOKEN_LIMIT
        return None

    @property
    def token_batches(self) -> bool:
        """The buffered token sampler (the recipe's) is in use: the budget rules apply."""
        return self.batch_type != "example" and self.sort_size > 0

    def over_budget(self, source_len: int) -> bool:
        return self.token_batches and source_len > self.batch_size

    def empty_batches(self, source_lens: Iterable[int]) -> int:
        """Empty batches the sampler makes for a set read in order (validation: no shuffle), given
        speech_length + text_length of the utterances indexing keeps, in file order: a buffer whose
        shortest utterance the sampler does not skip but cannot fit in the budget starts with one."""
        lens = list(source_lens)
        if not self.token_batches:
            return 0
        size = self.sort_size * self.world_size
        empty = 0
        for i in range(0, len(lens), size):
            shortest = min(lens[i : i + size])
            if self.batch_size < shortest <= self.max_token_length:
                empty += 1
        return empty

    def explain(self, why: str, s: int, t: int) -> str:
        """What FunASR does to an utterance of these lengths under rule `why`, and the fix."""
        seconds = s / FRAMES_PER_SECOND
        return {
            NO_TEXT: f"text_length {t} < 1: FunASR skips the line at indexing",
            TOO_LONG_SPEECH: (
                f"speech_length {s} ({seconds:.1f} s) > max_source_length {self.max_source_length}: "
                "FunASR skips it at indexing; cut the audio or raise ++dataset_conf.max_source_length"
            ),
            TOO_SHORT_SPEECH: (
                f"speech_length {s} < min_source_length {self.min_source_length}: FunASR skips it at indexing"
            ),
            TOO_LONG_TEXT: (
                f"text_length {t} > max_target_length {self.max_target_length}: FunASR skips it at indexing"
            ),
            OVER_TOKEN_LIMIT: (
                f"speech_length + text_length = {s + t} ({seconds:.1f} s of audio) > max_token_length "
                f"{self.max_token_length}: FunASR's sampler skips it every epoch; cut the audio into "
                "shorter utterances or raise ++dataset_conf.max_token_length"
            ),
        }[why]

    def describe(self) -> str:
        return (
            f"batch_size={self.batch_size} ({self.batch_type}), sort_size={self.sort_size} x world size "
            f"{self.world_size}, max_token_length={self.max_token_length}, max_source_length="
            f"{self.max_source_length}, min_source_length={self.min_source_length}, "
            f"max_target_length={self.max_target_length}"
        )


def model_dataset_conf(model_dir: Path | None) -> dict:
    """dataset_conf of the model folder's config.yaml, read as every command reads it
    (ftenv.model.folder.read_config); {} without one or when it is unreadable (the folder's check
    names that)."""
    if model_dir is None or not (model_dir / model_folder.CONFIG).is_file():
        return {}
    conf = model_folder.read_config(model_dir)
    found = conf.get("dataset_conf") if isinstance(conf, dict) else None
    return dict(found) if isinstance(found, dict) else {}


def rules_for(model_dir: Path | None, settings: Mapping[str, object], world_size: int = 1) -> LengthRules:
    """The length rules of a run on this model with these settings: the recipe's, then the user's
    overrides, as one mapping of key to value (ftenv.launch.overrides.Overrides.settings, for
    `ftenv finetune` and `ftenv data check` alike); keys other than `dataset_conf.KEY` are not the
    sampler's."""
    conf = model_dataset_conf(model_dir)
    for key, value in settings.items():
        sub = key[len(PREFIX) :]
        if key.startswith(PREFIX) and "." not in sub:
            conf[sub] = value
    return LengthRules.from_conf(conf, world_size)
