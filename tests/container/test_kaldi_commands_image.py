"""A Kaldi recipe's wav.scp commands run in the image: `ftenv data prepare --run-commands` on a folder
whose wav.scp decodes with `sox ... |` (segments cut from it too), `flac -c -d -s ... |` and
`sox -t sph ... |` (the FLAC and SPHERE files made in the container by the image's own flac and sox)
writes every utterance sample for sample; a `sph2pipe ... |` entry, which Debian and Ubuntu do not
package, is refused once with its fix (docs/data.md)."""

from __future__ import annotations

import json
import os

import numpy as np
import soundfile

RATE = 16000
W = "/w"
USER = "4242:0"
PREPARE = (
    f"ftenv data prepare --wav-scp {W}/data --audio-out {W}/cut --run-commands "
    f"--model-dir /opt/ftenv/tiny -o {W}/train.jsonl"
)


def _ramp(seconds: float) -> np.ndarray:
    """Every sample different, so that each written utterance is checked by value."""
    return (np.arange(int(seconds * RATE)) % 60000 - 30000).astype("int16")


def test_sox_and_flac_commands_run_in_the_image(run, tmp_path):
    work = tmp_path / "w"
    (work / "data").mkdir(parents=True)
    a, b = _ramp(1.5), _ramp(1.0)[::-1].copy()
    soundfile.write(str(work / "a.wav"), a, RATE, subtype="PCM_16")
    soundfile.write(str(work / "b.wav"), b, RATE, subtype="PCM_16")
    (work / "data" / "wav.scp").write_text(
        f"r1 sox {W}/a.wav -t wav - |\nr2 flac -c -d -s {W}/b.flac |\nr3 sox -t sph {W}/c.sph -t wav - |\n"
    )
    (work / "data" / "segments").write_text("u1 r1 0.0 0.5\nu2 r1 0.5 1.5\nu3 r2 0 -1\nu4 r3 0.25 1.0\n")
    (work / "data" / "text").write_text("u1 yi\nu2 er\nu3 san\nu4 si\n")
    for p in [work, *work.rglob("*")]:
        os.chmod(p, 0o777 if p.is_dir() else 0o666)
    mount = ["-v", f"{work}:{W}:z"]
    make = f"set -e; cd {W}; flac -s -o b.flac b.wav; sox b.wav -t sph c.sph; rm b.wav"
    made = run("bash", "-c", make, env={"FTENV_REPORT": "0"}, user=USER, extra=mount)
    assert made.returncode == 0, made.stderr
    assert soundfile.info(str(work / "b.flac")).format == "FLAC"
    done = run("bash", "-c", PREPARE, env={"FTENV_REPORT": "0"}, user=USER, extra=mount)
    assert done.returncode == 0, done.stderr
    assert "not used" not in done.stderr, done.stderr
    records = [json.loads(x) for x in (work / "train.jsonl").read_text().splitlines()]
    assert [r["key"] for r in records] == ["u1", "u2", "u3", "u4"]
    expected = {"u1": a[:8000], "u2": a[8000:24000], "u3": b, "u4": b[4000:16000]}
    for key, samples in expected.items():
        got, rate = soundfile.read(str(work / "cut" / f"{key}.wav"), dtype="int16")
        assert rate == RATE and np.array_equal(got, samples), key

    (work / "data" / "wav.scp").write_text(
        f"r1 sox {W}/a.wav -t wav - |\nr2 flac -c -d -s {W}/b.flac |\nr3 sph2pipe -f wav {W}/c.sph |\n"
    )
    refused = run(
        "bash", "-c", PREPARE.replace("/cut", "/cut2"), env={"FTENV_REPORT": "0"}, user=USER, extra=mount
    )
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.count("not found on PATH") == 1, refused.stderr
    assert (
        "sph2pipe (not found on PATH" in refused.stderr and "sph2pipe -f wav IN.sph OUT.wav" in refused.stderr
    )
    assert "exited 127" not in refused.stderr and not (work / "cut2").exists()
