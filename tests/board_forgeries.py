"""The forgery classes of tests/board_forgery_kit.py: 16 ways to cheat, five or more variants each
(eight more in tests/board_forgeries_roles.py). Written beside the verifier; tests/board_heldout.py
holds the ones written after its rules froze."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from tests.board_forgeries_roles import MORE
from tests.board_forgery_kit import Forgery, ForgeryClass, Submission

N = 5


def _key(sub: Submission, rng: random.Random) -> str:
    return str(rng.choice(sub.episodes)["key"])


def _ep(sub: Submission, key: str) -> dict[str, Any]:
    return next(e for e in sub.episodes if e["key"] == key)


def _pick(rng: random.Random) -> int:
    return rng.randrange(1 << 30)


def _score_inflation(rng: random.Random) -> list[Forgery]:
    def bump(column: str, delta: float, pick: int) -> Forgery:
        def edit(sub: Submission) -> None:
            row = sub.rows[pick % len(sub.rows)]
            row[column] = min(100.0, (row[column] or 0.0) + delta)
        return Forgery(f"{column} +{delta:g}", edit)
    cols = ["epmq", "epmq_empa", "outcome", "stability", "rdi", "align"]
    return [bump(rng.choice(cols), rng.choice([0.5, 3.0, 12.0, 40.0]), _pick(rng)) for _ in range(N + 1)]


def _success_flip(rng: random.Random) -> list[Forgery]:
    def flip(pick: int, with_turn: bool) -> Forgery:
        def edit(sub: Submission) -> None:
            row = sub.rows[pick % len(sub.rows)]
            row["success"] = not row["success"]
            if with_turn:
                row["turns_to_success"] = row["n_turns"]
        return Forgery(f"success flipped{' with its turn' if with_turn else ''}", edit)
    return [flip(_pick(rng), rng.random() < 0.5) for _ in range(N)]


def _verdict_inflation(rng: random.Random) -> list[Forgery]:
    def raise_level(pick: int, axis: str, also_levels: bool) -> Forgery:
        def edit(sub: Submission) -> None:
            ep = sub.episodes[pick % len(sub.episodes)]
            turn = ep["turns"][pick % len(ep["turns"])]
            level = turn["judgement"]["verdicts"][0]["axes"][axis]
            level["progress"], level["regression"] = 2, 0
            level["evidence"] = level["evidence"] or "i hear you"
            if also_levels:
                turn["judgement"]["progress"][axis], turn["judgement"]["regression"][axis] = 2, 0
        return Forgery(f"judge's {axis} raised{' with the median' if also_levels else ''}", edit)
    return [raise_level(_pick(rng), rng.choice("CAP"), rng.random() < 0.5) for _ in range(N)]


def _levels_edit(rng: random.Random) -> list[Forgery]:
    def edit_levels(pick: int, axis_i: int) -> Forgery:
        def edit(sub: Submission) -> None:
            ep = sub.episodes[pick % len(sub.episodes)]
            judgement = ep["turns"][pick % len(ep["turns"])]["judgement"]
            vector = list(judgement["vector"])
            vector[axis_i] += 3.0
            judgement["vector"] = vector
        return Forgery(f"turn vector axis {axis_i} +3", edit)
    return [edit_levels(_pick(rng), rng.randrange(3)) for _ in range(N)]


def _epm_edit(rng: random.Random) -> list[Forgery]:
    def move(pick: int, what: str) -> Forgery:
        def edit(sub: Submission) -> None:
            ep = sub.episodes[pick % len(sub.episodes)]
            epm = ep["turns"][-1]["epm"]
            if what == "p":
                epm["p"] = [x / 2 for x in epm["p"]]
            else:
                epm[what] = epm[what] + 5.0
        return Forgery(f"last EPM point's {what}", edit)
    return [move(_pick(rng), rng.choice(["p", "energy", "delta_e", "cos"])) for _ in range(N)]


def _meter_edit(rng: random.Random) -> list[Forgery]:
    def lift(pick: int, where: str) -> Forgery:
        def edit(sub: Submission) -> None:
            ep = sub.episodes[pick % len(sub.episodes)]
            if where == "final":
                ep["final_meter"] = 95.0
                sub.row(ep["key"])["final_meter"] = 95.0
            else:
                ep["turns"][-1]["meter"] = 90.0
        return Forgery(f"meter lifted ({where})", edit)
    return [lift(_pick(rng), rng.choice(["final", "turn"])) for _ in range(N)]


def _cherry_pick(rng: random.Random) -> list[Forgery]:
    def drop(pick: int, rows_too: bool) -> Forgery:
        def edit(sub: Submission) -> None:
            worst = sorted(sub.rows, key=lambda r: r["epmq"] or 0)[pick % 2]
            key = f"{worst['subject']}|{worst['case_id']}|{worst['seed']}"
            sub.episodes = [e for e in sub.episodes if e["key"] != key]
            sub.judgements = [j for j in sub.judgements if j["key"] != key]
            if rows_too:
                sub.rows.remove(worst)
        return Forgery(f"worst episode dropped{' with its row' if rows_too else ''}", edit)
    return [drop(_pick(rng), rng.random() < 0.7) for _ in range(N)]


def _best_of_seeds(rng: random.Random) -> list[Forgery]:
    def relabel(pick: int) -> Forgery:
        def edit(sub: Submission) -> None:
            best = max(sub.rows, key=lambda r: r["epmq"] or 0)
            key = f"{best['subject']}|{best['case_id']}|{best['seed']}"
            others = [e for e in sub.episodes if e["case_id"] == best["case_id"] and e["subject"] == best["subject"]
                      and e["key"] != key]
            target = others[pick % len(others)]
            copy = {**_ep(sub, key), "seed": target["seed"], "key": target["key"]}
            sub.episodes = [copy if e["key"] == target["key"] else e for e in sub.episodes]
            row = sub.row(target["key"])
            row.update({k: v for k, v in best.items() if k not in ("seed",)})
        return Forgery("best seed's episode relabelled as another seed", edit)
    return [relabel(_pick(rng)) for _ in range(N)]


def _model_claim(rng: random.Random) -> list[Forgery]:
    def claim(model: str, everywhere: bool) -> Forgery:
        def edit(sub: Submission) -> None:
            sub.manifest["roles"]["subjects"][0]["model"] = model
            if everywhere:
                for s in sub.manifest["config"]["subjects"][:1]:
                    s["binding"] = s["binding"].replace("subject-model", model)
        return Forgery(f"manifest claims {model}{' (config too)' if everywhere else ''}", edit)
    models = ["gpt-4o", "claude-3-5-sonnet", "my-org/empathy-7b", "Qwen/Qwen2.5-72B-Instruct", "gemini-2.5-pro"]
    return [claim(m, rng.random() < 0.5) for m in models]


def _protocol_claim(rng: random.Random) -> list[Forgery]:
    def claim(name: str, value: Any) -> Forgery:
        def edit(sub: Submission) -> None:
            sub.manifest["config"][name] = value
        return Forgery(f"config.{name} = {value!r}", edit)
    options = [("max_turns", 30), ("min_turns", 12), ("scoring_profile", "empa"), ("split", "dev"), ("probe", False),
               ("seeds", [0, 1, 2]), ("max_turns", 2)]
    rng.shuffle(options)
    return [claim(n, v) for n, v in options[:N + 1]]


def _hash_tamper(rng: random.Random) -> list[Forgery]:
    def after(name: str) -> Forgery:
        def tamper(folder: Path) -> None:
            data = bytearray((folder / name).read_bytes())
            at = rng.randrange(len(data) // 2, len(data) - 2)
            data[at] = ord("7") if data[at] != ord("7") else ord("8")
            (folder / name).write_bytes(bytes(data))

        def edit(sub: Submission) -> None:
            sub.after_hash.append(tamper)
        return Forgery(f"byte changed in {name} after hashing", edit)

    def extra(sub: Submission) -> None:
        sub.after_hash.append(lambda folder: (folder / "notes.txt").write_text("trust me"))
    return [after(n) for n in ("manifest.json", "episodes.jsonl", "judgements.jsonl", "scores.parquet")] + [
        Forgery("an unlisted file added", extra)]


def _leak(rng: random.Random) -> list[Forgery]:
    def put(text: str, where: str) -> Forgery:
        def edit(sub: Submission) -> None:
            if where == "manifest":
                sub.manifest["notes"] = f"ran with {text}"
            else:
                sub.episodes[0]["calls"][0]["endpoint"] = text
        return Forgery(f"{text[:12]}… in {where}", edit)
    secrets = ["sk-" + "a1B2" * 8, "hf_" + "Zq9" * 9, "/home/alice/models/empathy-7b", "Bearer " + "x7Y" * 8,
               "C:\\Users\\bob\\run", "/Users/carol/ckpt", "AKIA" + "ABCD1234" * 2]
    rng.shuffle(secrets)
    return [put(s, rng.choice(["manifest", "episodes"])) for s in secrets[:N + 1]]


def _easier_case(rng: random.Random) -> list[Forgery]:
    def ease(pick: int, factor: float) -> Forgery:
        def edit(sub: Submission) -> None:
            ep = sub.episodes[pick % len(sub.episodes)]
            ep["p0"] = [x * factor for x in ep["p0"]]
        return Forgery(f"P0 scaled by {factor}", edit)
    return [ease(_pick(rng), rng.choice([0.5, 0.7, 0.9, 1.5])) for _ in range(N)]


def _truncation(rng: random.Random) -> list[Forgery]:
    def cut(pick: int, reason: str) -> Forgery:
        def edit(sub: Submission) -> None:
            ep = sub.episodes[pick % len(sub.episodes)]
            ep["turns"] = ep["turns"][:-1]
            ep["stop_reason"] = reason
            row = sub.row(ep["key"])
            row["n_turns"], row["n_judged_turns"], row["stop_reason"] = len(ep["turns"]), len(ep["turns"]), reason
        return Forgery(f"last turn cut, stop {reason}", edit)
    reasons = ["user_left", "director_end", "epm_success", "max_turns", "meter_resolved"]
    return [cut(_pick(rng), r) for r in reasons]


def _holistic_inflation(rng: random.Random) -> list[Forgery]:
    def lift(pick: int, dim: str, row_too: bool) -> Forgery:
        def edit(sub: Submission) -> None:
            j = sub.judgements[pick % len(sub.judgements)]
            j["holistic"][0]["scores"][dim]["score"] = 10
            if row_too:
                sub.row(j["key"])[dim] = 10.0
        return Forgery(f"{dim} rubric 10{' and row' if row_too else ''}", edit)
    dims = ["empathy", "humanlikeness", "persona_adaptation", "coherence"]
    return [lift(_pick(rng), rng.choice(dims), rng.random() < 0.5) for _ in range(N)]


def _reply_rewrite(rng: random.Random) -> list[Forgery]:
    def rewrite(pick: int, text: str) -> Forgery:
        def edit(sub: Submission) -> None:
            ep = sub.episodes[pick % len(sub.episodes)]
            ep["turns"][pick % len(ep["turns"])]["reply"] = text
        return Forgery(f"reply rewritten: {text[:24]}", edit)
    texts = ["I can hear how heavy this is for you.", "That must feel lonely. What would help most right now?",
             "You are not alone in this.", "It makes sense you feel torn.", "Let's take it one step at a time.",
             "Tell me more about what Friday means to you."]
    return [rewrite(_pick(rng), t) for t in rng.sample(texts, N)]


CLASSES = [
    ForgeryClass("score inflation", "scores.parquet", _score_inflation),
    ForgeryClass("success flip", "scores.parquet", _success_flip),
    ForgeryClass("verdict inflation", "episodes.jsonl", _verdict_inflation),
    ForgeryClass("turn levels edited", "episodes.jsonl", _levels_edit),
    ForgeryClass("EPM path edited", "episodes.jsonl", _epm_edit),
    ForgeryClass("meter lifted", "episodes.jsonl", _meter_edit),
    ForgeryClass("cherry-picked episodes", "episodes.jsonl", _cherry_pick),
    ForgeryClass("best-of seeds", "episodes.jsonl", _best_of_seeds),
    ForgeryClass("subject model claimed", "episodes.jsonl", _model_claim),
    ForgeryClass("protocol claimed", "manifest.json", _protocol_claim),
    ForgeryClass("files changed after hashing", "", _hash_tamper),
    ForgeryClass("key or local path", "", _leak),
    ForgeryClass("easier case (P0)", "episodes.jsonl", _easier_case),
    ForgeryClass("truncated episode", "episodes.jsonl", _truncation),
    ForgeryClass("holistic inflation", "judgements.jsonl", _holistic_inflation),
    ForgeryClass("reply rewritten", "episodes.jsonl", _reply_rewrite),
    *MORE,
]


def fabricate(folder: Path, registry: Any) -> None:
    """The forgery verify cannot see: every judge's call text, verdict, turn levels, EPM path,
    score row and the run's leaderboard rewritten consistently (P progress 2 on every turn), then re-hashed. Only asking the
    judges again (`emobench verify --spot-check`) shows it."""
    import orjson

    from emobench.board.recompute import CHECKED_COLUMNS
    from emobench.judging.mdep import aggregate
    from emobench.records import Episode, EpisodeJudgement, JudgeVerdict
    from emobench.scoring.episode_scores import score_episode
    from emobench.scoring.replay import rejudged
    from tests.board_forgery_kit import Submission

    sub = Submission.read(folder)
    config = sub.manifest["config"]
    judgements = {j["key"]: EpisodeJudgement.model_validate(j) for j in sub.judgements}
    for i, raw in enumerate(sub.episodes):
        episode = Episode.model_validate(raw)
        calls = list(episode.calls)
        turns = []
        for turn in episode.turns:
            verdicts = []
            for verdict in turn.judgement.verdicts:
                axes = dict(verdict.axes or {})
                axes["P"] = axes["P"].model_copy(update={"progress": 2, "evidence": "you can do this"})
                verdicts.append(JudgeVerdict(judge=verdict.judge, valid=True, axes=axes))
                text = orjson.dumps({a: v.model_dump() for a, v in axes.items()}).decode()
                calls = [c.model_copy(update={"text": text}) if c.role == "judge" and c.label == verdict.judge
                         and c.template.startswith("mdep") and c.error is None and _turn_of(episode, c) == turn.index
                         else c for c in calls]
            turns.append(turn.model_copy(update={"judgement": aggregate(verdicts)}))
        forged = rejudged(episode.model_copy(update={"turns": turns, "calls": calls}),
                          [t.judgement for t in turns], int(config["min_turns"]))
        sub.episodes[i] = orjson.loads(forged.model_dump_json())
        row = sub.row(forged.key)
        again = score_episode(forged, registry.case(forged.case_id), sub.manifest["run_id"], judgements.get(forged.key),
                              None, config["scoring_profile"])
        row.update({k: again[k] for k in CHECKED_COLUMNS})
    out = folder.parent / f"{folder.name}-fabricated"
    sub.write(out, folder)
    if sub.leaderboard is not None:  # the run's own leaderboard, rebuilt on the forged scores with its bootstrap
        import pyarrow.parquet as pq

        from emobench.publish.leaderboard import build_leaderboard
        from tests.board_forgery_kit import rehash

        boot = orjson.loads(sub.leaderboard.schema.metadata[b"emobench.bootstrap"])
        pq.write_table(build_leaderboard([out], n_boot=boot["n"], seed=boot["seed"]), out / "leaderboard.parquet")
        rehash(out, folder)


def _turn_of(episode: Any, call: Any) -> int:
    from emobench.episode.roles import derive_seed

    return next((t.index for t in episode.turns for a in range(5)
                 if derive_seed(episode.seed, "judge", call.label, t.index, a) == call.seed), -1)
