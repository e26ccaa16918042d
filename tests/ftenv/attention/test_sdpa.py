"""torch's SDPA backend rule and the report's verdict, on injected facts (no GPU needed)."""

import re
from pathlib import Path

import pytest

from ftenv import variables
from ftenv.attention import sdpa

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
    env = sdpa.interpret_deprioritized(raw)
    assert env.state == state
    assert env.deprioritizes is (state == "deprioritized")
    if state == "ignored":
        assert "TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in env.meaning and repr(raw) in env.meaning


@pytest.mark.parametrize("sm", [H100, B200, B300])
@pytest.mark.parametrize("raw", [None, "0", "true", ""])
def test_cudnn_first_on_affected_gpus_unless_deprioritized(sm, raw):
    env = sdpa.interpret_deprioritized(raw)
    assert sdpa.cudnn_first_by_rule("2.11.0+cu130", CUDNN_9_19, sm, env) is True
    assert (
        sdpa.cudnn_first_by_rule("2.11.0+cu130", CUDNN_9_19, sm, sdpa.interpret_deprioritized("1")) is False
    )


@pytest.mark.parametrize("sm", [A100, RTX5090, (8, 6), (8, 9)])
def test_never_first_on_other_gpus(sm):
    assert sdpa.cudnn_first_by_rule("2.11.0", CUDNN_9_19, sm, sdpa.interpret_deprioritized(None)) is False


def test_old_cudnn_or_old_torch_is_not_first():
    unset = sdpa.interpret_deprioritized(None)
    assert sdpa.cudnn_first_by_rule("2.11.0", CUDNN_9_10, H100, unset) is False
    assert sdpa.cudnn_first_by_rule("2.11.0", 91500, H100, unset) is False  # 9.15.0: not above
    assert sdpa.cudnn_first_by_rule("2.11.0", 91501, H100, unset) is True  # 9.15.1
    assert sdpa.cudnn_first_by_rule("2.9.1+cu128", CUDNN_9_19, H100, unset) is False
    assert sdpa.cudnn_first_by_rule("2.10.0", CUDNN_9_19, B200, unset) is True


def test_unknown_facts_give_unknown_not_a_guess():
    unset = sdpa.interpret_deprioritized(None)
    assert sdpa.cudnn_first_by_rule(None, CUDNN_9_19, H100, unset) is None
    assert sdpa.cudnn_first_by_rule("2.11.0", None, H100, unset) is None
    # ...but what is known for sure stays known: the variable at 1 rules cuDNN out.
    assert sdpa.cudnn_first_by_rule("2.11.0", None, H100, sdpa.interpret_deprioritized("1")) is False


def _exposure(gpus, raw=None, cudnn=CUDNN_9_19, order=None, choice=None, torch="2.11.0+cu130"):
    return sdpa.exposure(
        gpus=gpus,
        torch_version=torch,
        cudnn_version=cudnn,
        setting=sdpa.interpret_deprioritized(raw),
        live_order=order,
        padded_choice=choice,
    )


def test_measured_choice_wins():
    exposed = _exposure([H100], raw="1", order=[1, 2, 0, 3, 4], choice=3)  # measurement beats the rule
    assert exposed.level == "exposed" and "cudnn" in exposed.reason
    ok = _exposure([H100], raw="0", order=[3, 1, 2, 0, 4], choice=2)
    assert ok.level == "ok" and "efficient" in ok.reason


def test_live_order_used_when_choice_unknown():
    assert _exposure([B200], order=[3, 1, 2, 0, 4]).level == "exposed"
    assert _exposure([B200], raw="0", order=[1, 2, 0, 3, 4]).level == "ok"


def test_rule_is_the_fallback_when_private_apis_are_missing():
    exposed = _exposure([H100, A100])
    assert exposed.level == "exposed" and "sm_90" in exposed.reason and "sm_80" not in exposed.reason
    assert exposed.fix == "set TORCH_CUDNN_SDPA_DEPRIORITIZED=1 before the process starts"
    assert _exposure([H100], raw="1").level == "ok"
    assert _exposure([A100]).level == "ok"
    assert _exposure([H100], cudnn=None).level == "unknown"


def test_exposed_line_names_symptom_and_fix_and_ok_line_has_no_fix():
    line = _exposure([B300], raw="true").line
    assert (
        line.startswith("EXPOSED:")
        and "new batch shapes" in line
        and "Fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in line
    )
    assert "Fix" not in _exposure([B300], raw="1").line


def test_no_gpu():
    v = _exposure([])
    assert v.level == "no-gpu" and v.line.startswith("NO GPU")


# --- torch 2.9 (PR #162073), the NaN risk (pytorch#196678), and the mutants a review found --------


def test_torch_2_9_is_affected_where_compiled_against_cudnn_9_9_or_newer():
    unset = sdpa.interpret_deprioritized(None)
    # Compiled against cuDNN >= 9.9: cuDNN first on sm_90/sm_100, whatever the runtime cuDNN.
    assert sdpa.cudnn_first_by_rule("2.9.0+cu130", CUDNN_9_10, H100, unset, cudnn_compiled=91300) is True
    assert sdpa.cudnn_first_by_rule("2.9.0+cu126", None, B200, unset, cudnn_compiled=90900) is True
    assert sdpa.cudnn_first_by_rule("2.9.0+cu126", None, B200, unset, cudnn_compiled=90899) is False
    # 2.9 reads TORCH_CUDNN_SDPA_PREFERRED, not the new variable, and never prefers on sm_103.
    one = sdpa.interpret_deprioritized("1")
    assert sdpa.cudnn_first_by_rule("2.9.0", None, H100, one, cudnn_compiled=91300) is True
    opted_out = sdpa.cudnn_first_by_rule("2.9.0", None, H100, unset, cudnn_compiled=91300, preferred_raw="0")
    assert opted_out is False
    assert sdpa.cudnn_first_by_rule("2.9.0", None, B300, unset, cudnn_compiled=91300) is False
    # The cu128 wheels were compiled against 9.8 (pytorch#165801); other builds: unknown, not "no".
    assert sdpa.cudnn_first_by_rule("2.9.1+cu128", CUDNN_9_19, H100, unset) is False
    assert sdpa.cudnn_first_by_rule("2.9.1+cu130", CUDNN_9_19, H100, unset) is None
    assert sdpa.cudnn_first_by_rule("2.9.1", CUDNN_9_19, H100, unset) is None
    assert sdpa.cudnn_first_by_rule("2.8.0", CUDNN_9_19, H100, unset) is False


def test_a_2_9_report_never_says_not_affected_when_it_cannot_know():
    v = _exposure([H100], raw="1", torch="2.9.1+cu130")
    assert v.level == "unknown" and "possibly affected on sm_90" in v.line
    assert "TORCH_CUDNN_SDPA_PREFERRED=0" in v.fix  # the 2.9 opt-out, not the variable 2.9 ignores
    exposed = _exposure([B200], torch="2.9.0+cu130", order=[3, 1, 2, 0, 4])
    assert exposed.level == "exposed" and exposed.fix.startswith("set TORCH_CUDNN_SDPA_PREFERRED=0")
    assert _exposure([H100], torch="2.9.1+cu128").level == "ok"


def test_torch_2_10_cu130_with_its_cudnn_9_15_1_9_is_affected():
    # pytorch#173677: 2.10.0+cu130 pins nvidia-cudnn-cu13 9.15.1.9 -> torch reports 91501.
    assert _exposure([H100], torch="2.10.0+cu130", cudnn=91501).level == "exposed"
    assert _exposure([H100], torch="2.10.0", cudnn=91002).level == "ok"


@pytest.mark.parametrize("raw", [None, "0", "true", ""])
def test_not_deprioritized_on_an_affected_gpu_names_the_nan_risk(raw):
    v = _exposure([H100], raw=raw)
    assert v.level == "exposed" and v.risk and "NaN gradients" in v.risk and "#196678" in v.risk
    assert "64 mod 128" in v.risk and "older than 9.26" in v.risk


@pytest.mark.parametrize(
    "cudnn, risky",
    [
        (92500, True),
        (92501, True),
        (92502, True),
        (92599, True),
        (92600, False),
        (92700, False),
        (None, True),
    ],
)
def test_nan_risk_is_fixed_from_cudnn_9_26(cudnn, risky):
    v = _exposure([H100], raw="0", order=[3, 1, 2, 0, 4], cudnn=cudnn)
    assert v.level == "exposed" and (v.risk == sdpa.NAN_RISK_TEXT) is risky
    assert (v.risk == sdpa.NAN_CORNER_CASE_TEXT) is not risky


# The cuDNN wheels on both sides of the fix, read as the report reads them: torch.backends.cudnn.version()
# is cudnn_version.h's CUDNN_VERSION, major * 10000 + minor * 100 + patch (the build number dropped).
@pytest.mark.parametrize(
    "wheel, fixed",
    [
        ("9.19.0.56", False),  # torch 2.11's, this image's
        ("9.24.0.43", False),  # torch 2.14's
        ("9.25.1", False),  # the last release PR #196861 guards
        ("9.26.0.51", True),  # torch 2.15's, the first with the fix
        ("9.27.0", True),
    ],
)
def test_the_override_note_on_each_side_of_cudnn_9_26(wheel, fixed):
    from ftenv.stack.versions import cudnn_int

    torch_reads = int(wheel.split(".")[0]) * 10000 + int(wheel.split(".")[1]) * 100 + int(wheel.split(".")[2])
    assert cudnn_int(wheel) == torch_reads
    note = _exposure([H100], raw="0", cudnn=torch_reads).risk
    if fixed:  # only the open corner case, none of the fixed bug's words
        assert note == sdpa.NAN_CORNER_CASE_TEXT
        assert "NVIDIA/cudnn-frontend#1072" in note and "length 1" in note and "log-sum-exp" in note
        assert "#196678" not in note and "64 mod 128" not in note and "older than" not in note
    else:  # today's warning, unchanged
        assert note == sdpa.NAN_RISK_TEXT and "#1072" not in note


# The wheels of torch 2.12 to 2.15, with the cuDNN their PyPI metadata pins (2.15: 9.26.0.51); 2.15
# with 9.24 too (a newer torch beside an older cuDNN loaded first): both sides of the NaN fix.
NEWER = [
    ("2.12.0", 92000),
    ("2.13.0", 92000),
    ("2.13.0+cu130", 92000),
    ("2.14.0", 92400),
    ("2.14.0+cu130", 92400),
    ("2.15.0", 92400),
    ("2.15.0", 92600),
]


@pytest.mark.parametrize("torch, cudnn", NEWER)
@pytest.mark.parametrize("sm", [H100, B200, B300])
def test_torch_2_12_to_2_15_put_cudnn_first_on_the_affected_gpus(torch, cudnn, sm):
    v = _exposure([sm], torch=torch, cudnn=cudnn)
    assert v.level == "exposed" and v.fix.startswith(f"set {sdpa.FIX}")
    # keyed on the loaded cuDNN, not on torch
    assert v.risk == (sdpa.NAN_RISK_TEXT if cudnn < 92600 else sdpa.NAN_CORNER_CASE_TEXT)
    assert _exposure([sm], torch=torch, cudnn=cudnn, raw="1").level == "ok"
    assert _exposure([A100], torch=torch, cudnn=cudnn).level == "ok"


@pytest.mark.parametrize("torch", ["2.12.0+cu126", "2.14.0+cu126"])
def test_the_cu126_builds_with_their_cudnn_9_10_are_not_first(torch):
    assert _exposure([H100], torch=torch, cudnn=91002).level == "ok"
    assert _exposure([H100], torch=torch, cudnn=92400).level == "exposed"  # a newer cuDNN loaded


@pytest.mark.parametrize("torch, cudnn", NEWER)
def test_the_report_renders_the_newer_stacks_from_injected_facts(torch, cudnn):
    from ftenv.attention.facts import Facts, Gpu, Stack
    from ftenv.report import render
    from ftenv.trainer import compile_setting

    f = Facts(stack=Stack(torch, cudnn), gpus=[Gpu(0, "NVIDIA H200", H100, 141 * 2**30)])
    text = render.render_text(f, render.assess(f), compile_setting.report_line())
    verdict = next(ln for ln in text.splitlines() if ln.startswith("verdict "))
    assert verdict.startswith("verdict EXPOSED: by torch's rule cuDNN goes first on sm_90")
    assert (sdpa.NAN_RISK_TEXT in text) is (cudnn < 92600)
    assert (sdpa.NAN_CORNER_CASE_TEXT in text) is (cudnn >= 92600)


def test_no_nan_risk_when_deprioritized_or_not_exposed():
    assert _exposure([H100], raw="1").risk is None
    assert _exposure([A100], raw="0").risk is None
    assert _exposure([H100], raw="0", choice=2).risk is None


def test_already_1_gets_no_set_it_to_1_but_how_to_find_the_other_cost():
    # Measured cuDNN although the variable is 1: something else puts it first.
    v = _exposure([H100], raw="1", order=[1, 2, 0, 3, 4], choice=3)
    assert v.level == "exposed"
    assert not v.fix.startswith("set ") and "already set" in v.fix
    assert "ftenv probe" in v.fix and "phases" in v.fix
    assert sdpa.already_deprioritized_text() == v.fix


def test_mixed_gpus_with_an_unknown_cudnn_are_unknown_not_ok():
    # sm_80 is surely not first; sm_90 cannot be decided: the whole verdict is unknown.
    assert _exposure([A100, H100], cudnn=None).level == "unknown"
    assert _exposure([H100, A100], cudnn=None).level == "unknown"


def test_cudnn_second_in_the_live_order_is_not_exposed():
    assert _exposure([H100], order=[1, 3, 2, 0, 4]).level == "ok"
    assert _exposure([H100], order=[3, 1, 2, 0, 4]).level == "exposed"


def test_reason_not_first_speaks_the_rule():
    unset = sdpa.interpret_deprioritized(None)
    assert sdpa.reason_not_first("2.11.0", CUDNN_9_19, [H100], sdpa.interpret_deprioritized("1")) == (
        "TORCH_CUDNN_SDPA_DEPRIORITIZED=1 is set"
    )
    assert "sm_80 is not one of" in sdpa.reason_not_first("2.11.0", CUDNN_9_19, [A100], unset)
    assert "9.10.2 is not newer than 9.15.0" in sdpa.reason_not_first("2.11.0", CUDNN_9_10, [H100], unset)
    assert "sm_90/sm_100 only" in sdpa.reason_not_first("2.9.0", CUDNN_9_19, [B300], unset)
    assert "never" in sdpa.reason_not_first("2.8.0", CUDNN_9_19, [H100], unset)


GUIDE = Path(__file__).resolve().parents[3] / "docs/cudnn-sdpa-guide.md"


def section(title_start: str) -> str:
    """A section of the guide as a reader sees it (without the generated values' markers)."""
    text = re.sub(r"<!--.*?-->", "", GUIDE.read_text())
    start = text.index(f"## {title_start}")
    return text[start : text.index("\n## ", start + 3)]


def test_the_guides_override_section_names_the_nan_risk_in_the_rules_words():
    flat = " ".join(section("5.").split())
    core = sdpa.NAN_RISK_TEXT.split(" (")[0]
    assert core in flat and "pytorch#196678" in flat
    corner = sdpa.NAN_CORNER_CASE_TEXT.split(" (")[0]
    assert corner in flat and "NVIDIA/cudnn-frontend#1072" in flat
    assert "cudnn-frontend#1072" in " ".join(section("6.").split())


def test_the_guide_knows_torch_2_9_and_2_10_cu130():
    flat = " ".join(section("2.").split())
    assert "#162073" in flat and "pytorch#165801" in flat and f"`{sdpa.FIX_2_9}`" in flat
    assert "2.10.0+cu130" in flat and "9.15.1.9" in flat and "pytorch#173677" in flat
    assert "The mask is what matters" not in flat and "masked or not" in flat
    assert "minor* filter on CUDA 13 builds" in flat and "keep the cuDNN > 9.15.0 condition" in flat
    scope = " ".join(section("6.").split())
    assert "decode-only" in scope and "fewer than 8 KV heads" in scope and "#196861" in scope


def test_the_guide_knows_torch_2_12_to_2_15_and_torchaudio_with_them():
    flat = " ".join(section("2.").split())
    for words in (
        "`pip install torch==2.12.0` or `2.13.0`",
        "nvidia-cudnn-cu13 9.20.0.48 (both wheels pin it",
        "`pip install torch==2.14.0`",
        "nvidia-cudnn-cu13 9.24.0.43 (pinned in the wheels' PyPI metadata",
        "`pip install torch==2.15.0` (PyPI; the `cu132` image) | nvidia-cudnn-cu13 9.26.0.51",
        "from 2.12 on there is no cu128 build",
        "The NaN risk of section 6 follows the cuDNN that is loaded, not the torch version",
        "2.11.1 declares `torch>=2.11`",
        "of the same CUDA major version as torch",
    ):
        assert words in flat, words
    scope = " ".join(section("6.").split())
    assert "fixed in the cuDNN library from 9.26" in scope and "the risk follows the loaded cuDNN" in scope


# --- what a mutation run (docs/testing.md) found unchecked ---------------------------------------


def test_backend_and_cudnn_names():
    assert sdpa.backend_name(None) == "unknown"
    assert sdpa.backend_name(3) == "cudnn"
    assert sdpa.backend_name(7) == "backend 7"  # a code newer than this table
    assert sdpa.cudnn_name(None) == "unknown"
    assert sdpa.cudnn_name(91501) == "9.15.1"
    assert sdpa.cudnn_name(90000) == "9.0.0"
    assert sdpa.cudnn_name(100200) == "10.2.0"


@pytest.mark.parametrize(
    "raw, words",
    [
        (None, "unset: torch's default order"),
        ("1", "cuDNN attention is not moved to the front"),
        ("0", "prefer cuDNN attention"),
        ("yes", "torch ignores 'yes'"),
    ],
)
def test_the_setting_keeps_the_raw_value_and_says_what_it_means(raw, words):
    env = sdpa.interpret_deprioritized(raw)
    assert env.raw == raw and words in env.meaning


def test_env_meaning_under_torch_2_9_is_that_it_is_not_read():
    one = sdpa.interpret_deprioritized("1")
    assert "not read by torch 2.9" in sdpa.setting_meaning("2.9.1+cu128", one)
    assert "TORCH_CUDNN_SDPA_PREFERRED=0" in sdpa.setting_meaning("2.9.1+cu128", one)
    assert sdpa.setting_meaning("2.11.0+cu130", one) == one.meaning
    assert sdpa.setting_meaning(None, one) == one.meaning


def test_torch_2_9_ignores_the_variable_so_the_nan_risk_stays():
    one = sdpa.interpret_deprioritized("1")
    assert sdpa.nan_risk("2.9.0+cu130", one, CUDNN_9_19) == sdpa.NAN_RISK_TEXT
    assert sdpa.nan_risk("2.11.0+cu130", one, CUDNN_9_19) is None
    v = _exposure([H100], raw="1", torch="2.9.0+cu130", order=[3, 1, 2, 0, 4])
    assert v.level == "exposed" and v.risk == sdpa.NAN_RISK_TEXT


def test_reason_not_first_under_torch_2_9():
    unset = sdpa.interpret_deprioritized(None)
    # An affected GPU: what rules cuDNN out is the build (or the 2.9 opt-out), not the GPU.
    on_h100 = sdpa.reason_not_first("2.9.1+cu128", CUDNN_9_19, [H100], unset)
    assert "compiled against cuDNN older than 9.9" in on_h100 and "only" not in on_h100
    assert sdpa.reason_not_first("2.9.1", CUDNN_9_19, [B300, RTX5090], unset).endswith("not sm_103/sm_120")


def test_verdict_reasons_name_what_decided():
    assert "no GPU visible" in _exposure([]).reason
    assert "cuDNN is first in the live SDPA order" in _exposure([H100], order=[3, 1, 2, 0, 4]).reason
    assert "(flash is)" in _exposure([H100], order=[1, 3, 2, 0, 4]).reason
    assert "by torch's rule cuDNN is not first on these GPUs" in _exposure([A100]).reason
    both = _exposure([H100, B200, H100])
    assert "cuDNN goes first on sm_100, sm_90:" in both.reason
    unknown = _exposure([H100, B200], cudnn=None)
    assert "possibly affected on sm_100, sm_90:" in unknown.reason
    assert unknown.risk == sdpa.NAN_RISK_TEXT  # an unknown cuDNN may be an affected one


def test_verdict_passes_the_2_9_facts_to_the_rule():
    def v29(**facts):
        return sdpa.exposure(
            gpus=[H100],
            torch_version="2.9.0+cu130",
            cudnn_version=None,
            setting=sdpa.interpret_deprioritized(None),
            live_order=None,
            padded_choice=None,
            **facts,
        )

    assert v29().level == "unknown"
    assert v29(cudnn_compiled=91300).level == "exposed"
    assert v29(cudnn_compiled=91300, preferred_raw="0").level == "ok"


@pytest.mark.parametrize(
    ("version", "want"),
    [
        ("2.11.0+cu130", (2, 11)),
        ("2.9.1", (2, 9)),
        ("2", (2, 0)),
        (" 2.10 ", (2, 10)),
        ("nightly", None),
        ("", None),
        (None, None),
    ],
)
def test_torch_release_reads_major_and_minor_as_pep_440_does(version, want):
    """The rule's own reading of torch's version (it imports nothing of ftenv): a missing minor is 0,
    an unreadable version is None (the rule then says unknown)."""
    assert sdpa.torch_release(version) == want


def test_the_fix_under_torch_2_9_says_why_its_own_variable_is_not_the_one():
    for raw in (None, "1", "0"):
        text = sdpa.fix_text("2.9.1+cu128", sdpa.interpret_deprioritized(raw))
        assert text == (
            f"set {sdpa.FIX_2_9} before the process starts "
            f"({variables.SDPA_DEPRIORITIZED} is not read by torch 2.9)"
        )
