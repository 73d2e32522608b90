"""`emobench show`: a run's episodes in the terminal, as a list or one conversation turn by turn."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from emobench.publish.columns import SUBJECT_MIN, columns_to_drop, not_shown
from emobench.viewer.episodes import AXES, EpisodeRow, EpisodeView, JudgeLevels, RunView, TurnView, flag_summary


def num(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _yes_no(x: bool | None) -> Text:
    if x is None:
        return Text("–")
    return Text("yes", style="green") if x else Text("no", style="red")


def episode_table(run: RunView, rows: Sequence[EpisodeRow], width: int = 200) -> Table:
    title = f"{run.run_id}: {len(rows)} of {len(run.rows)} episodes"
    if run.panel:
        title += f" (panel {run.panel})"
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title_justify="left")
    cells = {
        "#": [str(i) for i in range(1, len(rows) + 1)], "Case": [r.case_id for r in rows],
        "Subject": [r.subject for r in rows], "Seed": [str(r.seed) for r in rows], "Stop": [r.stop_reason for r in rows],
        "Turns": [str(r.n_turns) for r in rows], "EPM-Q": [num(r.epmq) for r in rows],
        "Success": ["–" if r.success is None else "yes" if r.success else "no" for r in rows],
        "Meter": [num(r.final_meter, 0) for r in rows],
        # A narrow terminal gets the flags' count.
        "Audit": [(flag_summary(r.audit) if width >= 120 else str(len(r.audit))) if r.audit else "–" for r in rows],
    }
    # Case and Subject fold onto more lines rather than push out a column; the least useful
    # columns go first on a narrow terminal, never the key ones (case, subject, EPM-Q, success).
    widths = {h: max(len(h), *(len(c) for c in col)) + 2 for h, col in cells.items()}  # with the padding
    widths["Subject"] = min(widths["Subject"], SUBJECT_MIN)
    dropped = columns_to_drop(widths, ("Audit", "Meter", "Seed", "Turns", "#", "Stop"), width)
    for header in cells:
        if header not in dropped:
            folds = header in ("Case", "Subject", "Stop")
            table.add_column(header, justify="left" if folds or header in ("Success", "Audit") else "right",
                             overflow="fold", no_wrap=not folds, min_width=SUBJECT_MIN - 2 if header == "Subject" else None)
    for i, r in enumerate(rows):
        row = {h: Text(col[i]) for h, col in cells.items()}
        row["Success"] = _yes_no(r.success)
        row["Audit"].stylize("yellow" if r.audit else "dim")
        table.add_row(*(row[h] for h in cells if h not in dropped))
    table.caption = "key: subject|case|seed · show one: --episode KEY or --case C --seed S --subject M"
    if dropped:
        table.caption += f"\n{not_shown(dropped, width)}"
    table.caption_justify = "left"
    return table


def _levels(progress: Sequence[int | None] | None, regression: Sequence[int | None] | None) -> Text:
    if progress is None or regression is None:
        return Text("invalid", style="red")
    out = Text()
    for axis, p, r in zip(AXES, progress, regression, strict=True):
        out.append(f"{axis} ", style="bold")
        out.append(f"+{'–' if p is None else p}", style="green" if p else "")
        out.append("/")
        out.append(f"−{'–' if r is None else r}", style="red" if r else "")
        out.append("  ")
    return out


def _judge_line(j: JudgeLevels) -> Text:
    line = Text(f"{j.judge}: ", style="dim")
    if not j.valid:
        return line.append(f"invalid ({j.error or 'no verdict'})", style="red")
    return line.append_text(_levels(j.progress, j.regression))


def _turn(turn: TurnView, evidence: bool) -> Panel:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    delta = f"{turn.meter_delta:+d}"
    grid.add_row("user", Text(turn.user))
    if turn.inner:
        grid.add_row("", Text(f"(inner: {turn.inner})", style="dim italic"))
    grid.add_row("subject", Text(turn.reply, style="cyan"))
    grid.add_row("director", Text(turn.director or "–"))
    grid.add_row("meter", Text(f"{turn.meter:.0f} ({delta})"))
    if turn.progress[0] is None:
        grid.add_row("MDEP", Text("no valid verdict", style="red"))
    else:
        grid.add_row("MDEP", _levels(turn.progress, turn.regression).append("(median)", style="dim"))
    for j in turn.judges:
        grid.add_row("", _judge_line(j))
        if evidence and j.valid:
            for axis, ev in zip(AXES, j.evidence, strict=True):
                if ev:
                    grid.add_row("", Text(f"  {axis}: {ev}", style="dim"))
    p = "–" if turn.p is None else "(" + ", ".join(f"{x:.1f}" for x in turn.p) + ")"
    grid.add_row("EPM", Text(f"ΔE {num(turn.delta_e, 2)}  E {num(turn.energy, 2)}  P {p}"))
    return Panel(grid, title=f"turn {turn.index}", title_align="left", box=box.ROUNDED, padding=(0, 1))


def _ending(ep: EpisodeView, evidence: bool) -> list[RenderableType]:
    r = ep.row
    parts: list[RenderableType] = []
    if ep.last_user:
        parts.append(Text.assemble(("user (left, no reply): ", "bold"), ep.last_user))
    success_turn = f" at turn {ep.success_turn}" if ep.success_turn else ""
    parts.append(Text.assemble(
        ("stop: ", "bold"), (r.stop_reason, "bold magenta"), f"  status {r.status or '–'}{success_turn}",
        "  success ", _yes_no(r.success), f"  EPM-Q {num(r.epmq)}  final meter {num(r.final_meter, 0)}",
    ))
    if ep.holistic:
        dims = list(dict.fromkeys(d for v in ep.holistic for d in (v.scores or {})))
        table = Table(title="holistic verdicts", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("judge")
        for d in dims:
            table.add_column(d, justify="right")
        for v in ep.holistic:
            scores = v.scores or {}
            table.add_row(Text(v.judge), *([Text(str(scores[d].score)) if d in scores else Text("–") for d in dims]
                                          if v.valid else [Text("invalid", style="red")] + [Text("")] * (len(dims) - 1)))
        parts.append(table)
        if evidence:
            for v in ep.holistic:
                for d, s in (v.scores or {}).items():
                    parts.append(Text(f"  {v.judge} {d}: “{s.evidence}” — {s.reason}", style="dim"))
    else:
        parts.append(Text("holistic verdicts: –"))
    if ep.probe:
        table = Table(title="persona probe vs hidden card", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for header in ("item", "answer", "card", ""):
            table.add_column(header)
        for line in ep.probe:
            mark = Text("–") if line.correct is None else Text("✓", style="green") if line.correct else Text("✗", style="red")
            table.add_row(Text(line.item), Text(line.answer), Text(line.truth), mark)
        parts.append(table)
        if ep.probe_rationale:
            parts.append(Text(f"  rationale: {ep.probe_rationale}", style="dim"))
    else:
        parts.append(Text("persona probe: –"))
    if ep.audit:
        parts.append(Text("audit flags:", style="bold yellow"))
        for f in ep.audit:
            parts.append(Text(f"  {f.kind} (turn {f.turn if f.turn is not None else '–'}): {f.detail}", style="yellow"))
    return parts


def episode_view(ep: EpisodeView, *, evidence: bool = False) -> Group:
    r = ep.row
    head = Text.assemble(
        (f"{r.case_id}", "bold"), f" · {r.subject} · seed {r.seed} · scenario {ep.scenario_id} · persona {ep.persona_id}",
        f" · P0 ({', '.join(f'{x:g}' for x in ep.p0)})",
    )
    return Group(head, *(_turn(t, evidence) for t in ep.turns), *_ending(ep, evidence))


def print_paged(console: Console, renderable: RenderableType, *, pager: bool | None) -> None:
    """Page long output on a terminal (rich's pager: $PAGER, else less); plain print otherwise."""
    use_pager = console.is_terminal if pager is None else pager
    if use_pager:
        with console.pager(styles=True):
            console.print(renderable)
    else:
        console.print(renderable)

