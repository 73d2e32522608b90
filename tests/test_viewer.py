"""`emobench show` and `emobench report` on real run directories made against the fake server:
a demo-like run (one subject), a run of two subjects, and that run rescored by another panel."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from emobench.cli import app
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState

cli = CliRunner()
SECRET = "sk-viewer-test-0123456789abcdef"
USER_TEXT = "I don't know, it's just a lot right now"
REPLY = "That sounds hard. What part of it weighs on you most?"


def _invoke(*args: str) -> Any:
    return cli.invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    tmp = tmp_path_factory.mktemp("viewer")
    with pytest.MonkeyPatch.context() as mp, FakeOpenAIServer(FakeState()) as fake:
        mp.setenv("EMOBENCH_VIEWER_KEY", SECRET)
        binding = f"openai:fake-model@{fake.base_url}"
        demo = write_config(tmp / "demo.yaml", fake.base_url, max_turns=4, seeds=[0])
        data = yaml.safe_load(demo.read_text())
        data["subjects"][0]["api_key_env"] = "EMOBENCH_VIEWER_KEY"
        demo.write_text(yaml.safe_dump(data))
        multi = write_config(tmp / "multi.yaml", fake.base_url, seeds=[0, 1])
        data = yaml.safe_load(multi.read_text())
        data["subjects"] = [{"binding": binding, "label": "subject-a"}, {"binding": binding, "label": "subject-b"}]
        multi.write_text(yaml.safe_dump(data))
        for name, cfg in (("demo", demo), ("multi", multi)):
            done = _invoke("run", "--config", str(cfg), "--out", str(tmp), "--run-id", name, "--no-progress", "--no-cache")
            assert done.exit_code == 0, done.output
        panel = tmp / "pair.yaml"
        panel.write_text(yaml.safe_dump({"name": "pair", "judges": [
            {"binding": binding, "label": "judge-x"}, {"binding": binding, "label": "judge-y"}]}))
        rescored = _invoke("judge", str(tmp / "multi"), "--panel", str(panel), "--no-cache")
        assert rescored.exit_code == 0, rescored.output
        yield {"demo": tmp / "demo", "multi": tmp / "multi"}


def test_show_lists_the_episodes_with_their_outcome(runs: dict[str, Path]) -> None:
    out = _invoke("show", str(runs["multi"]))
    assert out.exit_code == 0, out.output
    lines = [line for line in out.output.splitlines() if re.match(r"\s*\d+\s+demo4-0", line)]
    assert len(lines) == 2 * 2 * 2  # 2 cases x 2 seeds x 2 subjects
    assert all("max_turns" in line and re.search(r"\d+\.\d", line) for line in lines)  # stop reason, EPM-Q
    only_b = _invoke("show", str(runs["multi"]), "--subject", "subject-b", "--case", "demo4-02")
    rows = [line.split() for line in only_b.output.splitlines() if re.match(r"\s*\d+\s+demo4-0", line)]
    assert [(r[1], r[2], r[3]) for r in rows] == [("demo4-02", "subject-b", "0"), ("demo4-02", "subject-b", "1")]
    by_score = _invoke("show", str(runs["multi"]), "--sort", "epmq", "--failed")
    scores = [float(line.split()[6]) for line in by_score.output.splitlines() if re.match(r"\s*\d+\s+demo4-0", line)]
    assert len(scores) == 8 and scores == sorted(scores, reverse=True)  # the fake never succeeds: all "failed"
    bad = _invoke("show", str(runs["multi"]), "--sort", "nope")
    assert bad.exit_code == 2 and "expected one of" in bad.output


def test_show_prints_an_episode_turn_by_turn(runs: dict[str, Path]) -> None:
    out = _invoke("show", str(runs["demo"]), "--case", "demo4-02", "--seed", "0")
    assert out.exit_code == 0, out.output
    text = out.output
    assert [int(n) for n in re.findall(r"turn (\d+) ─", text)] == [1, 2, 3, 4]
    assert text.count(REPLY) == 4 and text.count(USER_TEXT) == 3  # turn 1 is the card's opening message
    assert "director wait" in text and "reveal_stage" in text
    assert text.count("C +1/−0  A +2/−0  P +0/−0") == 8  # the median and judge-0's levels, every turn
    assert "judge-0:" in text and re.search(r"ΔE \d+\.\d\d  E \d+\.\d\d", text)
    assert re.search(r"meter\s+\d+ \(\+2\)", text)
    assert "stop: max_turns" in text
    assert re.search(r"judge-0\s+\d+\s+\d+\s+\d+\s+\d+", text)  # holistic verdict, four dimensions
    # The probe answered A; the hidden card of demo4-02 says C.
    assert re.search(r"dominant need\s+A\s+C\s+✗", text)
    assert "names the feeling" not in text
    with_evidence = _invoke("show", str(runs["demo"]), "--episode", "subject-a|demo4-02|0", "--evidence")
    assert "A: “that sounds hard” — names the feeling" in with_evidence.output
    assert "plain and specific" in with_evidence.output  # the holistic evidence
    assert _invoke("show", str(runs["demo"]), "--episode", "2").output == text  # by its # in the list
    missing = _invoke("show", str(runs["demo"]), "--episode", "subject-a|demo-09|0")
    assert missing.exit_code == 2 and "no episode 'subject-a|demo-09|0'" in missing.output


def test_show_a_rescored_run_uses_the_panels_judges(runs: dict[str, Path]) -> None:
    own = _invoke("show", str(runs["multi"]), "--episode", "subject-b|demo4-01|1")
    rescored = _invoke("show", str(runs["multi"]), "--episode", "subject-b|demo4-01|1", "--panel", "pair")
    assert rescored.exit_code == 0, rescored.output
    assert "judge-0:" in own.output and "judge-x" not in own.output
    assert rescored.output.count("judge-x:") == 3 and rescored.output.count("judge-y:") == 3  # every turn
    assert re.search(r"judge-y\s+\d+\s+\d+\s+\d+\s+\d+", rescored.output)  # its holistic verdicts
    assert REPLY in rescored.output  # the same conversation
    listing = _invoke("show", str(runs["multi"]), "--panel", "pair")
    assert "panel pair" in listing.output
    nope = _invoke("show", str(runs["multi"]), "--panel", "nope")
    assert nope.exit_code == 2 and "no such rescore" in nope.output and "pair" in nope.output


def _page_data(page: Path) -> dict[str, Any]:
    html = page.read_text()
    blob = re.search(r'<script type="application/json" id="episodes-data">(.*?)</script>', html, re.S)
    assert blob is not None
    data: dict[str, Any] = json.loads(blob.group(1))
    return data


def test_report_pages_of_each_run_and_the_leaderboard_links_them(runs: dict[str, Path], tmp_path: Path) -> None:
    for run, args, judges in ((runs["demo"], [], {"judge-0"}), (runs["multi"], [], {"judge-0"}),
                              (runs["multi"], ["--panel", "pair"], {"judge-x", "judge-y"})):
        out = _invoke("report", str(run), *args)
        assert out.exit_code == 0, out.output
        page = run / "panels" / "pair" / "report.html" if args else run / "report.html"
        html = page.read_text()
        data = _page_data(page)
        episodes = {e["k"]: e for e in data["episodes"]}
        assert len(episodes) == (2 if run == runs["demo"] else 8)
        ep = episodes["subject-a|demo4-02|0"]
        assert [t[3] for t in ep["t"]] == [REPLY] * len(ep["t"])
        assert {j[0] for t in ep["t"] for j in t[8]} == judges
        assert ep["t"][0][6] == [1, 2, 0] and ep["stop"] == "max_turns"
        assert {h[0] for h in ep["h"]} == judges
        assert ["dominant need", "A", "C", False] in ep["pr"]
        assert html.count('<tr data-key="') == len(episodes)
        assert 'id="summary-plot"' in html and "<svg" in html
        assert SECRET not in html
        assert "/v1</code>" not in html  # the roles' endpoints are left out (a label may be a binding)
    lb = _invoke("leaderboard", "build", str(runs["multi"] / "panels" / "pair"), "-o", str(tmp_path / "lb"))
    assert lb.exit_code == 0, lb.output
    index = (tmp_path / "lb" / "index.html").read_text()
    links = re.findall(r'href="([^"#]*report\.html)"', index)
    target = (runs["multi"] / "panels" / "pair" / "report.html").resolve()
    assert len(links) == 2 and all((tmp_path / "lb" / link).resolve() == target for link in links)


def test_no_secret_in_what_show_prints(runs: dict[str, Path]) -> None:
    shown = _invoke("show", str(runs["demo"]), "--episode", "1", "--evidence")
    assert shown.exit_code == 0 and SECRET not in shown.output
