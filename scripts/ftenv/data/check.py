"""`ftenv data check`: every manifest line checked as the trainer will read it, then what FunASR's
length rules do to the whole set with this run's settings, so that bad data stops a run before
the GPUs start, not after an epoch.

Long because the set-level verdicts (an emptied set, the share that never trains) are drawn from
the per-file summaries this module builds.
"""

from __future__ import annotations

import functools
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ftenv.data import chatml, workers, writes
from ftenv.data import lines as L
from ftenv.data.rules import OVER_TOKEN_LIMIT, LengthRules
from ftenv.watchdog import data_loss

TRAIN, VALID = "train", "valid"
PROG = "ftenv data check"
REPORT_NAME = "data-check.json"
#: Findings kept per code in the report (the counts stay exact) and shown per code on the terminal.
KEEP_PER_CODE = 1000
SHOW_PER_CODE = 5
# Set-level findings and warnings (line-level codes are in ftenv.data.chatml and ftenv.data.lines).
DUPLICATE, DROPPED, OVER_BUDGET, EMPTIED, UNREADABLE, NEVER_TRAINED = (
    "duplicate_audio",
    "dropped_by_length_rules",
    "over_batch_budget",
    "set_emptied_or_crashes",
    "file_unreadable",
    "too_many_never_trained",
)
ERRORS = {
    chatml.NOT_UTF8, chatml.NOT_JSON, chatml.SHAPE, L.AUDIO, L.EMPTY_TEXT, L.LENGTH_MISMATCH, EMPTIED,
    UNREADABLE, NEVER_TRAINED,
}  # fmt: skip


@dataclass
class Finding:
    file: str
    line: int | None  # None: about the whole file
    code: str
    message: str

    @property
    def severity(self) -> str:
        return "error" if self.code in ERRORS else "warning"

    def text(self) -> str:
        where = f"{self.file} line {self.line}" if self.line else self.file
        return f"{self.severity}: {where}: {self.message}"


@dataclass
class FileSummary:
    path: str
    kind: str
    lines: int = 0
    utterances: int = 0  # lines FunASR indexes
    trained: int = 0  # of those, not skipped by the sampler
    seconds: float = 0.0
    dropped: Counter = field(default_factory=Counter)
    over_budget: int = 0
    longest: int = 0  # the largest speech_length + text_length declared
    unreadable_lines: int = 0  # blank or not JSON: FunASR's index skips them ("json error")


@dataclass
class Report:
    rules: LengthRules
    files: list[FileSummary] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)

    def add(self, finding: Finding) -> None:
        self.counts[finding.code] += 1
        if self.counts[finding.code] <= KEEP_PER_CODE:
            self.findings.append(finding)

    @property
    def errors(self) -> int:
        return sum(n for code, n in self.counts.items() if code in ERRORS)

    @property
    def warnings(self) -> int:
        return sum(n for code, n in self.counts.items() if code not in ERRORS)

    def to_dict(self) -> dict:
        return {
            "verdict": "errors" if self.errors else "ok",
            "errors": self.errors,
            "warnings": self.warnings,
            "settings": self.rules.to_dict(),
            "files": [
                {**vars(f), "dropped": dict(sorted(f.dropped.items())), "seconds": round(f.seconds, 2)}
                for f in self.files
            ],
            "counts": dict(sorted(self.counts.items())),
            "never_trained_limit": data_loss.MAX_LOSS_SHARE,
            "findings": [{**vars(f), "severity": f.severity} for f in self.findings],
            "findings_kept_per_code": KEEP_PER_CODE,
        }


def _results(path: Path, base: str, jobs: int, read_audio: bool):
    """Each line's LineResult in file order, its chunks checked by `jobs` worker processes."""
    work = functools.partial(L.check_chunk, base=base, read_audio=read_audio, manifest_dir=str(path.parent))
    for results in workers.ordered(work, L.chunks(path), jobs):
        yield from results


def check_file(report: Report, path: Path, kind: str, base: str, jobs: int, read_audio: bool, seen: dict):
    summary = FileSummary(str(path), kind)
    report.files.append(summary)
    rules, name = report.rules, str(path)
    try:
        results = _results(path, base, jobs, read_audio)  # relative paths: ftenv.data.paths
        indexed: list[int] = []  # speech_length + text_length of what FunASR indexes, in file order
        for r in results:
            summary.lines += 1
            if r.blank or (r.problem and r.problem[0] == chatml.NOT_JSON):
                summary.unreadable_lines += 1
            if r.blank:
                report.add(Finding(name, r.number, chatml.BLANK, chatml.BLANK_MESSAGE))
                continue
            if r.problem:
                report.add(Finding(name, r.number, *r.problem))
            if r.text_problem:
                report.add(Finding(name, r.number, *r.text_problem))
            if r.speech_length is None:
                continue
            if r.seconds is not None:
                summary.seconds += r.seconds
            if r.audio is not None:
                first = seen.setdefault(r.audio, (name, r.number))
                if first != (name, r.number):
                    report.add(
                        Finding(
                            name,
                            r.number,
                            DUPLICATE,
                            f"the same audio as {first[0]} line {first[1]}: trained twice as often "
                            "(or a validation line also in training)",
                        )
                    )
            summary.longest = max(summary.longest, r.speech_length + r.text_length)
            why = rules.dropped(r.speech_length, r.text_length)
            from_index = why is not None and why != OVER_TOKEN_LIMIT
            if not from_index:
                indexed.append(r.speech_length + r.text_length)
            if why is not None:
                summary.dropped[why] += 1
                report.add(
                    Finding(name, r.number, DROPPED, rules.explain(why, r.speech_length, r.text_length))
                )
                continue
            summary.trained += 1
            if rules.over_budget(r.speech_length + r.text_length):
                summary.over_budget += 1
                report.add(
                    Finding(
                        name,
                        r.number,
                        OVER_BUDGET,
                        f"speech_length + text_length = {r.speech_length + r.text_length} exceeds the batch "
                        f"budget (dataset_conf.batch_size={rules.batch_size}): FunASR puts it alone in a "
                        "batch beyond the budget",
                    )
                )
        summary.utterances = len(indexed)
    except OSError as exc:
        report.add(Finding(name, None, UNREADABLE, f"cannot read it: {exc.strerror or exc}"))
        return
    _judge_set(report, summary, indexed)


def _judge_set(report: Report, summary: FileSummary, indexed: list[int]) -> None:
    """Set-level errors: nothing left to train or validate on, or a batch the collator dies on."""
    rules, name = report.rules, summary.path
    if summary.lines and not summary.trained:
        report.add(
            Finding(
                name,
                None,
                EMPTIED,
                f"FunASR would keep none of its {summary.lines} lines ({rules.describe()}): the "
                f"{'training' if summary.kind == TRAIN else 'validation'} set is empty",
            )
        )
        return
    if summary.kind == VALID:
        empty = rules.empty_batches(indexed)
        if empty:
            report.add(
                Finding(
                    name,
                    None,
                    EMPTIED,
                    f"every validation utterance of {empty} sampler buffer(s) is longer than the batch "
                    f"budget (dataset_conf.batch_size={rules.batch_size}): FunASR's sampler makes an empty "
                    "batch and its collator dies (KeyError: 'input_ids') at the first validation, after a "
                    "whole epoch of training and before its checkpoint; raise ++dataset_conf.batch_size "
                    "above the longest speech_length + text_length or cut the utterances",
                )
            )
    elif summary.trained and summary.over_budget == summary.trained:
        report.add(
            Finding(
                name,
                None,
                EMPTIED,
                f"every training utterance is longer than the batch budget (dataset_conf.batch_size="
                f"{rules.batch_size}): FunASR's sampler makes an empty batch and its collator dies "
                "(KeyError: 'input_ids'); raise ++dataset_conf.batch_size",
            )
        )


def check(
    files: list[tuple[Path, str]],
    rules: LengthRules,
    base: Path,
    jobs: int | None = None,
    read_audio: bool = True,
    tokenizer=None,
) -> Report:
    """Check each (path, TRAIN | VALID); duplicates are looked for across all of them; with the
    model's tokenizer, each text_length against the transcript."""
    report = Report(rules)
    seen: dict[str, tuple[str, int]] = {}
    L.TOKENIZER = tokenizer  # before the workers fork (ftenv.data.lines)
    try:
        for path, kind in files:
            check_file(report, path, kind, str(base), jobs or workers.default_jobs(), read_audio, seen)
    finally:
        L.TOKENIZER = None
    _judge_nothing_to_train(report)
    _judge_never_trained(report)
    return report


def _judge_nothing_to_train(report: Report) -> None:
    """A training side (or a validation side) with no line FunASR would use, empty files included:
    a run on it trains on nothing. Per-file emptied sets are named by _judge_set."""
    for kind, what, verb in ((TRAIN, "training", "train"), (VALID, "validation", "validate")):
        files = [f for f in report.files if f.kind == kind]
        if files and not any(f.lines for f in files):
            names = ", ".join(f.path for f in files)
            report.add(
                Finding(
                    names, None, EMPTIED, f"no line in the {what} data: nothing to {verb} on (empty files)"
                )
            )


def _judge_never_trained(report: Report) -> None:
    """The watchdog's rule (ftenv.watchdog.data_loss) applied before the run: a training set of which
    more than the limit never trains under FunASR's length rules fails at its end; refuse it now."""
    train = [f for f in report.files if f.kind == TRAIN]
    lines = sum(f.lines for f in train)
    never = sum(sum(f.dropped.values()) + f.unreadable_lines for f in train)
    share = data_loss.never_trained_share(never, lines)
    if not data_loss.too_many_never_trained(share) or any(f.lines and not f.trained for f in train):
        return  # within the limit, or already an emptied set
    rules, dropped = report.rules, sum((f.dropped for f in train), Counter())
    per_rule = ", ".join(f"{rule} {n}" for rule, n in sorted(dropped.items())) or "none"
    name = train[0].path if len(train) == 1 else f"the training set ({len(train)} files)"
    report.add(
        Finding(
            name,
            None,
            NEVER_TRAINED,
            f"{never} of {lines} training lines ({share:.1%}) never train under FunASR's length rules "
            f"with this run's settings (per rule: {per_rule}; blank or not JSON: "
            f"{never - sum(dropped.values())}): more than the {data_loss.MAX_LOSS_SHARE:.0%} the "
            "watchdog allows, so the run would fail at its end, after all its GPU time; raise "
            f"++dataset_conf.max_token_length (now {rules.max_token_length}; the longest line needs "
            f"{max(f.longest for f in train)}) or split the long utterances (a Kaldi `segments` file "
            "and `ftenv data prepare` cut them)",
        )
    )


def summary_lines(report: Report, report_path: Path | None) -> list[str]:
    """What the terminal shows: per file, the first findings of each kind, the totals."""
    out = []
    for f in report.files:
        hours = f.seconds / 3600
        dropped = sum(f.dropped.values())
        out.append(
            f"{f.kind} {f.path}: {f.lines} lines, {f.trained} trained ({hours:.2f} h of audio read), "
            f"{dropped} dropped by FunASR's length rules, {f.over_budget} over the batch budget"
        )
    shown: Counter = Counter()
    for finding in sorted(report.findings, key=lambda x: x.severity != "error"):
        shown[finding.code] += 1
        if shown[finding.code] <= SHOW_PER_CODE:
            out.append(finding.text())
    for code, n in sorted(report.counts.items()):
        if n > SHOW_PER_CODE:
            out.append(f"  ... {n - SHOW_PER_CODE} more {code} (all counted in the report)")
    where = f"; report: {report_path}" if report_path else ""
    verdict = "UNUSABLE" if report.errors else "OK"
    out.append(f"{verdict}: {report.errors} error(s), {report.warnings} warning(s){where}")
    return out


def write_report(report: Report, path: Path, extra: dict | None = None) -> None:
    body = {**report.to_dict(), **(extra or {})}
    writes.write_text(path, json.dumps(body, ensure_ascii=False, indent=1) + "\n")


def check_and_report(
    train: list[Path],
    valid: list[Path],
    rules: LengthRules,
    base: Path,
    report_path: Path | None,
    jobs: int | None = None,
    prog: str = PROG,
    read_audio: bool = True,
    stamp: dict | None = None,
    tokenizer=None,
) -> tuple[bool, Report]:
    """Check, print the summary, write the report; (usable, report)."""
    missing = [p for p in (*train, *valid) if not p.is_file()]
    if missing:
        for p in missing:
            print(f"{prog}: {p} is not a file", file=sys.stderr)
        return False, Report(rules)
    files = [(p, TRAIN) for p in train] + [(p, VALID) for p in valid]
    report = check(files, rules, base, jobs, read_audio, tokenizer)
    written = None
    if report_path is not None:
        try:
            write_report(report, report_path, stamp if not report.errors else None)
            written = report_path
        except OSError as exc:
            print(f"{prog}: cannot write the report {report_path}: {exc.strerror or exc}", file=sys.stderr)
    for line in summary_lines(report, written):
        print(f"{prog}: {line}", file=sys.stderr)
    return not report.errors, report
