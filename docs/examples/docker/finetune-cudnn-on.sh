#!/usr/bin/env bash
# The same one-GPU fine-tune with cuDNN attention put back in front (the image sets
# TORCH_CUDNN_SDPA_DEPRIORITIZED=1; 0 overrides it). On H100/H200/B200/B300 with this image's
# torch and cuDNN, expect the slow steps of docs/cudnn-sdpa-guide.md: one step in several takes
# about a second while cuDNN builds a plan for a new batch shape. Use it to compare, not to train.
set -euo pipefail

# One image per run: the image by its `<stack>-<commit>` tag, which never moves (docs/releasing.md),
# so that a resumed run uses the same build. Put the release's commit (12 hex digits; its release
# notes list the tag) in place of `<commit>`, or set IMAGE to the digest,
# ghcr.io/funasr-nano-images/funasr-nano@sha256:<64 hex>, from
#   crane digest ghcr.io/funasr-nano-images/funasr-nano:funasr1.4.16-torch2.11.0-cu130-cudnn9.19.0.56
# The releases, with their notes: https://github.com/funasr-nano-images/funasr-nano-images/releases
IMAGE=${IMAGE:-ghcr.io/funasr-nano-images/funasr-nano:funasr1.4.16-torch2.11.0-cu130-cudnn9.19.0.56-<commit>}
[[ $IMAGE != *'<commit>'* ]] || { echo "IMAGE=$IMAGE: put the release's commit in place of <commit>" \
  "(the lines above IMAGE= in $0 say how)" >&2; exit 2; }
MODEL_DIR=${MODEL_DIR:-/srv/models/Fun-ASR-Nano-2512}
DATA_DIR=${DATA_DIR:-/srv/data/asr}
OUT_DIR=${OUT_DIR:-/srv/runs/nano-cudnn-on}
# Run as your UID with group 0, so the output files are yours. Rootless Docker or Podman map your
# host user to uid 0 in the container and any other uid to someone else, who cannot write OUT_DIR:
# there set CONTAINER_USER=0:0 (that is you, not the host's root).
CONTAINER_USER=${CONTAINER_USER:-$(id -u):0}

mkdir -p "$OUT_DIR"
docker run --rm --gpus '"device=0"' --ipc=host \
  -e TORCH_CUDNN_SDPA_DEPRIORITIZED=0 \
  --user "$CONTAINER_USER" \
  -v "$MODEL_DIR:$MODEL_DIR:ro" \
  -v "$DATA_DIR:$DATA_DIR:ro" \
  -v "$OUT_DIR:$OUT_DIR" \
  "$IMAGE" \
  ftenv finetune \
    --model-dir "$MODEL_DIR" \
    --train "$DATA_DIR/train.jsonl" \
    --valid "$DATA_DIR/valid.jsonl" \
    --output-dir "$OUT_DIR" \
    --gpus-per-node 1 \
    ++train_conf.max_epoch=1
