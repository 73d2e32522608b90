"""`emobench validate --judge-check esconv`: a judge panel rates ESConv chats, and its verdicts are
set against the seekers' own ratings (docs/validity.md, "Judges against help-seekers' own ratings").

Per feedback point, the panel's MDEP judges rate each reply since the previous point in context;
per chat, its holistic judges rate the whole chat. Texts go to the judges and nowhere else: the
result holds ids, scores and statistics.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emobench.config import PanelConfig, RunConfig
from emobench.endpoints.cache import ResponseCache
from emobench.endpoints.pool import EndpointPool
from emobench.episode.roles import RoleCaller, derive_seed
from emobench.judging import holistic, mdep
from emobench.prompts import PromptTemplate, load_template
from emobench.records import HOLISTIC_DIMENSIONS, ModelCall, mean_scores
from emobench.registry import Case
from emobench.registry.hashing import sha256_hex
from emobench.run.runner import _caller
from emobench.validation.esconv.card import record_case
from emobench.validation.esconv.data import EsconvChat, EsconvSample
from emobench.validation.esconv.stats import auc, rank_agreement
from emobench.validation.stand_in import read_stand_in

STAND_IN = Path("judges") / "stand-ins" / "esconv.yaml"
CONCURRENCY = 32  # ratings in flight per panel, as in the EPITOME check
SUPPORTER = "Assistant"
SOURCE = {
    "dataset": "ESConv",
    "repository": "thu-coai/Emotional-Support-Conversation",
    "citation": "Liu, Zheng, Demasi, Sabour, Li, Yu, Jiang, Huang (2021). Towards Emotional Support Dialog Systems. "
                "ACL-IJCNLP 2021.",
    "terms": "CC BY-NC 4.0 (LICENSE, Hugging Face card); README: all rights reserved, academic research use only",
}
TURN_SCORE = "mean over the replies since the previous feedback point of the sum of the EPM turn vector (C+A+P, -14..9)"
SURVEY = {"empathy": "holistic empathy", "relevance": "chat score", "intensity_drop": "chat score"}
Tick = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Reply:
    """A run of consecutive supporter messages, joined; `start` is its first turn's index."""

    chat_id: str
    index: int
    start: int
    text: str


@dataclass(frozen=True)
class FeedbackPoint:
    chat_id: str
    turn: int  # index of the seeker turn carrying the feedback
    feedback: int
    replies: tuple[int, ...]  # indices of the chat's replies since the previous feedback point
    words: int  # words in those replies
    seeker: str  # the message carrying the feedback
    previous: str  # the seeker's message before it ("" when none)


def replies(chat: EsconvChat) -> list[Reply]:
    out: list[Reply] = []
    for k, turn in enumerate(chat.turns):
        if turn.speaker != "supporter":
            continue
        if out and k > 0 and chat.turns[k - 1].speaker == "supporter":
            last = out[-1]
            out[-1] = Reply(chat.chat_id, last.index, last.start, f"{last.text}\n{turn.text}")
        else:
            out.append(Reply(chat.chat_id, len(out), k, turn.text))
    return out


def feedback_points(chat: EsconvChat, chat_replies: list[Reply]) -> tuple[list[FeedbackPoint], int]:
    """The chat's feedback points with a reply before them, and how many had none (left out)."""
    points, without, since = [], 0, -1
    for k, turn in enumerate(chat.turns):
        if turn.speaker != "seeker" or turn.feedback is None:
            continue
        rated = tuple(r.index for r in chat_replies if since < r.start < k)
        previous = next((t.text for t in reversed(chat.turns[:k]) if t.speaker == "seeker"), "")
        if rated:
            words = sum(len(chat_replies[i].text.split()) for i in rated)
            points.append(FeedbackPoint(chat.chat_id, k, turn.feedback, rated, words, turn.text, previous))
        else:
            without += 1
        since = k
    return points, without


def transcript(case: Case, chat: EsconvChat, upto: int) -> list[dict[str, str]]:
    return [{"speaker": case.persona.name if t.speaker == "seeker" else SUPPORTER, "text": t.text}
            for t in chat.turns[:upto]]


async def _rate(
    panel: PanelConfig, chats: list[EsconvChat], cases: dict[str, Case], chat_replies: dict[str, list[Reply]],
    wanted: dict[str, set[int]], *, root: Path, cache: ResponseCache | None, log_dir: Path, seed: int,
    tick: Tick | None, label: str,
) -> tuple[dict[tuple[str, int], float | None], dict[str, dict[str, float | None]], dict[str, Any]]:
    """Each wanted reply's score (None: invalid) and each chat's holistic scores, with provenance."""
    retries = int(RunConfig.model_fields["judge_retries"].default)
    templates: dict[str, PromptTemplate] = {
        name: load_template(root / "judges" / panel.rubrics[name]) for name in ("mdep", "holistic")}
    started = time.perf_counter()
    total = sum(len(v) for v in wanted.values()) + len(chats)
    done_count = 0
    async with AsyncExitStack() as stack:
        pool = EndpointPool(stack, log_dir, cache)
        judges: list[RoleCaller] = []
        for role in panel.judges:
            client, info = await pool.resolve(role)
            judges.append(_caller("judge", client, info))
        gate = asyncio.Semaphore(CONCURRENCY)

        def advance() -> None:
            nonlocal done_count
            done_count += 1
            if tick is not None:
                tick(f"{label}: rating", done_count, total)

        async def one_reply(chat: EsconvChat, reply: Reply) -> tuple[tuple[str, int], float | None, list[ModelCall]]:
            case = cases[chat.chat_id]
            async with gate:
                turn, calls = await mdep.judge_turn(
                    tuple(judges), templates["mdep"], case, transcript(case, chat, reply.start), reply.text,
                    derive_seed(seed, "esconv", chat.chat_id), reply.index, retries)
            advance()
            # The reply's score: the sum of its EPM turn vector, C + A + P points (-14..9).
            score = float(sum(turn.vector)) if turn.valid and turn.vector is not None else None
            return (chat.chat_id, reply.index), score, calls

        async def one_chat(chat: EsconvChat) -> tuple[str, dict[str, float | None], list[ModelCall]]:
            case, template = cases[chat.chat_id], templates["holistic"]
            messages = [
                {"role": "system", "content": template.case_system(case)},
                {"role": "user", "content": template.block(
                    "user", transcript=transcript(case, chat, len(chat.turns)), left_with="", persona=case.persona,
                    scenario=case.scenario)},
            ]
            chat_seed = derive_seed(seed, "esconv-chat", chat.chat_id)
            async with gate:
                results = await asyncio.gather(*(holistic._one_judge(j, messages, template, chat_seed, retries)
                                                  for j in judges))
            advance()
            return chat.chat_id, mean_scores([v for v, _ in results]), [c for _, cs in results for c in cs]

        rated, whole = await asyncio.gather(  # one queue: the gate keeps CONCURRENCY ratings in flight
            asyncio.gather(*(one_reply(c, chat_replies[c.chat_id][i]) for c in chats for i in sorted(wanted[c.chat_id]))),
            asyncio.gather(*(one_chat(c) for c in chats)))
        roles = [{"label": j.info.label, "model": j.info.model, "sampling": j.info.sampling.model_dump(mode="json")}
                 for j in judges]
    calls = [c for *_, cs in rated for c in cs] + [c for *_, cs in whole for c in cs]
    provenance = {
        "judges": roles,
        "prompt_versions": {name: t.version for name, t in templates.items()},
        "judge_retries": retries,
        "cost": {"n_calls": len(calls), "n_cached": sum(c.cached for c in calls),
                 "prompt_tokens": sum(c.prompt_tokens for c in calls),
                 "completion_tokens": sum(c.completion_tokens for c in calls),
                 "wall_s": round(time.perf_counter() - started, 1)},
    }
    return {k: s for k, s, _ in rated}, {k: s for k, s, _ in whole}, provenance


def _chat_score(scores: dict[str, float | None]) -> float | None:
    values = [scores[d] for d in HOLISTIC_DIMENSIONS]
    return None if any(v is None for v in values) else sum(v for v in values if v is not None) / len(values)


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class Inputs:
    """What every panel rates, and the baselines' inputs, computed once for all panels."""

    def __init__(self, sample: EsconvSample, root: Path) -> None:
        from emobench.trackers.affect import default_tracker

        path = root / STAND_IN
        self.stand_in = read_stand_in(path)
        self.chats = list(sample.chats)
        self.cases = {c.chat_id: record_case(path, self.stand_in, c, case_id=f"esconv-{c.chat_id}") for c in self.chats}
        self.replies = {c.chat_id: replies(c) for c in self.chats}
        self.points: list[FeedbackPoint] = []
        self.without_reply = 0
        for c in self.chats:
            found, without = feedback_points(c, self.replies[c.chat_id])
            self.points += found
            self.without_reply += without
        seekers = [[t.text for t in c.turns if t.speaker == "seeker"] for c in self.chats]
        texts = sorted({x for p in self.points for x in (p.seeker, p.previous)} | {x for s in seekers for x in s[:1] + s[-1:]})
        tracker = default_tracker()
        self.tracker = tracker.version
        valence = {t: r.valence for t, r in zip(texts, tracker.read(texts), strict=True)}
        self.valence_change = [valence[p.seeker] - valence[p.previous] for p in self.points]
        self.chat_valence_change = {c.chat_id: (valence[s[-1]] - valence[s[0]]) if s else 0.0
                                    for c, s in zip(self.chats, seekers, strict=True)}
        self.chat_words = {c.chat_id: (sum(len(r.text.split()) for r in self.replies[c.chat_id])
                                       / max(1, len(self.replies[c.chat_id]))) for c in self.chats}
        self.wanted: dict[str, set[int]] = {c.chat_id: set() for c in self.chats}
        for p in self.points:
            self.wanted[p.chat_id].update(p.replies)


def survey_truth(chat: EsconvChat, item: str) -> int | None:
    if item == "intensity_drop":
        if chat.initial_intensity is None or chat.final_intensity is None:
            return None
        return chat.initial_intensity - chat.final_intensity
    value: int | None = getattr(chat, item)
    return value


def _figures(inp: Inputs, turn_scores: list[float | None], chat_scores: dict[str, dict[str, float | None]],
             chats: list[EsconvChat], *, n_boot: int, seed: int) -> dict[str, Any]:
    """Per-turn, per-chat and AUC figures of one scorer (a panel or a baseline) over `chats`."""
    ids = {c.chat_id for c in chats}
    keep = [i for i, p in enumerate(inp.points) if p.chat_id in ids]
    groups = [inp.points[i].chat_id for i in keep]
    truth = [inp.points[i].feedback for i in keep]
    out: dict[str, Any] = {"per_turn": rank_agreement(truth, [turn_scores[i] for i in keep], groups, n_boot=n_boot,
                                                      seed=seed)}
    out["per_chat"] = {}
    for item, reads in SURVEY.items():
        rated = [(c, t) for c in chats if (t := survey_truth(c, item)) is not None]
        score = [chat_scores[c.chat_id]["empathy"] if reads == "holistic empathy" else _chat_score(chat_scores[c.chat_id])
                 for c, _ in rated]
        out["per_chat"][item] = {"panel_score": reads, "n_left_out_no_survey": len(chats) - len(rated), **rank_agreement(
            [t for _, t in rated], score, [c.chat_id for c, _ in rated], n_boot=n_boot, seed=seed)}
    out["auc_esconv_vs_failed"] = auc([_chat_score(chat_scores[c.chat_id]) for c in chats],
                                      [not c.failed for c in chats], n_boot=n_boot, seed=seed)
    return out


def _by_experience(inp: Inputs, compute: Callable[[list[EsconvChat]], dict[str, Any]]) -> dict[str, Any]:
    kinds = sorted({c.experience_type for c in inp.chats})
    return {"all": compute(inp.chats), "by_experience_type": {k: compute([c for c in inp.chats if c.experience_type == k])
                                                              for k in kinds}}


def baseline_figures(inp: Inputs, *, n_boot: int, seed: int) -> dict[str, Any]:
    """Reply length and valence change, through the same statistics as the panel; a constant scores 0."""
    out: dict[str, Any] = {"constant": {"spearman": 0.0, "kendall": 0.0, "auc": 0.5,
                                        "note": "the same score everywhere cannot rank: rho = tau = 0, AUC = 0.5"}}
    for name, per_turn, per_chat in (
        ("reply_words", [float(p.words) for p in inp.points], inp.chat_words),
        ("valence_change", inp.valence_change, inp.chat_valence_change),
    ):
        scores = {cid: dict.fromkeys(HOLISTIC_DIMENSIONS, per_chat[cid]) for cid in per_chat}
        out[name] = _by_experience(inp, lambda chats, s=scores, t=per_turn: _figures(  # type: ignore[misc]
            inp, list(t), s, chats, n_boot=n_boot, seed=seed))
    return out


def judge_check_esconv(
    sample: EsconvSample, panels: list[tuple[str, PanelConfig]], *, root: Path, cache: ResponseCache | None,
    log_dir: Path, seed: int, n_boot: int, splits: frozenset[str], limit: int | None, tick: Tick | None = None,
) -> dict[str, Any]:
    """The `judge_check_esconv` block of validity.json: one entry per panel, same chats for all."""
    inp = Inputs(sample, root)
    by_source: dict[str, int] = {}
    for c in inp.chats:
        by_source[c.source] = by_source.get(c.source, 0) + 1
    feedback_from = sorted({p.chat_id.split(":")[0] for p in inp.points})
    out: dict[str, Any] = {
        "dataset": "esconv",
        "source": SOURCE,
        "data": {"layout": sample.layout, "sha256": {Path(f).name: _digest(f) for f in sample.files},
                 "notes": list(sample.notes), "splits": sorted(splits), "n_chats": by_source},
        "limit": limit, "seed": seed, "n_boot": n_boot,
        "stand_in": {"file": STAND_IN.name, "content_hash": sha256_hex(inp.stand_in), "card": inp.stand_in},
        "turn_score": TURN_SCORE,
        "n_feedback_points": len(inp.points),
        "n_feedback_points_without_reply": inp.without_reply,
        "feedback_from": feedback_from,
        "feedback_label": "failed chats only" if feedback_from == ["FailedESConv"] else "",
        "tracker": inp.tracker,
        "baselines": baseline_figures(inp, n_boot=n_boot, seed=seed),
        "panels": {},
    }
    for label, panel in panels:
        reply_scores, chat_scores, provenance = asyncio.run(_rate(
            panel, inp.chats, inp.cases, inp.replies, inp.wanted, root=root, cache=cache, log_dir=log_dir,
            seed=seed, tick=tick, label=label))
        turn_scores: list[float | None] = []
        for p in inp.points:
            valid = [s for i in p.replies if (s := reply_scores[(p.chat_id, i)]) is not None]
            turn_scores.append(sum(valid) / len(valid) if valid else None)
        def figures(chats: list[EsconvChat], t: list[float | None] = turn_scores,
                    s: dict[str, dict[str, float | None]] = chat_scores) -> dict[str, Any]:
            return _figures(inp, t, s, chats, n_boot=n_boot, seed=seed)

        out["panels"][label] = {"panel": panel.name, **provenance, **_by_experience(inp, figures)}
    return out
