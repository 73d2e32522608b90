"""`emobench calibrate`: rate every case of a split with an IEDR judge and report where it
disagrees with the authored levels (docs/method.md §5.1). It only reports; it changes no card."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich import box
from rich.console import Console
from rich.table import Table

from emobench.cli_support import SplitName
from emobench.judging.iedr import ITEMS, compare, rate_case
from emobench.records import ModelCall, RoleInfo, Sampling
from emobench.registry import Case, IEDRLevels

# Greedy, and room for the notes plus nine levels; the run's 256-token default would truncate.
CALIBRATE_SAMPLING = Sampling(temperature=0.0, max_tokens=1024)
CALIBRATE_RETRIES = 2

Rating = tuple[IEDRLevels | None, list[ModelCall]]


async def rate_split(binding: str, cases: Sequence[Case], seed: int) -> tuple[list[Rating], RoleInfo, str]:
    """Rate every case concurrently (the endpoint's own cap bounds the requests in flight)."""
    # Imported here: the endpoint stack costs a second at import, and the CLI should start fast.
    from emobench.config import RoleConfig
    from emobench.endpoints.pool import EndpointPool
    from emobench.episode.roles import role_caller
    from emobench.library_paths import library_root
    from emobench.prompts import cases_language, load_language_template
    from emobench.user_cache import cache_root

    template = load_language_template(library_root(), "judges", "iedr.j2", cases_language(cases))
    async with AsyncExitStack() as stack:
        pool = EndpointPool(stack, cache_root() / "logs")
        client, info = await pool.resolve(RoleConfig(binding=binding, sampling=CALIBRATE_SAMPLING))
        judge = role_caller("judge", client, info)
        results = await asyncio.gather(
            *(rate_case(judge, template, case, seed, CALIBRATE_RETRIES) for case in cases), return_exceptions=True
        )
    ratings: list[Rating] = []
    for result in results:
        # Every task has finished before the first failure is raised, so nothing is left running.
        if isinstance(result, BaseException):
            raise result
        ratings.append(result)
    return ratings, info, template.ref


def summarise(compared: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """Per-item agreement over the cases with a valid rating, and the share whose band matches."""
    rows = [r for r in compared if r is not None]
    n = len(rows)
    items = {
        item: {
            "exact": sum(r["diff"][item] == 0 for r in rows) / n,
            "within_1": sum(abs(r["diff"][item]) <= 1 for r in rows) / n,
            "mean_diff": sum(r["diff"][item] for r in rows) / n,
        } if n else None
        for item in ITEMS
    }
    return {
        "cases": len(compared),
        "rated": n,
        "invalid": len(compared) - n,
        "disagreements": sum(r["disagree"] for r in rows),
        "band_match": sum(r["band_authored"] == r["band_rated"] for r in rows) / n if n else None,
        "items": items,
    }


def _items_off(row: dict[str, Any]) -> str:
    return ", ".join(f"{item} {row['authored'][item]}→{row['rated'][item]}" for item in ITEMS if row["diff"][item]) or "none"


def _print(
    console: Console, split: str, cases: Sequence[Case], ratings: Sequence[Rating],
    compared: Sequence[dict[str, Any] | None], summary: dict[str, Any],
) -> None:
    disagree = [r for r in compared if r is not None and r["disagree"]]
    table = Table(title=f"IEDR disagreements, split {split}", box=box.SIMPLE_HEAD)
    for column in ("case", "band (authored → rated)", "P0 authored", "P0 rated", "items off (authored→rated)"):
        table.add_column(column)
    for r in disagree:
        table.add_row(
            r["case_id"], f"{r['band_authored']} → {r['band_rated']}",
            str(tuple(r["p0_authored"])), str(tuple(r["p0_rated"])), _items_off(r),
        )
    if disagree:
        console.print(table)
    else:
        console.print(f"No disagreements in split {split}.")

    agreement = Table(title="Agreement per item", box=box.SIMPLE_HEAD)
    agreement.add_column("item")
    for column in ("exact", "within 1", "mean rated − authored"):
        agreement.add_column(column, justify="right")
    for item, stats in summary["items"].items():
        if stats is not None:
            agreement.add_row(item, f"{stats['exact']:.0%}", f"{stats['within_1']:.0%}", f"{stats['mean_diff']:+.2f}")
    if summary["rated"]:
        console.print(agreement)
        console.print(f"band matches in {summary['band_match']:.0%} of {summary['rated']} rated case(s); "
                      f"{summary['disagreements']} disagreement(s)")
    for case, (levels, calls) in zip(cases, ratings, strict=True):
        if levels is None:
            console.print(f"{case.id}: no valid rating after {len(calls)} attempt(s): {calls[-1].error}", markup=False)


def calibrate(
    split: Annotated[SplitName, typer.Option(help="Split whose authored IEDR levels to check.")] = "test",
    # Required: typer's `...` default, which mypy accepts only through Option().
    judge: str = typer.Option(..., "--judge", help="IEDR judge binding, e.g. openai:MODEL@URL or vllm:MODEL."),
    limit: Annotated[int | None, typer.Option(min=1, help="Rate only the first N cases of the split.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the judge's requests.")] = 0,
    out: Annotated[Path | None, typer.Option("--out", help="Write the full report as JSON here.")] = None,
) -> None:
    """Rate a split's cases with an IEDR judge and report disagreements with the authored levels."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from emobench.cli_support import one_line_errors
    from emobench.endpoints.binding import parse_binding
    from emobench.library_paths import library_root
    from emobench.registry import load_registry

    def go() -> None:
        parse_binding(judge, source="--judge")
        registry = load_registry(library_root())
        cases = registry.cases(split)[:limit] if limit else registry.cases(split)
        ratings, info, template = asyncio.run(rate_split(judge, cases, seed))
        compared = [compare(case, levels) if levels else None for case, (levels, _) in zip(cases, ratings, strict=True)]
        summary = summarise(compared)
        _print(Console(), split, cases, ratings, compared, summary)
        if out is not None:
            report = {
                "split": split,
                "registry_version": registry.version(split),
                "judge": info.model_dump(),
                "template": template,
                "seed": seed,
                "summary": summary,
                "cases": [
                    {
                        "case_id": case.id,
                        "valid": row is not None,
                        **(row or {"authored": case.iedr.model_dump()}),
                        "calls": [call.model_dump() for call in calls],
                    }
                    for case, row, (_, calls) in zip(cases, compared, ratings, strict=True)
                ],
            }
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
            Console(stderr=True).print(f"report → {out}", highlight=False, soft_wrap=True)

    with one_line_errors():
        go()
