"""What a run's calls cost: tokens per role and model (the prompt cache's share among them),
latency percentiles, dollars where a role has a price, and the closing line about them."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from emobench.config import Price
from emobench.records import Episode, EpisodeJudgement, ModelCall


def accounting(
    episodes: list[Episode], judgements: list[EpisodeJudgement] | None = None, prices: dict[str, Price] | None = None,
    pairwise: Sequence[ModelCall] = (),
) -> dict[str, Any]:
    """Tokens per role and model, latency percentiles, and cost where the role has a price: every
    call, the episodes', their judgements' and the pairwise judge's."""
    tokens: dict[str, Counter[str]] = defaultdict(Counter)
    latencies: dict[str, list[float]] = defaultdict(list)
    calls = [c for e in episodes for c in e.calls] + [c for j in judgements or [] for c in j.calls] + list(pairwise)
    for call in calls:
        key = f"{call.role}:{call.model}"
        price = (prices or {}).get(call.label)
        if price is not None and not call.cached:
            cost = price.cost_usd(call.prompt_tokens, call.completion_tokens, call.cached_prompt_tokens,
                                  call.cache_write_tokens, call.batched)
            tokens[key]["cost_usd_micro"] += round(cost * 1e6)
        tokens[key]["calls"] += 1
        tokens[key]["prompt_tokens"] += call.prompt_tokens
        tokens[key]["completion_tokens"] += call.completion_tokens
        tokens[key]["cached_prompt_tokens"] += call.cached_prompt_tokens
        tokens[key]["cache_write_tokens"] += call.cache_write_tokens
        tokens[key]["cached_calls"] += int(call.cached)
        tokens[key]["batched_calls"] += int(call.batched)
        if not call.cached:
            latencies[key].append(call.latency_s)
    out: dict[str, Any] = {}
    for key, counts in sorted(tokens.items()):
        lat = np.asarray(latencies[key]) if latencies[key] else None
        micro = counts.pop("cost_usd_micro", None)
        out[key] = {
            **counts,
            "cost_usd": None if micro is None else micro / 1e6,
            "latency_s": None if lat is None else {f"p{q}": float(np.percentile(lat, q)) for q in (50, 90, 99)},
        }
    return out


def summary_line(report: dict[str, Any]) -> str:
    """Tokens and cost of a run, for the end of the terminal output."""
    accounts = report.get("accounting", {})
    acc = accounts.values()
    prompt = sum(a["prompt_tokens"] for a in acc)
    completion = sum(a["completion_tokens"] for a in acc)
    costs = [a["cost_usd"] for a in acc if a.get("cost_usd") is not None]
    cost = f", cost ${sum(costs):.4f}" if costs else ""
    # A scripted subject's replies (key ROLE:scripted:NAME) are no model call: counted apart.
    scripted = sum(a["calls"] for key, a in accounts.items() if key.split(":", 1)[-1].startswith("scripted:"))
    calls = sum(a["calls"] for a in acc) - scripted
    cached = sum(a.get("cached_calls", 0) for a in acc)
    apart = f", {scripted} scripted (no model)" if scripted else ""
    batched = sum(a.get("batched_calls", 0) for a in acc)
    apart += f", {batched} of them in batches" if batched else ""
    return (
        f"{calls - cached} live model calls, {cached} answered from the response cache{apart}, "
        f"{prompt} prompt ({prompt_cache_note(accounts)}) + {completion} completion tokens{cost}"
    )


def prompt_cache_note(accounts: dict[str, Any]) -> str:
    """How many prompt tokens the providers' prompt caches held (runs older than this record none)."""
    prompt = sum(a["prompt_tokens"] for a in accounts.values())
    cached = sum(a.get("cached_prompt_tokens", 0) for a in accounts.values())
    written = sum(a.get("cache_write_tokens", 0) for a in accounts.values())
    share = f", {cached / prompt:.1%}" if prompt else ""
    return f"{cached} read from the provider's prompt cache{share}" + (f", {written} written to it" if written else "")
