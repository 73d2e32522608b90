"""`emobench run --dry-run`: what a run would ask of each role, before any model call.

The counts follow the episode loop and the judging stage. Per episode of T = max_turns turns:
the subject answers T times and, with the probe on, the probe once; the simulator writes turns
2..T (turn 1 is the case's authored opening); each judge rates every turn (MDEP) and the whole
episode (holistic); an LLM director acts after every turn; each judge compares every planned
pair of subjects' episodes of a (case, seed) in both orders. Every call whose output is
validated may be retried (judge_retries, simulator_retries, director_retries), and the figures
count every retry: they are the most a run can make, reached when every episode runs to the
turn limit and every output is retried. HTTP retries of transient failures are not counted.

Tokens: completion tokens at most each role's max_tokens per call; prompt tokens are the
templates rendered for each case (about 4 characters a token) plus the transcript so far, each
user message at the simulator's max_tokens and each reply at the subject's. The share of each
role's prompt tokens a provider's prompt cache would hold comes from run/cache_estimate.py; the
cost with the cache prices that share at the role's cached rate. With `run --batch` the judges'
holistic and pairwise calls (not the per-turn ones) cost the batch share of that, as the run's
accounting prices a batched call (config.Price.cost_usd).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from emobench.config import BATCH_PRICE_SHARE, RoleConfig, RunConfig
from emobench.endpoints.binding import parse_binding
from emobench.episode.director import DirectorState, director_messages
from emobench.episode.roles import EpisodePrompts
from emobench.episode.simulator import simulator_messages
from emobench.episode.stepper import subject_conversation
from emobench.judging.mdep import judge_messages
from emobench.prompts import PromptTemplate, cases_language, load_language_template
from emobench.registry import Case
from emobench.run.adaptive import MEDIAN_CASE_SHARE
from emobench.run.batch_judging import can_batch
from emobench.run.cache_estimate import cacheable_shares
from emobench.run.preflight import preflight
from emobench.run.runner import _check_resume, in_shard, load_prompts, run_registry, select_cases
from emobench.rundir import RunDir

CHARS_PER_TOKEN = 4


@dataclass
class RoleLoad:
    """The most one role (one subject, the user, one judge, the director) is asked."""

    role: str
    config: RoleConfig
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    deferred: tuple[int, int, int] = (0, 0, 0)  # the calls, input and output tokens `run --batch` sends in batches

    def add(self, calls: int, prompt_tokens: int, deferred: bool = False) -> None:
        """``calls`` requests carrying ``prompt_tokens`` between them, each up to max_tokens long;
        ``deferred``: judging off the episode's critical path (holistic, pairwise)."""
        self.calls += calls
        self.input_tokens += prompt_tokens
        self.output_tokens += calls * self.config.sampling.max_tokens
        if deferred:
            c, i, o = self.deferred
            self.deferred = (c + calls, i + prompt_tokens, o + calls * self.config.sampling.max_tokens)


@dataclass
class Estimate:
    config: RunConfig
    cases: int
    episodes: int
    roles: list[RoleLoad] = field(default_factory=list)
    cacheable: dict[str, float] = field(default_factory=dict)  # role -> share of its prompt tokens a cache holds


def _tokens(messages: Sequence[dict[str, str]] | str) -> int:
    text = messages if isinstance(messages, str) else "".join(m["content"] for m in messages)
    return -(-len(text) // CHARS_PER_TOKEN)


def _ramp(turns: int, fixed: int, per_turn: int, first: int = 1) -> int:
    """Prompt tokens of one call per turn t = first..turns, each carrying fixed + t * per_turn."""
    ts = range(first, turns + 1)
    return len(ts) * fixed + per_turn * sum(ts)


@dataclass(frozen=True)
class _Templates:
    episode: EpisodePrompts
    holistic: PromptTemplate
    pairwise: PromptTemplate


def _case_context(case: Case) -> dict[str, Any]:
    return {"persona": case.persona, "scenario": case.scenario}


def _episode(est: Estimate, loads: dict[str, RoleLoad], t: _Templates, case: Case, subject: RoleLoad) -> None:
    """Add one episode (subject, case, seed) at its most: every turn played, every retry made."""
    cfg, prompts, turns = est.config, t.episode, est.config.max_turns
    user, judges = loads["user"], [loads[f"judge:{i}"] for i in range(len(cfg.judges))]
    per_turn = user.config.sampling.max_tokens + subject.config.sampling.max_tokens  # one user message, one reply
    sim, jud, dire = cfg.simulator_retries + 1, cfg.judge_retries + 1, cfg.director_retries + 1
    if parse_binding(subject.config.binding).kind != "scripted":  # a scripted subject answers in-process
        fixed = _tokens(subject_conversation(prompts, [])) + user.config.sampling.max_tokens
        subject.add(turns, _ramp(turns, fixed - per_turn, per_turn))  # turn t carries t-1 earlier turns
        if prompts.probe is not None:
            subject.add(sim, sim * (_tokens(subject_conversation(prompts, [])) + turns * per_turn
                                    + _tokens(prompts.probe.block("user"))))
    meter = case.persona.meter_start
    simulator_fixed = _tokens(simulator_messages(prompts.simulator, case, [], meter, ""))
    user.add(sim * (turns - 1), sim * _ramp(turns - 1, simulator_fixed, per_turn))  # turn t+1 sees t turns
    mdep_fixed = _tokens(judge_messages(prompts.judge, case, [], ""))
    holistic_fixed = _tokens(t.holistic.case_system(case) + t.holistic.block(
        "user", transcript=[], left_with="", **_case_context(case)))
    for judge in judges:
        judge.add(jud * turns, jud * _ramp(turns, mdep_fixed, per_turn))
        if cfg.panel.holistic:
            judge.add(jud, jud * (holistic_fixed + turns * per_turn), deferred=True)
    if cfg.director is not None and prompts.director is not None:
        state = DirectorState(turn=0, max_turns=turns, meter=meter)
        fixed = _tokens(director_messages(prompts.director, case, state, []))
        loads["director"].add(dire * turns, dire * _ramp(turns, fixed, per_turn))


def _pairs(subjects: Sequence[RoleLoad], references: Sequence[str] | None) -> list[tuple[RoleLoad, RoleLoad]]:
    """The subject pairs the judging stage compares for every (case, seed) (pairwise.plan_pairs)."""
    refs = set(references or ())
    return [
        (x, y) for i, x in enumerate(subjects) for y in subjects[i + 1:]
        if not refs or x.config.name in refs or y.config.name in refs
    ]


def _pairwise(est: Estimate, loads: dict[str, RoleLoad], t: _Templates, case: Case, pair: tuple[RoleLoad, RoleLoad]) -> None:
    cfg, turns = est.config, est.config.max_turns
    conversations = [{"lines": [], "left": False}] * 2
    fixed = _tokens(t.pairwise.case_system(case) + t.pairwise.block(
        "user", conversations=conversations, **_case_context(case)))
    user_budget = loads["user"].config.sampling.max_tokens
    transcripts = sum(turns * (user_budget + s.config.sampling.max_tokens) for s in pair)
    attempts = 2 * (cfg.judge_retries + 1)  # both orders
    for i in range(len(cfg.judges)):
        loads[f"judge:{i}"].add(attempts, attempts * (fixed + transcripts), deferred=True)


def estimate(
    cfg: RunConfig,
    root: Path,
    *,
    shard: tuple[int, int] | None = None,
    resume: RunDir | None = None,
    force: bool = False,
    out_dir: Path = Path("runs"),
    note: Callable[[str], None] | None = None,
) -> Estimate:
    """Run the whole preflight a run runs before its first call (keys, endpoints, templates, the
    tracker), then count the run's calls and tokens at most. A resumed run is checked against
    the run directory, and its finished episodes are not counted."""
    registry = run_registry(cfg, root)
    cases = select_cases(registry, cfg)
    done = set()
    if resume is not None:
        _check_resume(resume, cfg, registry.version(cfg.split), True, force)
        done = resume.done_keys()
    preflight(roles=cfg.bindings(), panel=cfg.panel, scoring_profile=cfg.scoring_profile,
              out_dir=resume.path if resume else out_dir, root=root, source="config", note=note)
    language = cases_language(cases)
    judges_language = cfg.judges_language(language)
    templates = _Templates(
        episode=load_prompts(root, cfg, language),
        holistic=load_language_template(root, "judges", cfg.panel.rubrics["holistic"], judges_language),
        pairwise=load_language_template(root, "judges", cfg.panel.rubrics["pairwise"], judges_language),
    )
    subjects = [RoleLoad("subject", s) for s in cfg.subjects]
    loads = {"user": RoleLoad("user", cfg.user)}
    loads |= {f"judge:{i}": RoleLoad("judge", j) for i, j in enumerate(cfg.judges)}
    if cfg.director is not None:
        loads["director"] = RoleLoad("director", cfg.director)
    pairs = _pairs(subjects, cfg.panel.reference_subjects) if cfg.panel.pairwise else []
    est = Estimate(cfg, cases=len(cases), episodes=0, roles=[*subjects, *loads.values()])
    if cases:
        replies = {"subject": max(s.sampling.max_tokens for s in cfg.subjects), "user": cfg.user.sampling.max_tokens}
        est.cacheable = cacheable_shares(templates.episode, templates.holistic, cases[0], cfg.max_turns, replies,
                                         cfg.director is not None)
    for case in cases:
        for seed in (s for s in cfg.seeds if in_shard(case.id, s, shard)):
            new = {s.config.name for s in subjects if f"{s.config.name}|{case.id}|{seed}" not in done}
            for subject in (s for s in subjects if s.config.name in new):
                est.episodes += 1
                _episode(est, loads, templates, case, subject)
            for pair in (p for p in pairs if {p[0].config.name, p[1].config.name} & new):
                _pairwise(est, loads, templates, case, pair)
    return est


def price_per_token(role: RoleConfig) -> tuple[tuple[float, float, float] | None, str]:
    """(input, output, cached input) US dollars per token and where they come from: the role's
    price, else litellm's price map (read offline); None for a model with no price. With no
    cached rate, cached input costs the input price."""
    if (price := role.price) is not None:
        cached = price.input_per_mtok if price.cached_prompt_per_mtok is None else price.cached_prompt_per_mtok
        return (price.input_per_mtok / 1e6, price.output_per_mtok / 1e6, cached / 1e6), "config"
    binding = parse_binding(role.binding)
    if binding.kind in ("vllm", "scripted"):
        return (0.0, 0.0, 0.0), "local"
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the map at import
    import litellm  # imported here: it takes seconds

    names = [binding.model, binding.model.split("/", 1)[-1]] if binding.kind == "litellm" else [binding.model]
    for name in names:
        entry = litellm.model_cost.get(name)
        if entry and "input_cost_per_token" in entry and "output_cost_per_token" in entry:
            rate = float(entry["input_cost_per_token"])
            cached = float(entry.get("cache_read_input_token_cost") or rate)
            return (rate, float(entry["output_cost_per_token"]), cached), "litellm"
    return None, "none"


def cached_cost(load: RoleLoad, calls: int, input_tokens: int, output_tokens: int, share: float) -> float | None:
    """US dollars of these calls of a role with ``share`` of their prompt tokens read from the
    prompt cache at its cached rate; None for a role with no price."""
    price, _ = price_per_token(load.config)
    if price is None or not calls:
        return None if price is None else 0.0
    return input_tokens * (price[0] - share * (price[0] - price[2])) + output_tokens * price[1]


def batch_judging(est: Estimate) -> tuple[int, float] | None:
    """With the prompt cache and `run --batch`: the calls sent in batches, and the priced roles'
    cost, their batched calls at the batch share; None when a judge has no Batch API (--batch is
    refused) or no calls go in batches."""
    if not all(can_batch(j.binding) for j in est.config.judges) or not any(r.deferred[0] for r in est.roles):
        return None
    total = 0.0
    for load in est.roles:
        share = est.cacheable.get(load.role, 0.0)
        whole = cached_cost(load, load.calls, load.input_tokens, load.output_tokens, share)
        deferred = cached_cost(load, *load.deferred, share)
        if whole is not None and deferred is not None:
            total += whole - (1 - BATCH_PRICE_SHARE) * deferred
    return sum(r.deferred[0] for r in est.roles), total


def _usd(amount: float) -> str:
    return f"{amount:,.2f}" if amount >= 10 else f"{amount:.4f}"  # cents hide a small run's cost


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], totals: Sequence[str]) -> Table:
    """Headers wrap at their spaces; the numbers keep their whole width; the labels fold."""
    table = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        if column in ("role", "label", "price\nfrom"):
            table.add_column(column, overflow="fold", no_wrap=column != "label")
        else:
            table.add_column(column, justify="right", no_wrap=True, min_width=max(len(row[i]) for row in (*rows, totals)))
    for row in rows:
        table.add_row(*row)
    table.add_section()
    table.add_row(*totals)
    return table


def print_estimate(est: Estimate, console: Console) -> None:
    """The table of calls, tokens and costs. Numbers are never cut (a narrow terminal folds the
    labels instead); the total costs what is priced, and the roles not priced are named once."""
    cfg = est.config
    console.print(
        f"dry run, config {cfg.config_hash()}: {est.cases} case(s) of split {cfg.split} × {len(cfg.seeds)} seed(s) × "
        f"{len(cfg.subjects)} subject(s) = {est.episodes} episode(s), at most {cfg.max_turns} turns each",
        highlight=False, soft_wrap=True,
    )
    rows, total, priced, unpriced, cached = [], 0.0, 0, [], []
    for load in est.roles:
        price, source = price_per_token(load.config)
        cost = None if price is None else load.input_tokens * price[0] + load.output_tokens * price[1]
        held = round(load.input_tokens * est.cacheable.get(load.role, 0.0))
        # The prompt cache's held tokens cost the cached rate instead of the input rate.
        cached.append((load, held, None if cost is None or price is None else cost - held * (price[0] - price[2])))
        if cost is None and load.calls:
            unpriced.append(load.config.name)
        elif cost is not None and load.calls:
            total, priced = total + cost, priced + 1
        rows.append((load.role, load.config.name, f"{load.calls:,}", f"{load.input_tokens:,}",
                     f"{load.output_tokens:,}", "–" if cost is None else _usd(cost), source))
    unpriced = list(dict.fromkeys(unpriced))  # roles on one binding share its label
    calls = sum(load.calls for load in est.roles)
    totals = ("total", "", f"{calls:,}", f"{sum(r.input_tokens for r in est.roles):,}",
              f"{sum(r.output_tokens for r in est.roles):,}", _usd(total) if priced else "–", "")
    table = _table("At most, when every episode runs to the turn limit and every output is retried",
                   ("role", "label", "calls", "input\ntokens", "output\ntokens", "cost\n(USD)", "price\nfrom"), rows, totals)
    console.print(table)
    prompt = sum(r.input_tokens for r in est.roles)
    cache_rows = [(load.role, load.config.name, f"{held / load.input_tokens:.0%}" if load.input_tokens else "–",
                   f"{held:,}", "–" if cost is None else _usd(cost)) for load, held, cost in cached]
    cache_total = sum(cost for load, _, cost in cached if cost is not None and load.calls)
    held_all = sum(held for _, held, _ in cached)
    table = _table("The same with a prompt cache (OpenAI's granularity: from 1,024 tokens, in 128-token blocks)",
                   ("role", "label", "cached\nshare", "cached input\ntokens", "cost\n(USD)"), cache_rows,
                   ("total", "", f"{held_all / prompt:.0%}" if prompt else "–", f"{held_all:,}",
                    _usd(cache_total) if priced else "–"))
    console.print(table)
    batch = batch_judging(est)
    if batch is not None:
        dollars = f", ${_usd(batch[1])} with the prompt cache" if priced else ""
        console.print(f"With --batch: {batch[0]:,} of the calls (the holistic and pairwise judging) go through the "
                      f"Batch API at {BATCH_PRICE_SHARE:.0%} of their price{dollars}; the per-turn judge stays direct "
                      "(docs/cost.md).", highlight=False, soft_wrap=True)
    if len(cfg.subjects) > 1:  # a comparison: what an adaptive run would ask
        share = MEDIAN_CASE_SHARE
        dollars = f", ${_usd(total * share)}, ${_usd(cache_total * share)} with the prompt cache" if priced else ""
        if priced and batch is not None:
            dollars += f", ${_usd(batch[1] * share)} with the prompt cache and --batch"
        console.print(f"Adaptive (--stop-when pairs-resolved): the median pair of EMPA's models was resolved after "
                      f"{share:.0%} of the cases (docs/adaptive.md), so about {round(calls * share):,} calls, "
                      f"{round(prompt * share):,} input and {round(sum(r.output_tokens for r in est.roles) * share):,} "
                      f"output tokens{dollars} (the priced roles).", highlight=False, soft_wrap=True)
    priced_note = ""
    if unpriced:
        covers = f"The total cost covers the {priced} priced role(s) only. " if priced else ""
        priced_note = (f" {covers}Not priced: {', '.join(unpriced)}; give the role a price: "
                       "{input_per_mtok: X, output_per_mtok: Y} (US dollars per million tokens).")
    console.print(f"Input tokens are estimated at {CHARS_PER_TOKEN} characters a token; the cached share is the part "
                  "of each role's prompt tokens such a cache holds (run/cache_estimate.py), at the role's "
                  "cached_prompt_per_mtok. No model was called, "
                  "no server started, nothing written." + priced_note, highlight=False, soft_wrap=True)
