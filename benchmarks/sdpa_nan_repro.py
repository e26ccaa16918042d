#!/usr/bin/env python3
"""Reproduce the NaN gradients reported against cuDNN attention's backward pass, with the cuDNN
backend forced, and count the NaN in dQ, dK and dV of each case, with the torch and cuDNN versions:
the GPU kit's `sdpa-nan` step (docs/gpu-results.md). The cases, as their public reports give them:

- pytorch/pytorch#196678: an explicit boolean mask, seq_len % 128 == 64 (704), every scaled score
  about -120 so that each row's log-sum-exp is below -88.7; NaN in dQ on H100/H200 with cuDNN
  older than 9.26 (the report's repro). Its control, 768 = 6 * 128, is clean there.
- NVIDIA/cudnn-frontend#1072 (open): one query against 128 keys, head size 128, no mask, every
  scaled score about -128 (log-sum-exp about -122); NaN in dK/dV reported on cuDNN 9.26.0.51 on an
  H200.

    python benchmarks/sdpa_nan_repro.py [--json out.json]

Runs on whatever torch is installed. Where cuDNN attention cannot run (no GPU, a torch without
cuDNN or without the cuDNN backend) it says why and counts nothing ("unknown"). Exit codes
(ftenv.outcome's verdicts): 0 every case ran on cuDNN with no NaN; 1 NaN in a gradient of some
case; 3 no case could run on cuDNN here (unknown); 4 the script itself broke.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))

from ftenv import outcome  # noqa: E402
from ftenv.attention import sdpa  # noqa: E402

ISSUE_196678 = "https://github.com/pytorch/pytorch/issues/196678"
ISSUE_1072 = "https://github.com/NVIDIA/cudnn-frontend/issues/1072"
#: Below this a row's exp(score - LSE) overflows fp32 where a kernel scores a padded key 0: ln(FLT_MAX).
LSE_OVERFLOW = -88.7
GRADIENTS = ("dq", "dk", "dv")


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    seq_q: int
    seq_kv: int
    head_dim: int
    masked: bool
    #: Every scaled score is about this: q[..., 0] = 1 and k[..., 0] = score * sqrt(head_dim).
    score: float


CASES = (
    Case("pytorch#196678", ISSUE_196678, 704, 704, 64, True, -120.0),
    Case("pytorch#196678 control (768)", ISSUE_196678, 768, 768, 64, True, -120.0),
    Case("cudnn-frontend#1072", ISSUE_1072, 1, 128, 128, False, -128.0),
)


def cudnn_unavailable(torch) -> str | None:
    """Why cuDNN attention cannot run in this process, or None when it may."""
    try:
        if not torch.cuda.is_available():
            return "no CUDA GPU visible"
        if not torch.backends.cudnn.is_available():
            return f"torch {torch.__version__} has no cuDNN"
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: F401  (torch >= 2.3)

        SDPBackend.CUDNN_ATTENTION  # noqa: B018  (absent from older torch)
    except (ImportError, AttributeError) as exc:
        return f"torch {torch.__version__} has no cuDNN attention backend ({exc})"
    except Exception as exc:  # a broken driver raises many kinds of errors
        return f"CUDA: {exc}"
    return None


def inputs(torch, case: Case, device: str = "cuda"):
    """q, k, v, the mask (or None) and dO, seeded; scores pinned near case.score as the reports do."""
    gen = torch.Generator(device=device).manual_seed(0)
    shape = (1, 1)

    def randn(seq: int, scale: float):
        return torch.randn(*shape, seq, case.head_dim, device=device, generator=gen) * scale

    q, k, v = randn(case.seq_q, 0.1), randn(case.seq_kv, 0.1), randn(case.seq_kv, 1.0)
    q[..., 0], k[..., 0] = 1.0, case.score * math.sqrt(case.head_dim)
    q, k, v = (t.to(torch.bfloat16).requires_grad_() for t in (q, k, v))
    mask = None
    if case.masked:  # the report's lower-triangular boolean mask (an all-True one fails too)
        mask = torch.ones(case.seq_q, case.seq_kv, dtype=torch.bool, device=device).tril()[None, None]
    grad_out = torch.randn(*shape, case.seq_q, case.head_dim, device=device, generator=gen).to(torch.bfloat16)
    return q, k, v, mask, grad_out


def lowest_lse(torch, q, k, mask) -> float:
    """The smallest row log-sum-exp of the scaled scores, in fp32, as the backward pass sees it."""
    scores = (q.detach().float() @ k.detach().float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return float(torch.logsumexp(scores, dim=-1).min())


def run_case(torch, case: Case, device: str = "cuda") -> dict:
    """One case on cuDNN only: NaN counts of each gradient, or why cuDNN did not run it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = {"case": case.name, "source": case.source, "shape": [1, 1, case.seq_q, case.seq_kv, case.head_dim]}
    out["mask"] = "boolean, lower-triangular" if case.masked else None
    q, k, v, mask, grad_out = inputs(torch, case, device)
    out["lse_min"] = round(lowest_lse(torch, q, k, mask), 1)
    try:
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            o.backward(grad_out)
        if device == "cuda":
            torch.cuda.synchronize()
    except RuntimeError as exc:  # cuDNN refused these inputs: "No available kernel"
        out["ran"], out["refused"] = False, str(exc).strip().splitlines()[0][:200]
        return out
    out["ran"] = True
    out["nan"] = {n: int(torch.isnan(t.grad).sum()) for n, t in zip(GRADIENTS, (q, k, v), strict=True)}
    out["out_nan"] = int(torch.isnan(o).sum())
    return out


NAN_DQ, NAN_DK_DV, FINITE = "NaN in dQ", "NaN in dK/dV", "finite"


def expected(case: Case, cudnn: int | None, sm: tuple[int, int] | None) -> str:
    """What the public reports predict for this case on this GPU with the loaded cuDNN (the fix's
    threshold is the report's, ftenv.attention.sdpa): NAN_DQ, NAN_DK_DV, FINITE, or no prediction."""
    fixed = cudnn is not None and cudnn >= sdpa.NAN_GRAD_FIXED_CUDNN
    if sm != (9, 0):
        return "no prediction: both reports are of sm_90 (H100/H200)"
    if case.source == ISSUE_196678:
        return NAN_DQ if case.seq_kv % 128 == 64 and not fixed else FINITE
    return NAN_DK_DV if fixed else "no prediction: reported on cuDNN 9.26.0.51"


def matches(prediction: str, nan: dict[str, int]) -> bool | None:
    """Whether NaN counts bear the prediction out; None where there is none."""
    if prediction == NAN_DQ:
        return nan["dq"] > 0
    if prediction == NAN_DK_DV:
        return nan["dk"] > 0 or nan["dv"] > 0
    if prediction == FINITE:
        return not any(nan.values())
    return None


def verdict(cases: list[dict]) -> str:
    """INCONCLUSIVE when no case ran on cuDNN, FAIL when a gradient of one has NaN, else PASS."""
    ran = [c for c in cases if c.get("ran")]
    if not ran:
        return outcome.INCONCLUSIVE
    return outcome.FAIL if any(sum(c["nan"].values()) for c in ran) else outcome.PASS


def case_line(r: dict) -> str:
    if not r.get("ran"):
        return f"{r['case']}: not run on cuDNN: {r.get('refused')}"
    nan = ", ".join(f"{n} {r['nan'][n]}" for n in GRADIENTS)
    return f"{r['case']}: NaN {nan} (log-sum-exp min {r['lse_min']}; expected: {r['expected']})"


def measure() -> dict:
    """Every case, with the versions and the GPU: the JSON the script prints."""
    import torch

    result = {"torch": torch.__version__, "cudnn": None, "gpu": None, "sm": None, "unavailable": None}
    try:
        result["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:  # a torch without cuDNN, or a libcudnn that does not load
        result["cudnn_problem"] = str(exc)
    result["cudnn_name"] = sdpa.cudnn_name(result["cudnn"])
    result["unavailable"] = cudnn_unavailable(torch)
    result["cases"] = []
    if result["unavailable"]:
        result["verdict"] = outcome.INCONCLUSIVE
        return result
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    sm = (p.major, p.minor)
    result["gpu"], result["sm"] = p.name, sdpa.sm_name(sm)
    for case in CASES:
        r = run_case(torch, case) | {"expected": expected(case, result["cudnn"], sm)}
        r["matches"] = matches(r["expected"], r["nan"]) if r["ran"] else None
        result["cases"].append(r)
    result["verdict"] = verdict(result["cases"])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the result here too")
    args = parser.parse_args(argv)
    try:
        result = measure()
    except Exception:  # the script's own bug: never read as a verdict
        traceback.print_exc()
        return outcome.INTERNAL_ERROR
    head = f"torch {result['torch']}, cuDNN {result['cudnn_name']}, GPU {result['gpu'] or 'none'}"
    if result["unavailable"]:
        print(f"{head}: unknown: cuDNN attention cannot run here ({result['unavailable']})", file=sys.stderr)
    else:
        print(head, *map(case_line, result["cases"]), sep="\n", file=sys.stderr)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return outcome.EXIT[result["verdict"]]


if __name__ == "__main__":
    sys.exit(main())
