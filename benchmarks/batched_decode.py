"""Utterances per second: `ftenv eval`'s batched decoding against upstream's one-at-a-time path
(the pinned funasr's FunASRNano.inference), both in one run on the same model and audio, hypotheses
compared token for token.

    PYTHONPATH=scripts .venv/bin/python benchmarks/batched_decode.py [--model-dir DIR --test JSONL]
        [--utterances N] [--batch-size B] [--max-new-tokens T] [--device cpu|cuda] [--threads K] [--json FILE]

Without --model-dir it builds the tiny random Fun-ASR-Nano (`ftenv tinymodel`) in a temporary
folder and decodes its utterances (0.6 to 2 s each). Its LLM names no end token and its random
weights never say <|im_end|>, so every utterance generates exactly T tokens on both paths: equal
work, a fair ratio. With a real model folder (and --test, a ChatML JSONL), each utterance stops
where the model ends it. Each path decodes one utterance first (not timed: lazy initialisation),
then all N. Target (docs/benchmarks.md, a GPU with the real model): batched >= 5x upstream's
utterances per second at equal hypotheses. A CPU run is a smoke test of the code path and the
ratio on the CPU, never GPU evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

from ftenv import outcome
from ftenv.data import audio
from ftenv.evaluate import decode, models


def measure(loaded: decode.Loaded, utts: list[decode.Utterance], batch_size: int, new_tokens: int) -> dict:
    """Both paths on the same utterances: warm-up on one, then all; rates and the comparison."""
    decode.decode_one_by_one(loaded, utts[:1], new_tokens)
    decode.decode_batched(loaded, utts[:1], batch_size, new_tokens)
    upstream = decode.decode_one_by_one(loaded, utts, new_tokens)
    batched = decode.decode_batched(loaded, utts, batch_size, new_tokens)
    equal = [u.key for u in utts if upstream.token_ids[u.key] == batched.token_ids[u.key]]
    tokens = sum(len(upstream.token_ids[u.key]) for u in utts)
    return {
        "utterances": len(utts),
        "audio_s": sum(audio.read_duration(u.audio).seconds or 0.0 for u in utts),  # as eval's hours
        "generated_tokens": tokens,
        "distinct_hypotheses": len({tuple(upstream.token_ids[u.key]) for u in utts}),
        "upstream_s": upstream.seconds,
        "batched_s": batched.seconds,
        "upstream_utt_per_s": len(utts) / upstream.seconds,
        "batched_utt_per_s": len(utts) / batched.seconds,
        "speedup": upstream.seconds / batched.seconds,
        "equal_hypotheses": len(equal),
        "unequal_keys": [u.key for u in utts if u.key not in equal],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", type=Path, help="a model folder (default: the tiny model, built here)")
    p.add_argument("--test", type=Path, help="ChatML JSONL to decode (default: the tiny model's data)")
    p.add_argument("--utterances", type=int, default=16)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when there is one)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: fastest for tiny matrices)")
    p.add_argument("--json", type=Path, help="write the result here too")
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory(prefix="ftenv-decode-bench-") as tmp:
        model_dir, test = a.model_dir, a.test
        if model_dir is None:
            from ftenv.selfcheck import tinymodel

            built = tinymodel.build(Path(tmp) / "tiny", n_train=max(a.utterances, 4), n_val=1)
            model_dir, test = built.root, test or built.train_jsonl
        if test is None:
            p.error("--test JSONL is needed with --model-dir")
        loaded = decode.load_model(model_dir, device=a.device)
        try:  # read as `ftenv eval` reads its test set
            utts = [decode.Utterance(u.key, u.audio) for u in models.read_test_set(test)[: a.utterances]]
        except models.TestSetError as exc:
            raise SystemExit(str(exc)) from None
        result = measure(loaded, utts, a.batch_size, a.max_new_tokens)
    result |= {
        "model": "tiny (random weights)" if a.model_dir is None else str(a.model_dir),
        "device": loaded.device,
        "llm_dtype": loaded.llm_dtype,
        "batch_size": a.batch_size,
        "max_new_tokens": a.max_new_tokens,
        "threads": a.threads,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.1f}",
    }
    if loaded.device.startswith("cuda"):
        result["gpu"] = torch.cuda.get_device_name()
    print(f"machine: {result['machine']}; device {result['device']} ({result['llm_dtype']})")
    print(
        f"{result['utterances']} utterances, {result['audio_s']:.1f} s of audio, "
        f"{result['generated_tokens']} tokens generated, {result['distinct_hypotheses']} distinct hypotheses"
    )
    print(f"upstream, one at a time: {result['upstream_s']:.2f} s, {result['upstream_utt_per_s']:.2f} utt/s")
    print(
        f"batched (batch {a.batch_size}): {result['batched_s']:.2f} s, {result['batched_utt_per_s']:.2f} "
        f"utt/s: {result['speedup']:.2f}x"
    )
    print(f"equal hypotheses (token ids): {result['equal_hypotheses']}/{result['utterances']}")
    if a.json:
        a.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if result["equal_hypotheses"] == result["utterances"] else outcome.EXIT[outcome.FAIL]


if __name__ == "__main__":
    sys.exit(main())
