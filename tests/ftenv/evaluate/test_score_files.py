"""`ftenv eval score REF HYP` end to end: the printed summary with its normalization line, the files
of --out, keys that do not match (named; missing ones scored as deletions, extra ones refused), bad
files named with exit 2 and nothing written, and the exit codes as a user's shell sees them."""

from __future__ import annotations

import json

import pytest

from ftenv import cli
from ftenv.data.normalize import RAW, SCORING
from ftenv.outcome import UNUSABLE
from support import run_ftenv

# A byte-order mark, CRLF endings, tab and space separators: all as editors and scripts write them.
REFERENCE = "\ufeffu1\t今 天 天 气 很 好，OK！\r\nu2 Hello, World!\r\nu3\t我们用 ＰｙＴｏｒｃｈ 训练\r\n\r\n"
HYPOTHESIS = "u1 今天天汽好 ok\nu3\t我们用pytorch训练\n"


def _files(tmp_path, reference: str = REFERENCE, hypothesis: str = HYPOTHESIS):
    ref, hyp = tmp_path / "ref.txt", tmp_path / "hyp.txt"
    ref.write_text(reference, encoding="utf-8", newline="")
    hyp.write_text(hypothesis, encoding="utf-8", newline="")
    return ref, hyp


def _eval(capsys, *args) -> tuple[int, str, str]:
    code = cli.main(["eval", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_scores_and_writes(tmp_path, capsys):
    ref, hyp = _files(tmp_path)
    out_dir = tmp_path / "out"
    code, out, err = _eval(capsys, "score", ref, hyp, "--out", out_dir)
    assert code == 0, err
    assert out.splitlines()[0] == SCORING.describe()
    # u1: 1 sub + 1 del of 7; u2: 2 deletions (no hypothesis); u3: 0 of 6 -> 4 of 15.
    assert "| hyp.txt | 26.67 |  | 1 | 3 | 0 | 15 | 3 |" in out
    assert "1 reference keys without a hypothesis, scored as deletions: u2" in out
    written = sorted(p.name for p in out_dir.iterdir())
    assert written == ["hyp.txt.utterances.tsv", "summary.json", "summary.md"]
    assert (out_dir / "summary.md").read_text(encoding="utf-8") in out
    model = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))["models"][0]
    assert (model["error_rate"], model["missing_hypotheses"]) == (pytest.approx(4 / 15), ["u2"])
    table = (out_dir / "hyp.txt.utterances.tsv").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[0] for line in table] == ["key", "u1", "u2", "u3"]


def test_raw_and_named_normalization(tmp_path, capsys):
    ref, hyp = _files(tmp_path)
    code, out, _ = _eval(capsys, "score", ref, hyp, "--raw")
    assert code == 0 and out.splitlines()[0] == RAW.describe()
    # Raw: u1 2 sub + 1 del of 7; u2 "Hello," "World!" deleted; u3 "ＰｙＴｏｒｃｈ"/"pytorch" 1 sub of 6.
    assert "| hyp.txt | 40.00 |  | 3 | 3 | 0 | 15 | 3 |" in out
    code, out, _ = _eval(capsys, "score", ref, hyp, "--normalize", "prepare")
    assert code == 0 and out.startswith("normalization prepare:")


def test_extra_keys_are_refused_by_name(tmp_path, capsys):
    extra = "".join(f"x{i}\tstray\n" for i in range(7))
    ref, hyp = _files(tmp_path, hypothesis=HYPOTHESIS + extra)
    out_dir = tmp_path / "out"
    code, out, err = _eval(capsys, "score", ref, hyp, "--out", out_dir)
    assert code == UNUSABLE and out == ""
    assert f"7 keys of {hyp} are not in {ref}: x0, x1, x2, x3, x4 and 2 more" in err
    assert not out_dir.exists()


@pytest.mark.parametrize(
    ("reference", "hypothesis", "message"),
    [
        ("u1\t好\n", "u1\t好\nu1\t坏\n", "hyp.txt: line 2: key 'u1' repeated (first on line 1)"),
        ("u1\t好\n", "\n\n", "hyp.txt: no transcript in the file"),
        ("u1\t好\n", "u2\t好\n", "no key of"),
        ("u1\t。\nu2\n", "u1\t好\nu2\t\n", "every reference of"),
    ],
)
def test_unusable_pairs(tmp_path, capsys, reference, hypothesis, message):
    ref, hyp = _files(tmp_path, reference, hypothesis)
    code, out, err = _eval(capsys, "score", ref, hyp, "--out", tmp_path / "out")
    assert (code, out) == (UNUSABLE, "")
    assert message in err
    assert not (tmp_path / "out").exists()


def test_a_file_that_is_not_utf8_or_missing_is_named(tmp_path, capsys):
    ref, hyp = _files(tmp_path)
    hyp.write_bytes(b"u1\t\xe4\xbb\x8a\nu3\t\xff\xfe\n")
    code, _, err = _eval(capsys, "score", ref, hyp)
    assert code == UNUSABLE and f"{hyp}: line 2 is not UTF-8" in err
    code, _, err = _eval(capsys, "score", ref, tmp_path / "absent.txt")
    assert code == UNUSABLE and f"{tmp_path / 'absent.txt'}: cannot read" in err


def test_the_command_as_a_shell_runs_it(tmp_path):
    ref, hyp = _files(tmp_path)
    done = run_ftenv("eval", "score", str(ref), str(hyp))
    assert done.returncode == 0 and "| hyp.txt | 26.67 |" in done.stdout, done.stderr
    done = run_ftenv("eval", "score", str(ref), str(hyp), "--raw", "--normalize", "raw")
    assert done.returncode == UNUSABLE and "not allowed with argument" in done.stderr
    # Any other first word is the models path, with its own options: --out is required there, exit 2.
    done = run_ftenv("eval", str(tmp_path / "test.jsonl"), "model")
    assert done.returncode == UNUSABLE and "required: --out" in done.stderr
