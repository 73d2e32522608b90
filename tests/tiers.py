"""The suite's tiers: each slow tier has a marker, every other test is "hermetic".

A test joins a tier by its marker or by a fixture that only that tier uses (a test that asks for
Chromium is a browser test). At the end of a run each tier's test count and time are printed, and
with ``--budget-label NAME`` written to the durations file that bench/bench_suite_budget.py reads.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from emobench.endpoints.embedded import BF16_FLAGS, cpu_flags
from emobench.user_cache import cache_root

SLOW_TIERS = ("vllm", "install", "verl", "train", "browser", "ray", "soak", "inspect")
# Fixtures that put a test in a tier without a marker of its own.
FIXTURE_TIERS = {"chromium": "browser", "embedded_vllm": "vllm", "emobench_wheel": "install"}


def durations_path(label: str) -> Path:
    """Where a labelled run's durations go: the user cache, kept between runs on one machine."""
    return cache_root() / f"test-durations-{label}.json"


def tier_of(item: pytest.Item) -> str:
    for tier in SLOW_TIERS:
        if item.get_closest_marker(tier) is not None:
            return tier
    return "hermetic"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--budget-label", default=None,
                     help="write each test's and tier's time to ~/.cache/emobench/test-durations-LABEL.json")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        for fixture, tier in FIXTURE_TIERS.items():
            if fixture in fixtures and item.get_closest_marker(tier) is None:
                item.add_marker(tier)
        item.user_properties.append(("tier", tier_of(item)))  # reaches the xdist controller with each report
    # The slow tiers first, the longest first: under `--dist loadfile` modules go to the workers in
    # this order, and the short ones fill in around the long. In the vllm tier the tests with a
    # server of their own run before the shared one starts.
    slow_first = ("vllm", "install", "verl", "train", "soak", "ray", "browser", "inspect", "hermetic")
    order = {tier: i for i, tier in enumerate(slow_first)}
    items.sort(key=lambda item: (order[tier_of(item)], "embedded_vllm" in getattr(item, "fixturenames", ())))


class TierClock:
    def __init__(self) -> None:
        self.started = time.time()
        self.tests: dict[str, dict[str, Any]] = {}
        self.summaries: list[str] = []  # what tests recorded as record_property("summary", text)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        tier, nodeid = properties.get("tier", "hermetic"), report.nodeid
        entry = self.tests.setdefault(nodeid, {"tier": tier, "seconds": 0.0, "outcome": "not run"})
        if report.when == "call" and "summary" in properties:
            self.summaries.append(f"{nodeid}:\n{properties['summary']}")
        entry["seconds"] += report.duration  # setup (a module's server start), call and teardown
        if report.when == "call" or report.outcome != "passed":
            entry["outcome"] = report.outcome

    def summary(self) -> dict[str, Any]:
        tiers: dict[str, dict[str, float]] = defaultdict(lambda: {"tests": 0, "seconds": 0.0})
        for entry in self.tests.values():
            if entry["outcome"] != "not run":
                tiers[entry["tier"]]["tests"] += 1
                tiers[entry["tier"]]["seconds"] += entry["seconds"]
        return {"wall_s": time.time() - self.started, "tiers": dict(tiers)}

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if self.summaries:
            terminalreporter.section("what tests report")
            for text in self.summaries:
                terminalreporter.write_line(text)
        summary = self.summary()
        terminalreporter.section("time per tier")
        for tier in ("hermetic", *SLOW_TIERS):
            if tier in summary["tiers"]:
                row = summary["tiers"][tier]
                terminalreporter.write_line(f"{tier:<9} {row['tests']:>5} tests {row['seconds']:>8.1f} s")
        terminalreporter.write_line(f"{'wall':<9} {'':>11} {summary['wall_s']:>8.1f} s")
        label = config.getoption("--budget-label")
        if label:
            path = durations_path(label)
            path.parent.mkdir(parents=True, exist_ok=True)
            record = {**summary, "label": label, "markexpr": config.getoption("-m"), "cpu": cpu_name(),
                      "workers": getattr(config.option, "numprocesses", None) or 0, "finished": time.time(),
                      "tests": self.tests}
            path.write_text(json.dumps(record, indent=1))
            terminalreporter.write_line(f"durations written to {path}")


def cpu_name() -> str:
    """The processor's model, core count and SIMD level: a time means little without them."""
    model = next((line.partition(":")[2].strip() for line in _cpuinfo() if line.startswith("model name")), "")
    flags = cpu_flags()
    simd = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    bf16 = "native bf16" if flags & BF16_FLAGS else "no native bf16"
    return f"{model or platform.machine()}, {os.cpu_count()} cores, {simd}, {bf16}"


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        return []


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # under xdist the controller sees every worker's reports
        config.pluginmanager.register(TierClock(), "emobench-tier-clock")
