"""`ftenv data prepare`, `check` and `split`: their parsers; the work is ftenv.data's, each handed the
typed options its parser fills (one option per field, so that a new field is one `add_argument`)."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from ftenv.commands.options import from_options
from ftenv.data import check, check_command, prepare, split
from ftenv.launch import overrides
from ftenv.launch.inputs import InputError
from ftenv.launch.recipe import RECIPE_DEFAULTS
from ftenv.outcome import UNUSABLE


def _check(options: check_command.CheckOptions) -> int:
    """`ftenv data check`: its files are the manifests, then the `++` overrides, parsed and put over
    the recipe's settings as `ftenv finetune` does (ftenv.launch.overrides: the last value of a key
    wins), so that both judge by the settings the trainer gets."""
    files = tuple(x for x in options.files if not x.startswith("+"))
    try:
        given = overrides.parse_all(x for x in options.files if x.startswith("+"))
    except InputError as exc:
        print(f"{check_command.PROG}: {exc}", file=sys.stderr)
        return UNUSABLE
    return check_command.run(
        dataclasses.replace(options, files=files, settings=given.settings(RECIPE_DEFAULTS))
    )


def _add_jobs(p: argparse.ArgumentParser, work: str = "") -> None:
    p.add_argument("--jobs", type=int, help=f"worker processes{work} (default: the usable cores)")


def add_parser(sub) -> None:
    p = sub.add_parser("data", help="prepare and check Fun-ASR-Nano training data (ChatML JSONL)")
    data = p.add_subparsers(dest="data_command", metavar="prepare|check|split", required=True)
    c = data.add_parser(
        "check",
        help="check every line of JSONL manifests as FunASR will read them",
        description=(
            "Streams every line: UTF-8, JSON, ChatML roles and the speech marker, the audio "
            "(present, decodable, its duration against speech_length), empty transcripts, "
            "duplicates, and what FunASR's length rules drop with the run's settings (upstream's "
            "recipe, the model's config.yaml, then ++dataset_conf.KEY=VALUE overrides). Exit 0 "
            "when usable (warnings allowed), 2 on any error. See docs/data.md."
        ),
        usage=f"{check_command.PROG} [--valid FILE] [--model-dir DIR] [--output-dir DIR] FILE... "
        "[++dataset_conf.KEY=VALUE ...]",
    )
    c.add_argument(
        "files", nargs="*", metavar="FILE", help="training manifests, then any ++dataset_conf overrides"
    )
    c.add_argument("--valid", action="append", default=[], metavar="FILE", help="a validation manifest")
    c.add_argument(
        "--model-dir",
        help="the model folder: its config.yaml's dataset_conf applies, and the folder is checked for "
        "what the recipe loads (LLM and tokenizer files, the CTC weights config.yaml configures)",
    )
    c.add_argument("--output-dir", default=".", help=f"where {check.REPORT_NAME} is written (default: here)")
    c.add_argument("--world-size", type=int, default=1, help="GPUs of the run in all (sampler buffers; 1)")
    _add_jobs(c)
    c.set_defaults(func=from_options(check_command.CheckOptions, _check))
    _add_prepare(data)
    _add_split(data)


def _add_split(data) -> None:
    p = data.add_parser(
        "split",
        help="training, validation (and test) sets from one prepared JSONL",
        description="Splits one JSONL into OUT/train.jsonl, OUT/valid.jsonl (and OUT/test.jsonl): by share "
        "(0.05 or 5%) or count of lines, at random with a seed, or by speaker so that no speaker is in two "
        "sets (speakers from --utt2spk or the lines' speaker field). The same input gives the same output.",
    )
    p.add_argument("jsonl", help="the prepared JSONL")
    p.add_argument("--output-dir", "-o", required=True, help="where train/valid/test.jsonl are written")
    p.add_argument("--valid", required=True, help="the validation set: a share (0.05, 5%%) or a count (200)")
    p.add_argument("--test", help="a test set too: a share or a count")
    p.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    p.add_argument("--by-speaker", action="store_true", help="no speaker in two sets")
    p.add_argument("--utt2spk", help="Kaldi utt2spk: the speaker of each key")
    p.set_defaults(func=from_options(split.SplitOptions, split.run))


def _add_prepare(data) -> None:
    p = data.add_parser(
        "prepare",
        help="write upstream's ChatML JSONL from Kaldi wav.scp + text, a TSV/CSV, or a folder of audio",
        description="`ftenv data prepare`: upstream's ChatML JSONL from what fine-tuners have: Kaldi's "
        "`wav.scp` + `text` (what FunASR's scp2jsonl reads), a TSV/CSV of audio path and transcript, "
        "or a folder of audio with a transcript beside each file (`a.wav` + `a.txt`).",
    )
    p.add_argument(
        "--wav-scp",
        help="Kaldi wav.scp (KEY PATH per line) or its data folder; the folder's text, segments and "
        "utt2spk are read when present",
    )
    p.add_argument("--text", help="Kaldi text: KEY TRANSCRIPT per line (default: the one beside wav.scp)")
    p.add_argument(
        "--audio-out",
        metavar="DIR",
        help="where the audio of segments and of wav.scp commands is written (one 16-bit WAV each)",
    )
    p.add_argument(
        "--run-commands",
        action="store_true",
        help="run wav.scp's command entries (`sox ... |`): shell text from the data file, off by default",
    )
    p.add_argument("--table", help="a .tsv or .csv of audio path, transcript (a header row is skipped)")
    p.add_argument("--audio-dir", help="a folder of audio files, each with NAME.txt beside it")
    p.add_argument("--model-dir", help="the model folder: its tokenizer counts text_length")
    p.add_argument("--tokenizer", help="a tokenizer folder instead of --model-dir's")
    p.add_argument(
        "--normalize",
        dest="normalization",
        metavar="PRESET",
        help="normalize the transcripts with a preset of the one normalization module (prepare: "
        "full-width forms folded, Kaldi spaces between CJK characters removed; scoring; raw); off by "
        "default; the choice is recorded in OUTPUT.prepare.json",
    )
    p.add_argument("--output", "-o", required=True, help="the JSONL to write")
    _add_jobs(p, " for the audio")
    p.set_defaults(func=from_options(prepare.PrepareOptions, prepare.run))
