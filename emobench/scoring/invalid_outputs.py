"""How often structured outputs stayed invalid, per role: a run whose simulator or judges kept
failing must not be read as a result.

Counted from the call records: every structured request is one call; a rejected call carries
the parser's error. An output is *lost* when its last attempt was rejected too: for the
simulator that ends the episode (stop reason ``simulator_invalid``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from emobench.records import Episode, EpisodeJudgement, ModelCall

SIMULATOR_INVALID = "simulator_invalid"


def _role(call: ModelCall) -> str:
    # The subject answers in free text except for the persona probe, which is asked for JSON.
    if call.role == "subject":
        return "probe"
    # One panel judges per turn, per episode and in pairs: each kind of verdict counts apart.
    return f"judge ({call.template.split('@')[0]})" if call.role == "judge" else call.role


def _structured(call: ModelCall) -> bool:
    if call.structured_output is not None:
        return True
    # Records written before structured_output existed: every non-subject call is structured.
    return call.role != "subject" or call.error is not None or call.template.startswith("probe")


def invalid_output_rates(episodes: Iterable[Episode], judgements: Iterable[EpisodeJudgement]) -> dict[str, Any]:
    """Per role: structured calls, rejected calls and their rate; episodes ended by the simulator."""
    calls: Counter[str] = Counter()
    rejected: Counter[str] = Counter()
    n_episodes = 0
    sim_stops: Counter[str] = Counter()
    per_subject: Counter[str] = Counter()

    def count(items: Iterable[ModelCall]) -> None:
        for call in items:
            if _structured(call):
                calls[_role(call)] += 1
                rejected[_role(call)] += call.error is not None

    for episode in episodes:
        n_episodes += 1
        per_subject[episode.subject] += 1
        sim_stops[episode.subject] += episode.stop_reason == SIMULATOR_INVALID
        count(episode.calls)
    for judgement in judgements:
        count(judgement.calls)
    return {
        "rejected_calls": {
            role: {"calls": calls[role], "rejected": rejected[role], "rate": rejected[role] / calls[role]}
            for role in sorted(calls)
        },
        "simulator_invalid_episodes": {
            "episodes": n_episodes,
            "stopped": sum(sim_stops.values()),
            "rate": sum(sim_stops.values()) / n_episodes if n_episodes else None,
            "by_subject": {s: sim_stops[s] / per_subject[s] for s in sorted(per_subject)},
        },
    }


def invalid_summary(report: dict[str, Any]) -> str:
    """One line for the end of a run: the simulator's stop rate and each role's rejected share."""
    rates = report.get("invalid_outputs")
    if not rates:
        return ""
    sim = rates["simulator_invalid_episodes"]
    head = f"simulator_invalid {sim['stopped']}/{sim['episodes']} episodes"
    roles = ", ".join(f"{role} {r['rejected']}/{r['calls']}" for role, r in rates["rejected_calls"].items())
    return f"{head} · rejected structured outputs: {roles or 'none'}"
