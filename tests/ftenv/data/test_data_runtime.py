"""FunASR's silent data losses at run time: the trainer entry's counter (ftenv.data.runtime) on
FunASR's own dataset and sampler classes, and `ftenv watch` adding up the lines and failing a run
above the documented share. The watchdog tests write the event lines literally, as a trainer would
print them, so they hold the line format to its documentation."""

from __future__ import annotations

import sys

import pytest

from ftenv.watchdog import data_loss
from support import child_env, run_ftenv
from support.steplogs import GenStep, train_line
from support.training_data import funasr_dataset, line, wav


@pytest.fixture
def counted(tiny, tmp_path, capfd):
    """FunASR's dataset on a manifest with a missing audio file, an empty text_length and one
    utterance over max_token_length, with the counter installed."""
    from ftenv.data import runtime

    assert "counting FunASR" in runtime.install() or "already" in runtime.install()
    rows = [line(wav(tmp_path / f"u{i}.wav", 0.6 + i / 10), speech_length=60 + 10 * i) for i in range(3)]
    rows.append(line(tmp_path / "missing.wav", speech_length=80))
    rows.append(line(tmp_path / "u0.wav", speech_length=60, text_length=0))  # dropped at indexing
    rows.append(line(tmp_path / "u1.wav", speech_length=3600, text_length=2))  # over max_token_length 3500
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    capfd.readouterr()
    return funasr_dataset(tiny, path)


def events(err: str) -> list[tuple]:
    return [p for p in (data_loss.parse(x.encode()) for x in err.splitlines()) if p is not None]


def test_the_counter_sees_funasrs_silent_substitution_and_drops(counted, capfd):
    from funasr.datasets.audio_datasets.samplers import CustomDistributedBufferDynamicBatchSampler

    ds = counted
    assert len(ds) == 5  # FunASR indexed 5 of the 6 lines, silently
    missing = next(i for i in range(len(ds)) if "missing.wav" in ds.index_ds[i]["user"][0])
    sample = ds[missing]
    assert sample is not None and "missing.wav" not in sample["item"]["user"][0]  # FunASR's substitute
    assert ds[0]["item"] is ds.index_ds[0]  # a good sample: no event
    list(CustomDistributedBufferDynamicBatchSampler(ds, batch_size=6000, max_token_length=3500))
    with pytest.raises(KeyError, match="input_ids"):
        ds.collator([])  # what the sampler's empty batch meets
    found = events(capfd.readouterr().err)
    kinds = [(e[0], e[2], e[3], e[4]) for e in found]
    assert (data_loss.DROPPED_INDEX, "train", 1, 6) in kinds
    assert (data_loss.SUBSTITUTED, "train", 1, 0) in kinds
    assert (data_loss.DROPPED_SAMPLER, "train", 1, 5) in kinds
    assert (data_loss.EMPTY_BATCH, "train", 1, 0) in kinds
    assert len([k for k in kinds if k[0] == data_loss.SUBSTITUTED]) == 1
    tally = data_loss.DataLossTally(served=100)
    for e in found:
        tally.observe(data_loss.event_line(*e).encode())
    assert tally.failed()
    assert any("substituted 1" in x for x in tally.summary_lines("[p]"))


def test_the_share_rule():
    t = data_loss.DataLossTally(served=1000)
    t.observe(data_loss.event_line(data_loss.SUBSTITUTED, 0, "train", 10).encode())
    assert t.runtime_share() == 0.01 and not t.failed()  # exactly the limit passes
    t.observe(data_loss.event_line(data_loss.LOST, 1, "train", 1).encode())
    assert t.failed()
    s = data_loss.DataLossTally(served=10)
    for rank in (0, 1):  # every rank reports the same set-level count: kept once
        s.observe(data_loss.event_line(data_loss.DROPPED_INDEX, rank, "train", 1, 200).encode())
    assert s.set_share() == 0.005 and not s.failed()
    assert data_loss.parse(b"train, rank: 0, epoch: 1") is None
    none_served = data_loss.DataLossTally()  # substitutes, but no step line read: all bad
    none_served.observe(data_loss.event_line(data_loss.SUBSTITUTED, 0, "train", 1).encode())
    assert none_served.runtime_share() == 1.0 and none_served.failed()


def _trainer(tmp_path, events_text: list[str], steps: int = 20) -> tuple[list[str], int]:
    """A stand-in trainer that prints FunASR step lines (batch sizes from the generator) and
    the given event lines, then exits 0."""
    run = [GenStep(0, i, 8, 100 + 4 * (i % 3), 0.011, 0.030, 0.045, 0.012) for i in range(1, steps + 1)]
    log = [train_line(s) for s in run]
    for i, text in enumerate(events_text):
        log.insert(3 + i, text)
    path = tmp_path / "log.txt"
    path.write_text("\n".join(log) + "\n", encoding="utf-8")
    served = sum(s.batch for s in run)
    return [sys.executable, "-c", f"import sys; sys.stderr.write(open({str(path)!r}).read())"], served


def test_watch_fails_a_run_that_lost_data(tmp_path):
    substituted = "[ftenv-data] event: substituted, rank: 0, set: train, count: 1, of: 0, detail: utt7"
    cmd, served = _trainer(tmp_path, [substituted] * 3)
    assert 3 / served > data_loss.MAX_LOSS_SHARE
    proc = run_ftenv("watch", "--", *cmd, env=child_env())
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "FunASR silently substituted 3" in proc.stderr
    assert "exit 1: the training ran, but on data FunASR silently lost" in proc.stderr
    assert "e.g. substituted: utt7" in proc.stderr


def test_watch_passes_a_run_within_the_limit_and_reports_it(tmp_path):
    dropped = "[ftenv-data] event: dropped_index, rank: 0, set: train, count: 1, of: 1000, detail: x"
    cmd, _ = _trainer(tmp_path, [dropped])
    proc = run_ftenv("watch", "--", *cmd, env=child_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "0.1% of the training lines never train; within the limit" in proc.stderr
    clean, _ = _trainer(tmp_path, [])
    proc = run_ftenv("watch", "--", *clean, env=child_env())
    assert proc.returncode == 0 and "[ftenv-watch] data" not in proc.stderr


def test_an_empty_batch_fails_the_run(tmp_path):
    empty = "[ftenv-data] event: empty_batch, rank: 0, set: valid, count: 1, of: 0"
    cmd, _ = _trainer(tmp_path, [empty])
    proc = run_ftenv("watch", "--", *cmd, env=child_env())
    assert proc.returncode == 1 and "empty_batch 1" in proc.stderr
