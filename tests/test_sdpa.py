"""torch's SDPA backend rule and the report's verdict, on injected facts (no GPU needed)."""

import pytest

from ftenv.report import sdpa

H100, B200, B300, A100, RTX5090 = (9, 0), (10, 0), (10, 3), (8, 0), (12, 0)
CUDNN_9_10, CUDNN_9_19 = 91002, 91900


@pytest.mark.parametrize(
    "raw, state",
    [
        (None, "unset"),
        ("1", "deprioritized"),
        ("0", "prefer-cudnn"),
        ("true", "ignored"),
        ("", "ignored"),
        (" 1", "ignored"),
        ("yes", "ignored"),
    ],
)
def test_only_exact_1_and_0_mean_something(raw, state):
    env = sdpa.interpret_env(raw)
    assert env.state == state
    assert env.deprioritizes is (state == "deprioritized")
    if state == "ignored":
        assert "TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in env.meaning and repr(raw) in env.meaning


@pytest.mark.parametrize("sm", [H100, B200, B300])
@pytest.mark.parametrize("raw", [None, "0", "true", ""])
def test_cudnn_first_on_affected_gpus_unless_deprioritized(sm, raw):
    env = sdpa.interpret_env(raw)
    assert sdpa.cudnn_first_by_rule("2.11.0+cu130", CUDNN_9_19, sm, env) is True
    assert sdpa.cudnn_first_by_rule("2.11.0+cu130", CUDNN_9_19, sm, sdpa.interpret_env("1")) is False


@pytest.mark.parametrize("sm", [A100, RTX5090, (8, 6), (8, 9)])
def test_never_first_on_other_gpus(sm):
    assert sdpa.cudnn_first_by_rule("2.11.0", CUDNN_9_19, sm, sdpa.interpret_env(None)) is False


def test_old_cudnn_or_old_torch_is_not_first():
    unset = sdpa.interpret_env(None)
    assert sdpa.cudnn_first_by_rule("2.11.0", CUDNN_9_10, H100, unset) is False
    assert sdpa.cudnn_first_by_rule("2.11.0", 91500, H100, unset) is False  # 9.15.0: not above
    assert sdpa.cudnn_first_by_rule("2.11.0", 91501, H100, unset) is True  # 9.15.1
    assert sdpa.cudnn_first_by_rule("2.9.1+cu128", CUDNN_9_19, H100, unset) is False
    assert sdpa.cudnn_first_by_rule("2.10.0", CUDNN_9_19, B200, unset) is True


def test_unknown_facts_give_unknown_not_a_guess():
    unset = sdpa.interpret_env(None)
    assert sdpa.cudnn_first_by_rule(None, CUDNN_9_19, H100, unset) is None
    assert sdpa.cudnn_first_by_rule("2.11.0", None, H100, unset) is None
    # ...but what is known for sure stays known: the variable at 1 rules cuDNN out.
    assert sdpa.cudnn_first_by_rule("2.11.0", None, H100, sdpa.interpret_env("1")) is False


def _verdict(gpus, raw=None, cudnn=CUDNN_9_19, order=None, choice=None, torch="2.11.0+cu130"):
    return sdpa.verdict(
        gpus=gpus,
        torch_version=torch,
        cudnn_version=cudnn,
        env=sdpa.interpret_env(raw),
        live_order=order,
        padded_choice=choice,
    )


def test_measured_choice_wins():
    exposed = _verdict([H100], raw="1", order=[1, 2, 0, 3, 4], choice=3)  # measurement beats the rule
    assert exposed.level == "exposed" and "cudnn" in exposed.reason
    ok = _verdict([H100], raw="0", order=[3, 1, 2, 0, 4], choice=2)
    assert ok.level == "ok" and "efficient" in ok.reason


def test_live_order_used_when_choice_unknown():
    assert _verdict([B200], order=[3, 1, 2, 0, 4]).level == "exposed"
    assert _verdict([B200], raw="0", order=[1, 2, 0, 3, 4]).level == "ok"


def test_rule_is_the_fallback_when_private_apis_are_missing():
    exposed = _verdict([H100, A100])
    assert exposed.level == "exposed" and "sm_90" in exposed.reason and "sm_80" not in exposed.reason
    assert exposed.fix == "set TORCH_CUDNN_SDPA_DEPRIORITIZED=1 before the process starts"
    assert _verdict([H100], raw="1").level == "ok"
    assert _verdict([A100]).level == "ok"
    assert _verdict([H100], cudnn=None).level == "unknown"


def test_exposed_line_names_symptom_and_fix_and_ok_line_has_no_fix():
    line = _verdict([B300], raw="true").line
    assert (
        line.startswith("EXPOSED:")
        and "new batch shapes" in line
        and "Fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in line
    )
    assert "Fix" not in _verdict([B300], raw="1").line


def test_no_gpu():
    v = _verdict([])
    assert v.level == "no-gpu" and v.line.startswith("NO GPU")
