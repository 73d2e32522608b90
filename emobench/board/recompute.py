"""Recompute an episode from what its models said: every verdict from its judge's recorded
reply, every turn's levels from its verdicts, the EPM path and status from the levels, the meter
and the stop from the rules, and the score row from all of that.

A submitted number that does not follow from the recorded calls is a problem naming the record
and the field. What this cannot see: calls invented whole and kept consistent, which only
asking the models again would show.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from emobench.episode.roles import derive_seed
from emobench.episode.stepper import opening_move, visible_reply
from emobench.judging.holistic import parse_holistic
from emobench.judging.mdep import aggregate, parse_mdep
from emobench.profiles import load_profile
from emobench.records import Episode, EpisodeJudgement, EPMPoint, Limits, ModelCall, UserMove
from emobench.registry import Case
from emobench.scoring.episode_scores import score_episode
from emobench.scoring.replay import rejudged
from emobench.trackers.epm import FAILURES, EPMEngine

# The score columns a verifier recomputes: everything but the affect tracker's readings, which
# need its encoder (a deterministic function of the user's messages, checked by the runner's tests).
CHECKED_COLUMNS = (
    "subject", "case_id", "scenario_id", "persona_id", "seed", "split", "language", "category", "dominant_axis",
    "difficulty", "threshold", "valence", "trackers_absent", "p0_norm", "n_turns",
    "n_judged_turns", "n_invalid_judgements", "stop_reason", "success", "turns_to_success", "failure_type",
    "scoring_profile", "epmq", "epmq_empa", "outcome", "efficiency", "stability", "rdi", "etot", "snet", "rho",
    "sproj", "tau", "rpos", "align", "pen", "energy", "epm_path", "final_meter", "meter_slope", "empathy",
    "humanlikeness", "persona_adaptation", "coherence", "probe_accuracy", "probe_need_correct", "audit_flags",
    "panel", "registry_version", "config_hash", "emobench_version", "run_id",
)


@dataclass(frozen=True)
class Finding:
    field: str
    message: str


def _close(a: Any, b: Any, tol: float) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b, strict=True))
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=tol, abs_tol=tol)
    return bool(a == b)


def _calls_by_seed(calls: list[ModelCall], role: str) -> dict[tuple[str, int], list[ModelCall]]:
    found: dict[tuple[str, int], list[ModelCall]] = {}
    for call in calls:
        if call.role == role:
            found.setdefault((call.label, call.seed), []).append(call)
    return found


def _answered(calls: dict[tuple[str, int], list[ModelCall]], label: str, seeds: list[int]) -> ModelCall | None:
    """The accepted call among a role's attempts (the one without an error)."""
    return next((c for s in seeds for c in calls.get((label, s), []) if c.error is None), None)


def check_calls(episode: Episode, limits: Limits) -> Iterator[Finding]:
    """Each reply, user move and verdict is what a recorded call under its derived seed said."""
    seed = episode.seed
    subject = _calls_by_seed(episode.calls, "subject")
    user = _calls_by_seed(episode.calls, "user")
    judge = _calls_by_seed(episode.calls, "judge")
    subject_label, user_label = _label(episode, "subject"), _label(episode, "user")
    for turn in episode.turns:
        t = turn.index
        where = f"turns[{t}]"
        reply = _answered(subject, subject_label, [derive_seed(seed, "subject", t)])
        if reply is None or visible_reply(reply.text) != turn.reply:
            yield Finding(f"{where}.reply", "no subject call under this episode's seed said this reply")
        if t > 1:
            yield from _user_move(user, user_label, turn.user, [derive_seed(seed, "user", t, a)
                                                              for a in range(limits.simulator_retries + 1)], where)
        for verdict in turn.judgement.verdicts:
            if not verdict.valid:
                continue
            seeds = [derive_seed(seed, "judge", verdict.judge, t, a) for a in range(limits.judge_retries + 1)]
            call = _answered(judge, verdict.judge, seeds)
            try:
                said = parse_mdep(call.text, call.finish_reason) if call else None
            except ValueError:
                said = None
            if said is None or verdict.axes is None or {a: v.model_dump() for a, v in said.items()} != {
                    a: v.model_dump() for a, v in verdict.axes.items()}:
                yield Finding(f"{where}.judgement.verdicts[{verdict.judge}]",
                              "the verdict is not what the judge's recorded call under this turn's seed said")
        again = aggregate(turn.judgement.verdicts)
        if (again.valid, again.progress, again.regression, again.vector) != (
                turn.judgement.valid, turn.judgement.progress, turn.judgement.regression,
                tuple(turn.judgement.vector) if turn.judgement.vector is not None else None):
            yield Finding(f"{where}.judgement", "the turn's levels are not the median of its judges' verdicts")


def _label(episode: Episode, role: str) -> str:
    info = episode.roles.get(role)
    return info.label if info is not None and not isinstance(info, list) else ""


def _user_move(calls: dict[tuple[str, int], list[ModelCall]], label: str, move: UserMove, seeds: list[int],
               where: str) -> Iterator[Finding]:
    import orjson

    call = _answered(calls, label, seeds)
    try:
        said = orjson.loads(call.text) if call else None
    except orjson.JSONDecodeError:
        said = None
    if not isinstance(said, dict) or said.get("message") != move.message or said.get("meter_delta") != move.meter_delta:
        yield Finding(f"{where}.user", "the user's move is not what the simulator's recorded call said")


def check_holistic(episode: Episode, judgement: EpisodeJudgement, limits: Limits) -> Iterator[Finding]:
    calls = _calls_by_seed(judgement.calls, "judge")
    for verdict in judgement.holistic:
        if not verdict.valid:
            continue
        seeds = [derive_seed(episode.seed, "holistic", verdict.judge, a) for a in range(limits.judge_retries + 1)]
        call = _answered(calls, verdict.judge, seeds)
        try:
            said = parse_holistic(call.text, call.finish_reason) if call else None
        except ValueError:
            said = None
        if said is None or verdict.scores is None or {d: s.model_dump() for d, s in said.items()} != {
                d: s.model_dump() for d, s in verdict.scores.items()}:
            yield Finding(f"holistic[{verdict.judge}]", "the rubric is not what the judge's recorded call said")


def _expected_stop(turn_index: int, status: str | None, meter: float, action: str | None, limits: Limits) -> str | None:
    """The stop the episode loop takes after a turn, in its order; None: it plays on."""
    if status == "success":
        return "epm_success"
    if status in FAILURES:
        return f"epm_{status}"
    if turn_index >= limits.min_turns and meter >= limits.resolved_meter:
        return "meter_resolved"
    if turn_index >= limits.min_turns and meter < limits.gave_up_meter:
        return "meter_gave_up"
    if action == "end":
        return "director_end"
    return "max_turns" if turn_index >= limits.max_turns else None


def check_path(episode: Episode, case: Case, limits: Limits, profile: str, tol: float) -> tuple[Episode, list[Finding]]:
    """The replayed episode (EPM points and status from its levels) and what differs from the record."""
    found: list[Finding] = []
    if not _close(list(episode.p0), list(case.p0), tol):
        found.append(Finding("p0", f"{list(episode.p0)} is not the case card's {list(case.p0)}"))
    if episode.turns and episode.turns[0].user != opening_move(case):
        found.append(Finding("turns[1].user", "turn 1 is not the case card's opening"))
    rules = load_profile(profile).engine
    replayed = rejudged(episode, [t.judgement for t in episode.turns], limits.min_turns, rules)
    engine = EPMEngine(episode.p0, min_turns=limits.min_turns, rules=rules)  # again, for the turn of each status
    meter = float(case.persona.meter_start)
    for turn, again in zip(episode.turns, replayed.turns, strict=True):
        where = f"turns[{turn.index}]"
        if not _close(_point(turn.epm), _point(again.epm), tol):
            found.append(Finding(f"{where}.epm", "the EPM point does not follow from the turn's levels"))
        status = engine.step(turn.judgement.vector).status if again.epm is not None and turn.judgement.vector else None
        meter = max(0.0, min(100.0, meter + turn.user.meter_delta))
        if not _close(turn.meter, meter, tol):
            found.append(Finding(f"{where}.meter", f"{turn.meter} where the user's moves give {meter}"))
        stop = _expected_stop(turn.index, status, meter, turn.director.action if turn.director else None, limits)
        if stop is not None and turn.index < len(episode.turns):
            found.append(Finding(where, f"the episode went on after its stop ({stop})"))
            break
        if turn.index == len(episode.turns):
            found.extend(_last_stop(episode, stop, meter, limits))
    if len(episode.turns) > limits.max_turns:
        found.append(Finding("turns", f"{len(episode.turns)} turns, over max_turns {limits.max_turns}"))
    if (episode.status, episode.success_turn) != (replayed.status, replayed.success_turn):
        found.append(Finding("status", f"{episode.status!r} where the levels give {replayed.status!r}"))
    if not _close(episode.final_meter, meter if episode.last_user is None
                  else max(0.0, min(100.0, meter + episode.last_user.meter_delta)), tol):
        found.append(Finding("final_meter", f"{episode.final_meter} where the user's moves give another"))
    return replayed, found


def _point(point: EPMPoint | None) -> list[Any] | None:
    return None if point is None else [*point.p, point.delta_e, point.cos, point.energy]


def _last_stop(episode: Episode, stop: str | None, meter: float, limits: Limits) -> list[Finding]:
    if stop is not None:
        return [] if episode.stop_reason == stop else [Finding("stop_reason", f"{episode.stop_reason!r} where the rules "
                                                                               f"stop with {stop!r}")]
    last = episode.last_user
    if episode.stop_reason == "user_left" and last is not None and last.leave and \
            max(0.0, min(100.0, meter + last.meter_delta)) <= limits.leave_meter:
        return []
    if episode.stop_reason == "simulator_invalid" and last is None:
        return []
    return [Finding("stop_reason", f"{episode.stop_reason!r}: no rule stops the episode after its last turn")]


def check_row(replayed: Episode, case: Case, run_id: str, judgement: EpisodeJudgement | None, profile: str,
              row: dict[str, Any], tol: float) -> Iterator[Finding]:
    """The submitted score row against the one scoring's own function writes for the replayed episode."""
    again = score_episode(replayed, case, run_id, judgement, None, profile)
    for name in CHECKED_COLUMNS:
        if not _close(row.get(name), again.get(name), tol):
            yield Finding(name, f"{row.get(name)!r} where the episode gives {again.get(name)!r}")
