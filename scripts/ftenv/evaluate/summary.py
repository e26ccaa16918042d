"""The eval's summary: one row per model, best first, each against the base model's row, under the
normalization line that says how the text was scored. Printed, and written as summary.md (people)
and summary.json (`ftenv export --eval` and other programs)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ftenv import text
from ftenv.data.normalize import Normalization
from ftenv.data.writes import written_whole
from ftenv.evaluate.score import SetScore, named
from ftenv.model.folder import ModelLoadError

SUMMARY_MD = "summary.md"
SUMMARY_JSON = "summary.json"
#: summary.md's columns: the label, then the numbers (aligned right), then the model's path.
COLUMNS = (
    "model", "error rate %", "vs base (points)", "sub", "del", "ins", "reference tokens", "utterances",
    "hours", "decode s", "RTF", "path",
)  # fmt: skip
#: The key of summary.json's rows, one per model, best first (written by to_json, read by read_summary).
ROWS = "models"
#: What the error rate counts, said once for the table and the JSON.
METRIC = "mixed error rate: (S + D + I) / reference tokens; a token is a CJK character or a Latin-script word"


@dataclass(frozen=True)
class ModelRow:
    """One model's line; hours and decode time are None where not measured (scoring files made
    elsewhere)."""

    label: str
    path: str
    error_rate: float | None  # a fraction; None: no reference token
    substitutions: int
    deletions: int
    insertions: int
    reference_tokens: int
    utterances: int
    hours: float | None = None
    decode_seconds: float | None = None
    base: bool = False
    missing: tuple[str, ...] = ()  # reference keys without a hypothesis, scored as deletions
    empty_references: tuple[str, ...] = ()

    @property
    def real_time_factor(self) -> float | None:
        """Decode time over audio time (below 1: faster than real time)."""
        if self.decode_seconds is None or not self.hours:
            return None
        return self.decode_seconds / (self.hours * 3600)

    @classmethod
    def from_score(
        cls,
        label: str,
        path: str,
        score: SetScore,
        *,
        hours: float | None = None,
        decode_seconds: float | None = None,
        base: bool = False,
    ) -> ModelRow:
        return cls(
            label=label,
            path=path,
            error_rate=score.error_rate,
            substitutions=score.substitutions,
            deletions=score.deletions,
            insertions=score.insertions,
            reference_tokens=score.tokens,
            utterances=len(score.utterances),
            hours=hours,
            decode_seconds=decode_seconds,
            base=base,
            missing=score.missing,
            empty_references=score.empty_references,
        )


def ranked(rows: Sequence[ModelRow]) -> list[ModelRow]:
    """Best (lowest error rate) first; a row without an error rate last; ties keep their order.
    More than one base row is a bug of the caller: ValueError."""
    if sum(row.base for row in rows) > 1:
        raise ValueError(f"more than one base row: {', '.join(r.label for r in rows if r.base)}")
    return sorted(rows, key=lambda row: (row.error_rate is None, row.error_rate or 0.0))


def _percent(rate: float | None) -> str:
    return text.number(None if rate is None else rate * 100, 2, missing="n/a")


def _versus_base(row: ModelRow, base: ModelRow | None) -> str:
    """The change against the base row in percentage points (negative: better)."""
    if base is None:
        return ""
    if row is base:
        return "base"
    if row.error_rate is None or base.error_rate is None:
        return "n/a"
    return f"{(row.error_rate - base.error_rate) * 100:+.2f}"


def render_markdown(rows: Sequence[ModelRow], rules: Normalization) -> str:
    """The table as Markdown: the normalization and the metric above it, notes on keys below it."""
    order = ranked(rows)
    base = next((row for row in order if row.base), None)
    lines = [
        rules.describe(),
        "",
        f"Metric: {METRIC}.",
        "",
    ]
    cells = []
    for row in order:
        label = f"{row.label} (base)" if row.base else row.label
        cells.append((
            label,
            _percent(row.error_rate),
            _versus_base(row, base),
            row.substitutions,
            row.deletions,
            row.insertions,
            row.reference_tokens,
            row.utterances,
            text.number(row.hours, 3),
            text.number(row.decode_seconds, 1),
            text.number(row.real_time_factor, 4),
            f"`{row.path}`",
        ))  # fmt: skip
    lines += text.markdown_table(COLUMNS, cells, right=range(1, len(COLUMNS) - 1))
    for row in order:
        if row.missing:
            lines.append(
                f"\n{row.label}: {len(row.missing)} reference keys without a hypothesis, scored as "
                f"deletions: {named(row.missing)}"
            )
        if row.empty_references:
            lines.append(
                f"\n{row.label}: {len(row.empty_references)} references empty after normalization (their "
                f"insertions count, their tokens are 0): {named(row.empty_references)}"
            )
        if row.error_rate is None:
            lines.append(f"\n{row.label}: no reference token after normalization: no error rate")
    return "\n".join(lines) + "\n"


def to_json(rows: Sequence[ModelRow], rules: Normalization) -> dict:
    """The same content for programs: models best first, error rates as fractions."""
    return {
        "normalization": {
            "name": rules.name,
            "description": rules.describe(),
            "fold_width": rules.fold_width,
            "join_cjk": rules.join_cjk,
            "remove_punctuation": rules.remove_punctuation,
            "lowercase": rules.lowercase,
        },
        "metric": METRIC,
        "base": next((row.label for row in rows if row.base), None),
        ROWS: [
            {
                "label": row.label,
                "path": row.path,
                "base": row.base,
                "error_rate": row.error_rate,
                "substitutions": row.substitutions,
                "deletions": row.deletions,
                "insertions": row.insertions,
                "reference_tokens": row.reference_tokens,
                "utterances": row.utterances,
                "hours": row.hours,
                "decode_seconds": row.decode_seconds,
                "real_time_factor": row.real_time_factor,
                "missing_hypotheses": list(row.missing),
                "empty_references": list(row.empty_references),
            }
            for row in ranked(rows)
        ],
    }


def write_summary(folder: Path, rows: Sequence[ModelRow], rules: Normalization) -> tuple[Path, Path]:
    """summary.md and summary.json in `folder`, each never half a file."""
    written = []
    for name, content in (
        (SUMMARY_MD, render_markdown(rows, rules)),
        (SUMMARY_JSON, json.dumps(to_json(rows, rules), indent=2, ensure_ascii=False) + "\n"),
    ):
        with written_whole(folder / name) as fh:
            fh.write(content)
        written.append(folder / name)
    return written[0], written[1]


def read_summary(eval_dir: Path) -> dict:
    """summary.json of an `ftenv eval --out` folder, as to_json wrote it, as {"rows": [...],
    "normalization": its description or None, "source": the file}, for `ftenv export --eval`'s model
    card; a missing or malformed file is refused with its path (the card never shows a half table)."""
    path = Path(eval_dir) / SUMMARY_JSON
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelLoadError(
            f"{path}: not found; --eval names the --out folder of an `ftenv eval` run"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(
            f"{path}: not readable JSON ({type(exc).__name__}); run `ftenv eval` again"
        ) from None
    rows = data.get(ROWS) if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise ModelLoadError(
            f"{path}: holds no table (a list of rows under {ROWS!r}, one per model); run `ftenv eval` again"
        )
    rules = data.get("normalization")
    description = rules.get("description") if isinstance(rules, dict) else None
    normalization = description if isinstance(description, str) else None
    return {"rows": rows, "normalization": normalization, "source": str(path.resolve())}
