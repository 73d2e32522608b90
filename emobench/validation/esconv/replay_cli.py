"""The `--fidelity-replay` part of `emobench validate`: read the sample, replay it (or, with
--dry-run, say what that would cost), and put the figures together (docs/validity.md)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from emobench.endpoints.cache import ResponseCache
from emobench.errors import InputError
from emobench.prompts import load_template
from emobench.validation.esconv.data import EsconvChat, EsconvSample, load_esconv, parse_splits
from emobench.validation.esconv.replay import (
    ChatReplay,
    SeekerSpec,
    chat_case,
    load_spec,
    replay,
    targets,
    user_role,
)
from emobench.validation.esconv.replay_stats import ChatSummary, Row, figures

DATASETS = ("esconv",)
RESULTS_FILE = "esconv_replay.jsonl"
SOURCE = {
    "dataset": "ESConv",
    "repository": "thu-coai/Emotional-Support-Conversation",
    "citation": "Liu, Zheng, Demasi, Sabour, Li, Yu, Jiang, Huang (2021). Towards Emotional Support Dialog "
                "Systems. ACL 2021.",
}


def rows_of(chat: EsconvChat, result: ChatReplay) -> tuple[list[Row], ChatSummary]:
    """The chat's replayed turns beside the real ones, and its per-chat summary."""
    rated_meter = result.meter_start  # the meter at the previous rated turn, or at the start
    rows = []
    for target, sim in zip(targets(chat), result.turns, strict=True):
        change = None
        if target.feedback is not None:
            if sim.message is not None:
                change = sim.meter - rated_meter
            rated_meter = sim.meter
        rows.append(Row(chat=chat.chat_id, source=chat.source, real=target.real, simulated=sim.message,
                        previous_reply=target.history[-1][1], feedback=target.feedback, meter_change=change,
                        leave=sim.leave, last=target.last))
    valid = [t for t in result.turns if t.message is not None]
    drop = (chat.initial_intensity - chat.final_intensity
            if chat.initial_intensity is not None and chat.final_intensity is not None else None)
    return rows, ChatSummary(chat=chat.chat_id, source=chat.source,
                             meter_change=result.turns[-1].meter - result.meter_start if valid else None,
                             intensity_drop=drop)


def _dry_run(sample: EsconvSample, spec: SeekerSpec, binding: str, root: Path, console: Console) -> dict[str, Any]:
    """Calls and tokens the replay would make (at most: every output retried), and their cost."""
    from emobench.config import RunConfig
    from emobench.episode.simulator import simulator_messages
    from emobench.run.dry_run import CHARS_PER_TOKEN, price_per_token

    role = user_role(binding, spec)
    template = load_template(root / "prompts" / "simulator.j2")
    attempts = int(RunConfig.model_fields["simulator_retries"].default) + 1
    turns, prompt_chars = 0, 0
    for chat in sample.chats:
        case = chat_case(spec, chat)
        for target in targets(chat):
            turns += 1
            prompt_chars += sum(len(m["content"]) for m in simulator_messages(template, case, list(target.history), 40, ""))
    calls, input_tokens = turns * attempts, attempts * -(-prompt_chars // CHARS_PER_TOKEN)
    output_tokens = calls * spec.sampling.max_tokens
    price, source = price_per_token(role)
    cost = None if price is None else input_tokens * price[0] + output_tokens * price[1]
    console.print(f"dry run: {len(sample.chats)} chat(s), {turns} seeker turn(s) to replay with {role.name}; at most "
                  f"{calls:,} calls ({attempts} per turn with retries), {input_tokens:,} input and {output_tokens:,} "
                  f"output tokens; cost {'unknown (no price for this model)' if cost is None else f'{cost:.4f} USD'}"
                  f"{'' if cost is None else f' (price from {source})'}", highlight=False, soft_wrap=True)
    return {"chats": len(sample.chats), "turns": turns, "calls": calls, "input_tokens": input_tokens,
            "output_tokens": output_tokens, "cost_usd": cost}


def _audit(spec: SeekerSpec, chat: EsconvChat) -> Callable[[str, str], bool]:
    from emobench.judging.audit import out_of_character

    case = chat_case(spec, chat)

    def flagged(text: str, previous_reply: str) -> bool:
        return out_of_character(text, previous_reply, case) is not None

    return flagged


def fidelity_replay_report(
    dataset: str, data: Path | None, binding: str | None, *, splits: str, limit: int | None, seed: int, n_boot: int,
    root: Path, cache: ResponseCache | None, out_dir: Path, dry_run: bool, tick: Callable[[str, int, int], None],
) -> dict[str, Any] | None:
    """The fidelity_replay block of validity.json; None after a dry run, which calls no model."""
    if dataset not in DATASETS:
        raise InputError("--fidelity-replay", "", f"unknown data set {dataset!r}; use {', '.join(DATASETS)}")
    if data is None:
        raise InputError("--data", "", "missing: pass the folder holding your ESConv files (docs/validity.md)")
    if binding is None:
        raise InputError("--user", "", "missing: the simulator to replay the seekers with, e.g. vllm:embedded")
    sample = load_esconv(data, splits=parse_splits(splits), limit=limit, seed=seed)
    chats = [c for c in sample.chats if targets(c)]
    if not chats:
        raise InputError(data, "", "no chat with two or more seeker turns to replay")
    spec = load_spec()
    role = user_role(binding, spec)
    if dry_run:
        _dry_run(sample, spec, binding, root, Console())
        return None
    from emobench.validation.fidelity.compare import _tracker_readings

    template = load_template(root / "prompts" / "simulator.j2")
    started = time.perf_counter()
    results, provenance = asyncio.run(replay(chats, role, spec, template, cache=cache, log_dir=out_dir / "logs",
                                             done_file=out_dir / RESULTS_FILE, seed=seed, tick=tick))
    wall = round(time.perf_counter() - started, 1)
    rows, summaries = [], []
    for chat, result in zip(chats, results, strict=True):
        chat_rows, summary = rows_of(chat, result)
        rows += chat_rows
        summaries.append(summary)
    texts = {r.real for r in rows} | {r.simulated for r in rows if r.simulated is not None}
    valences, embeddings, tracker = _tracker_readings(texts)
    flagged = _audit(spec, chats[0])
    block = {"all": figures(rows, summaries, valences, embeddings, flagged, n_boot=n_boot, seed=seed)}
    for source in sorted({c.source for c in chats}):
        block[source] = figures([r for r in rows if r.source == source], [s for s in summaries if s.source == source],
                                valences, embeddings, flagged, n_boot=n_boot, seed=seed)
    return {
        "dataset": dataset,
        "source": SOURCE,
        "data": {"folder": str(data), "layout": sample.layout, "files": list(sample.files), "notes": list(sample.notes)},
        "splits": sorted(parse_splits(splits)),
        "limit": limit,
        "seed": seed,
        "n_boot": n_boot,
        "chats": [c.chat_id for c in chats],
        "stand_in": spec.provenance,
        **provenance,
        "tracker": tracker,
        "cost": {"n_calls": sum(r.n_calls for r in results), "n_cached": sum(r.n_cached for r in results),
                 "prompt_tokens": sum(r.prompt_tokens for r in results),
                 "completion_tokens": sum(r.completion_tokens for r in results), "wall_s": wall},
        "figures": block,
    }


def _ci(stat: dict[str, Any], digits: int = 2) -> str:
    if stat.get("value") is None:
        return "–"
    ci = f" [{stat['lo']:.{digits}f}, {stat['hi']:.{digits}f}]" if stat.get("lo") is not None else ""
    return f"{stat['value']:.{digits}f}{ci}"


def _rate(p: dict[str, Any]) -> str:
    return "–" if p["rate"] is None else f"{p['rate']:.2f} [{p['lo']:.2f}, {p['hi']:.2f}] of {p['n']}"


def replay_lines(block: dict[str, Any]) -> list[str]:
    lines = [f"fidelity replay ({block['dataset']}, {block['data']['layout']} layout; simulator "
             f"{block['user']['label']}): {len(block['chats'])} chat(s); {', '.join(block['data']['notes']) or 'no notes'}"]
    for source, f in block["figures"].items():
        d = f["discriminator"]
        auc = "–" if d["auc"] is None else f"{d['auc']:.3f} [{d['lo']:.3f}, {d['hi']:.3f}]"
        w = f["turn_words"]
        mf = f["meter_feedback"]
        label = f" ({mf['label']})" if mf.get("label") else ""
        lines += [
            f"  {source}: {f['n_chats']} chat(s), {f['n_turns']} seeker turn(s), invalid {_rate(f['invalid'])}",
            f"    discriminator AUC {auc} (0.5 = indistinguishable; folds by chat)",
            f"    words per turn: real median {w['human']['median']}, simulated median {w['simulator']['median']}",
            f"    question rate: real {_rate(f['question_rate']['real'])}, simulated {_rate(f['question_rate']['simulated'])}",
            f"    valence: simulated − real {_ci(f['valence']['paired_difference'], 3)}, ρ {_ci(f['valence']['spearman'])}",
            f"    meter change vs feedback{label}: ρ {_ci(mf['spearman'])}, τ-b {_ci(mf['kendall_tau_b'])}, "
            f"N = {mf['n']} point(s) in {mf['n_chats']} chat(s)",
            f"    final meter vs intensity drop: ρ {_ci(f['meter_intensity']['spearman'])}, "
            f"N = {f['meter_intensity']['n']} chat(s)",
            f"    leaves where the person went on {_rate(f['leave'])}; out of character: simulated "
            f"{_rate(f['out_of_character']['simulated'])}, real {_rate(f['out_of_character']['real'])}",
        ]
    return lines


def print_replay(block: dict[str, Any], console: Console) -> None:
    for line in replay_lines(block):
        console.print(line, soft_wrap=True, markup=False, highlight=False)
