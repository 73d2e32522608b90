"""Held-out forgeries, written after the verifier's rules were frozen (commit f47d09b's checks):
kept apart from tests/board_forgeries.py so their catch rate is reported on its own."""

from __future__ import annotations

import random

from tests.board_forgery_kit import Forgery, ForgeryClass, Submission


def _held_out(rng: random.Random) -> list[Forgery]:
    del rng  # each forgery is one idea, written once

    def judge_swap(sub: Submission) -> None:  # a judge's verdicts attributed to another judge
        for turn in sub.episodes[0]["turns"]:
            verdicts = turn["judgement"]["verdicts"]
            verdicts[0]["judge"], verdicts[1]["judge"] = verdicts[1]["judge"], verdicts[0]["judge"]
            verdicts[0]["axes"]["A"]["progress"] = 2

    def probe_fix(sub: Submission) -> None:  # the persona probe answered right after the fact
        for ep in sub.episodes:
            if ep["probe"]:
                ep["probe"]["dominant_need"] = "C"
        for row in sub.rows:
            row["probe_accuracy"], row["probe_need_correct"] = 1.0, True

    def invalid_hidden(sub: Submission) -> None:  # an invalid judge marked valid with a made-up rating
        ep = sub.episodes[1]
        verdict = ep["turns"][0]["judgement"]["verdicts"][0]
        verdict["error"] = None
        verdict["axes"] = {a: {"progress": 2, "regression": 0, "evidence": "yes", "reason": ""} for a in "CAP"}

    def shuffle_turns(sub: Submission) -> None:  # a good turn moved to the front
        turns = sub.episodes[2]["turns"]
        turns[0], turns[-1] = turns[-1], turns[0]

    def second_subject(sub: Submission) -> None:  # another model's episode passed off as the subject's
        ep = dict(sub.episodes[3])
        ep["roles"] = {**ep["roles"], "subject": {**ep["roles"]["subject"], "model": "other-model"}}
        sub.episodes[3] = ep

    def registry_claim(sub: Submission) -> None:  # an older library version's cards claimed current
        sub.manifest["registry_version"] = "0" * 64
        for ep in sub.episodes:
            ep["registry_version"] = "0" * 64

    def scoring_profile(sub: Submission) -> None:  # rows scored under the uncapped profile
        for row in sub.rows:
            row["scoring_profile"] = "empa"
            row["epmq"] = row["epmq_empa"]

    def extra_turn_judge(sub: Submission) -> None:  # a second, friendlier judge's verdict appended
        turn = sub.episodes[0]["turns"][1]
        extra = dict(turn["judgement"]["verdicts"][0], judge="judge-9")
        turn["judgement"]["verdicts"].append(extra)

    return [Forgery(f.__name__, f) for f in (judge_swap, probe_fix, invalid_hidden, shuffle_turns, second_subject,
                                             registry_claim, scoring_profile, extra_turn_judge)]


HELD_OUT = [ForgeryClass("held-out", "", _held_out)]
