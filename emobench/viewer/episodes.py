"""A run's episodes as typed view rows for the transcript viewer and the run report.

Reads manifest.json, episodes.jsonl, judgements.jsonl and scores.parquet of a run, or of one of
its rescores in RUN/panels/<P>/ (docs/method.md §7). A rescore's per-turn verdicts replace the
episode's own and the EPM trajectory is replayed from them, as its scores were. Everything
optional (scores, judgements, a probe, a director, a case card) may be absent: an imported run
or an interrupted one still shows, with "–" where a value is missing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from emobench.errors import InputError
from emobench.records import AuditFlag, Axis, Episode, EpisodeJudgement, HolisticVerdict, ProbeAnswer, Turn, TurnJudgement
from emobench.registry import Case
from emobench.rundir import RunDir
from emobench.scoring.replay import rejudged

AXES: tuple[Axis, ...] = ("C", "A", "P")
SORT_KEYS = ("key", "case", "subject", "seed", "epmq", "meter", "turns")
_SCORE_FIELDS = ("epmq", "success", "final_meter", "empathy", "audit_flags")

CardLookup = Callable[[str], Case | None]
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class JudgeLevels:
    """One judge's MDEP levels for one turn; per axis (C, A, P) in AXES order."""

    judge: str
    valid: bool
    progress: tuple[int, ...] | None
    regression: tuple[int, ...] | None
    evidence: tuple[str, ...]  # "quote — reason" per axis, "" when the judge gave none
    error: str | None


@dataclass(frozen=True)
class TurnView:
    index: int
    user: str
    inner: str
    meter_delta: int
    reply: str
    director: str | None  # "reveal_stage 0: guidance"; None when no director acted
    meter: float
    progress: tuple[int | None, ...]  # the panel's median level per axis; None when invalid
    regression: tuple[int | None, ...]
    judges: tuple[JudgeLevels, ...]
    delta_e: float | None
    energy: float | None
    p: tuple[float, float, float] | None


@dataclass(frozen=True)
class EpisodeRow:
    """One line of the episode list."""

    key: str
    subject: str
    case_id: str
    seed: int
    stop_reason: str
    status: str | None
    n_turns: int
    epmq: float | None
    success: bool | None
    final_meter: float | None
    empathy: float | None
    audit: tuple[str, ...]  # flag kinds


@dataclass(frozen=True)
class ProbeLine:
    item: str  # "dominant need", "threshold", "big five: <trait>"
    answer: str
    truth: str
    correct: bool | None


@dataclass(frozen=True)
class EpisodeView:
    row: EpisodeRow
    scenario_id: str
    persona_id: str
    p0: tuple[float, float, float]
    success_turn: int | None
    turns: tuple[TurnView, ...]
    last_user: str | None
    holistic: tuple[HolisticVerdict, ...]
    probe: tuple[ProbeLine, ...]
    probe_rationale: str
    audit: tuple[AuditFlag, ...]


@dataclass
class RunView:
    path: Path  # where the judgements and scores shown were read: the run, or its panel folder
    run_id: str
    panel: str | None
    manifest: dict[str, Any]
    report: dict[str, Any]
    rows: list[EpisodeRow]
    _episodes: dict[str, Episode] = field(repr=False)
    _judgements: dict[str, EpisodeJudgement] = field(repr=False)
    _card: CardLookup = field(repr=False)
    _row_index: dict[str, EpisodeRow] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._row_index = {r.key: r for r in self.rows}

    @property
    def subjects(self) -> list[str]:
        return sorted({r.subject for r in self.rows})

    def episode(self, key: str) -> EpisodeView:
        if key not in self._episodes:
            raise InputError("--episode", "key", f"no episode {key!r} in {self.run_id}")
        episode = self._episodes[key]
        return _view(episode, self._row_index[key], self._judgements.get(key), self._card(episode.case_id))


def open_run(run_dir: Path, panel: str | None = None, card: CardLookup | None = None) -> RunView:
    """Read a run (or its rescore by `panel`) into view rows; episodes are expanded on demand."""
    source = RunDir(run_dir)
    manifest = source.read_manifest()
    shown = source
    if panel is not None:
        shown = RunDir(run_dir / "panels" / panel)
        if not shown.manifest.exists():
            have = sorted(p.name for p in (run_dir / "panels").glob("*") if (p / "manifest.json").exists())
            raise InputError(run_dir / "panels", panel, f"no such rescore; the run has {have or 'none'}")
        manifest = shown.read_manifest()
    if not source.episodes.exists():
        raise InputError(source.episodes, "", "file not found")
    min_turns = int(manifest.get("config", {}).get("min_turns", 12))
    judgements = {j.key: j for j in _records(shown.judgements, EpisodeJudgement)}
    episodes: dict[str, Episode] = {}
    for ep in _records(source.episodes, Episode):
        judgement = judgements.get(ep.key)
        if judgement is not None and judgement.mdep is not None:
            try:
                ep = rejudged(ep, judgement.mdep, min_turns)
            except ValueError as exc:
                raise InputError(shown.judgements, ep.key, str(exc)) from None
        episodes[ep.key] = ep
    scores = _scores(shown.scores)
    rows = [_row(ep, scores.get((ep.subject, ep.case_id, ep.seed), {}), judgements.get(ep.key))
            for ep in episodes.values()]
    return RunView(
        path=shown.path,
        run_id=str(manifest.get("run_id", run_dir.name)),
        panel=panel,
        manifest=manifest,
        report=shown.read_report(),
        rows=rows,
        _episodes=episodes,
        _judgements=judgements,
        _card=card or (lambda _: None),
    )


def flag_summary(kinds: Sequence[str]) -> str:
    """Audit flag kinds with their counts, e.g. "out_of_character, premature_leave ×3"."""
    counts = Counter(kinds)
    return ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in sorted(counts.items()))


def select(
    rows: Sequence[EpisodeRow],
    *,
    case: str | None = None,
    subject: str | None = None,
    seed: int | None = None,
    failed: bool = False,
    sort: str = "key",
) -> list[EpisodeRow]:
    """Filter and sort the episode list; numeric sorts put the best first and blanks last."""
    if sort not in SORT_KEYS:
        raise InputError("--sort", "sort", f"{sort!r}; expected one of {', '.join(SORT_KEYS)}")
    out = [
        r for r in rows
        if (case is None or r.case_id == case) and (subject is None or r.subject == subject)
        and (seed is None or r.seed == seed) and (not failed or r.success is not True)
    ]
    text: dict[str, Callable[[EpisodeRow], Any]] = {
        "key": lambda r: (r.case_id, r.seed, r.subject),
        "case": lambda r: (r.case_id, r.seed, r.subject),
        "subject": lambda r: (r.subject, r.case_id, r.seed),
        "seed": lambda r: (r.seed, r.case_id, r.subject),
    }
    if sort in text:
        return sorted(out, key=text[sort])
    number = {"epmq": lambda r: r.epmq, "meter": lambda r: r.final_meter, "turns": lambda r: float(r.n_turns)}[sort]
    return sorted(out, key=lambda r: (number(r) is None, -(number(r) or 0.0), r.case_id, r.seed, r.subject))


def _records(path: Path, model: type[R]) -> list[R]:
    """A JSONL file of records without their model calls: the viewer shows none, they are most
    of a run's bytes, and they carry the endpoints. Fields this emobench does not know (a run
    written by a newer one) are ignored; a torn last line (a crash) is skipped."""
    records: list[R] = []
    if not path.exists():
        return records
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.endswith(b"\n"):
                continue
            try:
                data = orjson.loads(line)
                records.append(model.model_validate({**data, "calls": []}, extra="ignore"))
            except orjson.JSONDecodeError as exc:
                raise InputError(path, f"line {number}", f"corrupt JSON ({exc})") from None
            except ValidationError as exc:
                err = exc.errors()[0]
                raise InputError(path, f"line {number}: {'.'.join(str(p) for p in err['loc'])}", err["msg"]) from None
    return records


def _scores(path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    if not path.exists():
        return {}
    try:
        file = pq.ParquetFile(path)
        keep = ["subject", "case_id", "seed", *(c for c in _SCORE_FIELDS if c in file.schema_arrow.names)]
        rows = file.read(columns=keep).to_pylist()
    except Exception as exc:  # pyarrow raises several kinds for a damaged file
        raise InputError(path, "", f"unreadable parquet ({exc})") from None
    return {(r["subject"], r["case_id"], int(r["seed"])): r for r in rows}


def _row(ep: Episode, score: dict[str, Any], judgement: EpisodeJudgement | None) -> EpisodeRow:
    # Scoring decides success (null for an episode with no valid judgement); the episode's own
    # status stands in only for a run that was never scored.
    success = score["success"] if "success" in score else (ep.status == "success" if ep.status else None)
    return EpisodeRow(
        key=ep.key,
        subject=ep.subject,
        case_id=ep.case_id,
        seed=ep.seed,
        stop_reason=ep.stop_reason,
        status=ep.status,
        n_turns=len(ep.turns),
        epmq=score.get("epmq"),
        success=success,
        final_meter=score.get("final_meter", ep.final_meter),
        empathy=score.get("empathy"),
        audit=tuple(f.kind for f in judgement.audit) if judgement else (),
    )


def _levels(levels: dict[Axis, int], valid: bool) -> tuple[int | None, ...]:
    return tuple(levels.get(a) if valid else None for a in AXES)


def _turn_judges(judgement: TurnJudgement) -> tuple[JudgeLevels, ...]:
    out = []
    for v in judgement.verdicts:
        axes = v.axes or {}
        out.append(JudgeLevels(
            judge=v.judge,
            valid=v.valid and bool(axes),
            progress=tuple(axes[a].progress for a in AXES) if len(axes) == 3 else None,
            regression=tuple(axes[a].regression for a in AXES) if len(axes) == 3 else None,
            evidence=tuple(_evidence(axes[a].evidence, axes[a].reason) if a in axes else "" for a in AXES),
            error=v.error,
        ))
    return tuple(out)


def _evidence(quote: str, reason: str) -> str:
    return " — ".join(x for x in (f"“{quote}”" if quote else "", reason) if x)


def _director(turn: Turn) -> str | None:
    d = turn.director
    if d is None:
        return None
    text = d.action + (f" {d.target}" if d.target is not None else "")
    return f"{text}: {d.guidance}" if d.guidance else text


def _view(ep: Episode, row: EpisodeRow, judgement: EpisodeJudgement | None, card: Case | None) -> EpisodeView:
    turns = tuple(
        TurnView(
            index=t.index,
            user=t.user.message,
            inner=t.user.inner,
            meter_delta=t.user.meter_delta,
            reply=t.reply,
            director=_director(t),
            meter=t.meter,
            progress=_levels(t.judgement.progress, t.judgement.valid),
            regression=_levels(t.judgement.regression, t.judgement.valid),
            judges=_turn_judges(t.judgement),
            delta_e=t.epm.delta_e if t.epm else None,
            energy=t.epm.energy if t.epm else None,
            p=t.epm.p if t.epm else None,
        )
        for t in ep.turns
    )
    return EpisodeView(
        row=row,
        scenario_id=ep.scenario_id,
        persona_id=ep.persona_id,
        p0=ep.p0,
        success_turn=ep.success_turn,
        turns=turns,
        last_user=ep.last_user.message if ep.last_user else None,
        holistic=tuple(judgement.holistic) if judgement else (),
        probe=probe_lines(ep.probe, card),
        probe_rationale=ep.probe.rationale if ep.probe else "",
        audit=tuple(judgement.audit) if judgement else (),
    )


def probe_lines(answer: ProbeAnswer | None, card: Case | None) -> tuple[ProbeLine, ...]:
    """The probe's answers beside the hidden card; "–" for whichever side is missing."""
    persona = card.persona if card else None
    lines = [
        ("dominant need", answer.dominant_need if answer else None, persona.needs.dominant if persona else None),
        ("threshold", answer.threshold if answer else None, persona.threshold if persona else None),
    ]
    traits = list(answer.big_five) if answer else []
    lines += [(f"big five: {t}", answer.big_five[t] if answer else None,
               persona.big_five.get(t) if persona else None) for t in traits]  # type: ignore[call-overload]
    if answer is None and persona is None:
        return ()
    return tuple(
        ProbeLine(item, a or "–", str(truth) if truth else "–", None if a is None or truth is None else a == truth)
        for item, a, truth in lines
    )
