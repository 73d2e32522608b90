"""The ESConv judge check's printed table (panels side by side with the baselines) and its
`--dry-run`: the calls and tokens each judge would be asked for, and what they would cost."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from emobench.config import PanelConfig, RunConfig
from emobench.run.dry_run import CHARS_PER_TOKEN, RoleLoad, price_per_token
from emobench.validation.esconv.check import SURVEY, Inputs, transcript

BASELINES = ("reply_words", "valence_change")


def _ci(stat: dict[str, Any] | None) -> str:
    if not stat or stat.get("value") is None:
        return "–"
    lo, hi = stat.get("lo"), stat.get("hi")
    return f"{stat['value']:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else "")


def _rows(figures: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], int]]:
    """(figure, statistic, value with CI, N) of one scorer's block."""
    turn = figures["per_turn"]
    rows = [("per turn: feedback", "Spearman ρ", turn["spearman"], turn["n_valid"]),
            ("", "Kendall τ-b", turn["kendall"], turn["n_valid"])]
    for item in SURVEY:
        chat = figures["per_chat"][item]
        rows.append((f"per chat: {item.replace('_', ' ')}", "Spearman ρ", chat["spearman"], chat["n_valid"]))
    a = figures["auc_esconv_vs_failed"]
    rows.append(("chats: ESConv vs failed", "AUC", a, a["n_positive"] + a["n_negative"]))
    return rows


def print_esconv(block: dict[str, Any], console: Console) -> None:
    """One column per panel, beside reply length, valence change and a constant, overall and by experience type."""
    panels = block["panels"]
    label = f" ({block['feedback_label']})" if block["feedback_label"] else ""
    sample = f"{block['limit']} chats per file, seed {block['seed']}" if block["limit"] else "all chats"
    for scope in ["all", *next(iter(panels.values()))["by_experience_type"]]:
        def pick(scorer: dict[str, Any], scope: str = scope) -> dict[str, Any]:
            return scorer["all"] if scope == "all" else scorer["by_experience_type"][scope]

        title = "all chats" if scope == "all" else scope
        table = Table(title=f"Judges against ESConv seekers' own ratings: {title} ({sample}; per-turn feedback{label})")
        for column in ("figure", "statistic", "N"):
            table.add_column(column)
        for name in (*panels, "reply length", "valence change", "constant"):
            table.add_column(name, justify="right")
        scorers = [pick(p) for p in panels.values()] + [pick(block["baselines"][b]) for b in BASELINES]
        per_scorer = [_rows(s) for s in scorers]
        constant = block["baselines"]["constant"]
        for k, (figure, statistic, _, n) in enumerate(per_scorer[0]):
            fixed = f"{constant['auc']:.2f}" if statistic == "AUC" else "0.00"
            table.add_row(figure, statistic, str(n), *(_ci(rows[k][2]) for rows in per_scorer), fixed)
        console.print(table)
    for note in block["data"]["notes"]:
        console.print(f"note: {note}", soft_wrap=True)
    for name, p in panels.items():
        c = p["cost"]
        console.print(f"{name}: {c['n_calls']} calls ({c['n_cached']} cached), "
                      f"{c['prompt_tokens'] + c['completion_tokens']} tokens, {c['wall_s']} s", highlight=False)


def _tokens(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN + 1


def estimate(inp: Inputs, panels: list[tuple[str, PanelConfig]], root: Any) -> list[tuple[str, RoleLoad]]:
    """The most each judge of each panel is asked: every wanted reply (MDEP) and every chat
    (holistic), each output retried judge_retries times."""
    from emobench.judging.mdep import judge_messages
    from emobench.prompts import load_template

    attempts = 1 + int(RunConfig.model_fields["judge_retries"].default)
    out = []
    for label, panel in panels:
        mdep = load_template(root / "judges" / panel.rubrics["mdep"])
        holistic = load_template(root / "judges" / panel.rubrics["holistic"])
        prompt, calls = 0, 0
        for chat in inp.chats:
            case = inp.cases[chat.chat_id]
            for i in sorted(inp.wanted[chat.chat_id]):
                reply = inp.replies[chat.chat_id][i]
                prompt += _tokens(judge_messages(mdep, case, transcript(case, chat, reply.start), reply.text))
                calls += 1
            whole = transcript(case, chat, len(chat.turns))
            prompt += _tokens([{"content": holistic.case_system(case)}, {"content": holistic.block(
                "user", transcript=whole, left_with="", persona=case.persona, scenario=case.scenario)}])
            calls += 1
        for role in panel.judges:
            load = RoleLoad(role=f"{label} judge", config=role)
            load.add(calls * attempts, prompt * attempts)
            out.append((label, load))
    return out


def print_estimate(inp: Inputs, loads: list[tuple[str, RoleLoad]], console: Console) -> None:
    console.print(f"dry run: {len(inp.chats)} chat(s), {len(inp.points)} feedback point(s), "
                  f"{sum(len(v) for v in inp.wanted.values())} repl(ies) to rate per judge", highlight=False)
    table = Table(title="At most, when every output is retried", title_justify="left")
    for column in ("panel", "judge", "calls", "input tokens", "output tokens", "cost (USD)", "price from"):
        table.add_column(column, justify="right" if column[0] in "cio" else "left")
    for label, load in loads:
        price, source = price_per_token(load.config)
        cost = "–" if price is None else f"{load.input_tokens * price[0] + load.output_tokens * price[1]:.4f}"
        table.add_row(label, load.config.name, f"{load.calls:,}", f"{load.input_tokens:,}", f"{load.output_tokens:,}",
                      cost, source)
    console.print(table)
