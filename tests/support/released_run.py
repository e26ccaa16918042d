"""The data and the one script of tests/container/test_released_layout_image.py: every command on
the released layout in one container, each step timed with its peak RSS (the largest process of the
step, children waited for included: getrusage's RUSAGE_CHILDREN) into WORK/steps.jsonl."""

from __future__ import annotations

from pathlib import Path

#: Four transcripts; train on the first two (one a batch: two steps), validate and eval on all.
TEXTS = ["今天天气很好", "我们去公园散步", "请把门关上", "你好世界"]

MEASURE = """import json, resource, subprocess, sys, time
step, out, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
start = time.monotonic()
with open(out, "w") as log:
    rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
row = {"step": step, "rc": rc, "wall_s": round(time.monotonic() - start, 1), "peak_rss_mib": peak}
with open(sys.argv[0].rsplit("/", 1)[0] + "/steps.jsonl", "a") as f:
    f.write(json.dumps(row) + "\\n")
if rc:
    sys.stdout.write(open(out).read()[-4000:])
sys.exit(rc)
"""

AUTOMODEL = """import json, sys, torch
from funasr import AutoModel
m = AutoModel(model=sys.argv[1], device="cpu", disable_update=True)
res = m.generate(input=[sys.argv[2]], cache={}, batch_size=1, max_length=4)
state = torch.load(sys.argv[1] + "/model.pt", map_location="cpu")
keys = [k for k in state.get("state_dict", state) if k.startswith("ctc")]
out = {"text": res[0]["text"], "ctc_decoder": m.model.ctc_decoder is not None, "ctc_keys": len(keys)}
json.dump(out, open(sys.argv[3], "w"), ensure_ascii=False)
"""

#: Formatted with model= and work= (the paths inside the container).
SCRIPT = """set -euo pipefail
cd {work}
M="python3 {work}/measure.py"
$M prepare prepare.log ftenv data prepare --table {work}/data/table.tsv --model-dir {model} \\
  --output {work}/data/train.jsonl
head -n 2 {work}/data/train.jsonl > {work}/data/train2.jsonl
$M check check.log ftenv data check {work}/data/train.jsonl --model-dir {model}
$M finetune finetune.log ftenv finetune --gpus-per-node 1 --model-dir {model} \\
  --train {work}/data/train2.jsonl --valid {work}/data/train.jsonl --output-dir {work}/run \\
  --skip-data-check \\
  ++train_conf.max_epoch=1 ++device=cpu ++dataset_conf.batch_size=150 ++dataset_conf.num_workers=0 \\
  ++train_conf.keep_nbest_models=1
$M eval eval.log ftenv eval {work}/data/train.jsonl {work}/run/model.pt.ep1 --base {model} \\
  --out {work}/eval --device cpu --max-new-tokens 4 --batch-size 4
$M export-funasr export-funasr.log ftenv export {work}/run/model.pt.ep1 {work}/export-funasr --base {model}
$M export-hf export-hf.log ftenv export {work}/run/model.pt.ep1 {work}/export-hf --base {model} --format hf \\
  || true  # refused today: the released adaptor's use_low_frame_rate (the test says so)
$M transcribe transcribe.log ftenv transcribe {work}/export-funasr {work}/data/wav/u0.wav \\
  {work}/data/wav/u1.wav --device cpu --max-new-tokens 4
grep -P '\\t' transcribe.log > transcribe.txt
$M automodel automodel.log python3 {work}/automodel.py {work}/export-funasr {work}/data/wav/u0.wav \\
  {work}/automodel.json
"""


def write_data(work: Path, inside: str) -> None:
    """The wavs (tones, 0.8 to 1.4 s), a TSV of path and transcript as seen inside the container,
    and the two helper scripts."""
    import numpy as np
    import soundfile

    wav = work / "data" / "wav"
    wav.mkdir(parents=True)
    rows = []
    for i, text in enumerate(TEXTS):
        n = int((0.8 + 0.2 * i) * 16000)
        t = np.arange(n) / 16000
        noise = np.random.default_rng(i).standard_normal(n)
        soundfile.write(
            wav / f"u{i}.wav", (0.1 * np.sin(2 * np.pi * (200 + 40 * i) * t) + 0.01 * noise), 16000
        )
        rows.append(f"{inside}/data/wav/u{i}.wav\t{text}")
    (work / "data" / "table.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (work / "measure.py").write_text(MEASURE)
    (work / "automodel.py").write_text(AUTOMODEL)
