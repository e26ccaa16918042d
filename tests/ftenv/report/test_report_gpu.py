"""The report on a real GPU: the live order and the measured padded-mask choice follow the variable.

Skipped without CUDA. torch reads TORCH_CUDNN_SDPA_DEPRIORITIZED once per process, so each
setting runs `ftenv report --json` in a fresh process.
"""

import json
import os
import subprocess
import sys

import pytest

from ftenv import variables
from ftenv.attention import sdpa

pytestmark = pytest.mark.gpu


def _report(value: str | None) -> dict:
    env = dict(os.environ)
    env.pop(variables.SDPA_DEPRIORITIZED, None)
    if value is not None:
        env[variables.SDPA_DEPRIORITIZED] = value
    out = subprocess.run(
        [sys.executable, "-m", "ftenv.cli", "report", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def reports() -> dict:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    return {value: _report(value) for value in ("1", "0")}


def test_the_live_probe_reads_the_order_and_the_choice(reports):
    facts = reports["1"]["facts"]
    assert facts["gpus"] and facts["live_order"] and facts["padded_choice"] is not None, facts["problems"]


def test_deprioritized_never_takes_cudnn(reports):
    assert reports["1"]["facts"]["padded_choice"] != sdpa.CUDNN
    assert reports["1"]["verdict"]["level"] == "ok"


def test_at_0_the_verdict_follows_the_rule(reports):
    facts = reports["0"]["facts"]
    sm = tuple(facts["gpus"][0]["sm"])
    expected = sdpa.cudnn_first_by_rule(
        facts["torch_version"], facts["cudnn_version"], sm, sdpa.interpret_deprioritized("0")
    )
    assert (facts["live_order"][0] == sdpa.CUDNN) is expected
    assert (facts["padded_choice"] == sdpa.CUDNN) is expected
    assert reports["0"]["verdict"]["level"] == ("exposed" if expected else "ok")
