"""The run report page and `show` on synthetic runs: hostile text stays text, records that an
imported run may lack show as "–", and the page works in headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from typer.testing import CliRunner

from emobench.cli import app
from emobench.viewer.episodes import open_run
from emobench.viewer.run_report import write_run_report
from tests.synthetic_runs import SubjectTruth, write_episodes, write_run
from tests.test_html import _run, chromium  # noqa: F401  (the fixture)

HOSTILE = '<script>window.PWNED=1</script><img src=x onerror="window.PWNED=2"></textarea> [red]markup[/red] &amp;'
SUBJECTS = [SubjectTruth("alpha-7b", 63, 0.6, 2), SubjectTruth("beta-8b", 57, 0.45, 5)]
cli = CliRunner()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = write_episodes(write_run(tmp_path_factory.mktemp("rr") / "hostile", SUBJECTS, n_cases=4, n_seeds=2),
                         hostile=HOSTILE)
    write_run_report(open_run(run), run / "report.html")
    return run


def _data(page: Path) -> dict[str, list[dict[str, object]]]:
    blob = re.search(r'<script type="application/json" id="episodes-data">(.*?)</script>', page.read_text(), re.S)
    assert blob is not None
    data: dict[str, list[dict[str, object]]] = json.loads(blob.group(1))
    return data


def test_hostile_transcript_is_data_in_the_file(hostile: Path) -> None:
    html = (hostile / "report.html").read_text()
    assert len(re.findall(r"<script\b", html)) == 2  # the page's own: its data and its code
    assert "<img" not in html and "</textarea>" not in html
    assert "&lt;script&gt;window.PWNED=1" in html  # the table's stop reasons, escaped by jinja
    episodes = _data(hostile / "report.html")["episodes"]
    assert len(episodes) == 2 * 4 * 2
    first = episodes[0]["t"][0]  # type: ignore[index]
    assert first[0].endswith(" " + HOSTILE) and first[3].endswith(" " + HOSTILE)  # type: ignore[index]


def test_show_prints_hostile_text_literally(hostile: Path) -> None:
    out = cli.invoke(app, ["show", str(hostile), "--episode", "1", "--evidence"], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    assert out.output.count(HOSTILE) >= 4 * 3  # user, inner, reply, evidence of every turn, and more
    assert "dominant need" in out.output and re.search(r"dominant need\s+A\s+–", out.output)  # no card here


def test_a_run_without_scores_judgements_or_report_still_shows(tmp_path: Path) -> None:
    run = write_episodes(write_run(tmp_path / "bare", SUBJECTS[:1], n_cases=3, n_seeds=1, report=False))
    (run / "scores.parquet").unlink()
    (run / "judgements.jsonl").unlink()
    # A field this emobench does not know, as a newer emobench or an importer may write.
    lines = (run / "episodes.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["turns"][0]["future_field"] = {"x": 1}
    (run / "episodes.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    listing = cli.invoke(app, ["show", str(run)], env={"COLUMNS": "200"})
    assert listing.exit_code == 0, listing.output
    rows = [line.split() for line in listing.output.splitlines() if re.match(r"\s*\d+\s+case-", line)]
    assert len(rows) == 3 and all(r[6] == "–" for r in rows)  # no EPM-Q without scores
    one = cli.invoke(app, ["show", str(run), "--episode", "1"], env={"COLUMNS": "200"})
    assert "holistic verdicts: –" in one.output and "turn 1" in one.output
    page = cli.invoke(app, ["report", str(run), "-o", str(tmp_path / "bare.html")])
    assert page.exit_code == 0, page.output
    html = (tmp_path / "bare.html").read_text()
    assert html.count('<tr data-key="') == 3 and "Krippendorff" in html
    assert cli.invoke(app, ["show", str(tmp_path / "nope")]).exit_code == 2


def test_audit_flags_in_the_list_and_on_the_page(tmp_path: Path) -> None:
    run = write_episodes(write_run(tmp_path / "flags", SUBJECTS, n_cases=6, n_seeds=2))
    judgements = [json.loads(line) for line in (run / "judgements.jsonl").read_text().splitlines()]
    flagged = [j["key"] for j in judgements if j["audit"]]
    assert flagged
    out = cli.invoke(app, ["show", str(run)], env={"COLUMNS": "200"})
    assert sum("over_cooperative" in line for line in out.output.splitlines()) == len(flagged)
    one = cli.invoke(app, ["show", str(run), "--episode", flagged[0]], env={"COLUMNS": "200"})
    assert "over_cooperative (turn 2): agrees at once" in one.output
    write_run_report(open_run(run), run / "report.html")
    assert (run / "report.html").read_text().count('data-flagged="yes"') == len(flagged)


def test_chromium_opens_compares_and_filters(hostile: Path, tmp_path: Path, chromium: Path) -> None:  # noqa: F811
    episodes = _data(hostile / "report.html")["episodes"]
    a = next(e for e in episodes if e["s"] == "alpha-7b")
    b = next(e for e in episodes if e["s"] == "beta-8b" and e["c"] == a["c"] and e["seed"] == a["seed"])
    probe = """<script>
      document.body.dataset.pwned = String(window.PWNED);
      var s = document.getElementById("f-subject"); s.value = "beta-8b"; s.dispatchEvent(new Event("input"));
      document.body.dataset.count = document.getElementById("f-count").textContent;
      document.body.dataset.visible = document.querySelectorAll("#episodes tbody tr:not([hidden])").length;
      document.querySelectorAll("#episodes th")[4].click(); document.querySelectorAll("#episodes th")[4].click();
      var rows = document.querySelectorAll("#episodes tbody tr");
      document.body.dataset.turns = Array.from(rows, r => r.cells[4].dataset.sort).join(",");
    </script></body>"""
    page = tmp_path / "page.html"
    html = (hostile / "report.html").read_text()
    head, _, tail = html.rpartition("</body>")
    page.write_text(head + probe + tail)
    dom = _run(chromium, tmp_path, "--dump-dom", f"{page.as_uri()}#ep={quote(str(a['k']))}&vs={quote(str(b['k']))}")
    assert 'data-pwned="undefined"' in dom  # no injected script ran
    assert 'data-count="8 of 16 episodes"' in dom and 'data-visible="8"' in dom
    turns = re.search(r'data-turns="([\d,]+)"', dom)
    assert turns is not None
    values = [int(x) for x in turns.group(1).split(",")]
    assert values == sorted(values)  # Turns sorted ascending after two clicks
    columns = re.findall(r'<div class="episode" data-key="([^"]+)"', dom)
    assert [c.replace("&amp;", "&") for c in columns] == [a["k"], b["k"]]  # side by side
    assert dom.count('class="turn"') == len(a["t"]) + len(b["t"])  # type: ignore[arg-type]
    assert dom.count('class="ep-plot"') == 4  # meter and EPM per episode
    assert dom.count("&lt;script&gt;window.PWNED=1&lt;/script&gt;") >= 4 * (len(a["t"]) + len(b["t"]))  # type: ignore[arg-type]
    assert "<img" not in dom
    assert '<select id="compare">' in dom


def test_chromium_screenshot(tmp_path: Path, chromium: Path) -> None:  # noqa: F811
    run = write_episodes(write_run(tmp_path / "plain", SUBJECTS, n_cases=6, n_seeds=2))
    write_run_report(open_run(run), run / "report.html")
    key = quote("alpha-7b|case-00001|0")
    shot = tmp_path / "page.png"
    _run(chromium, tmp_path, "--hide-scrollbars", "--window-size=1400,2400", f"--screenshot={shot}",
         f"{(run / 'report.html').as_uri()}#ep={key}")
    from PIL import Image

    with Image.open(shot) as img:
        assert img.size == (1400, 2400)
        colours = img.convert("RGB").resize((140, 240)).getcolors(maxcolors=100_000)
    assert colours is not None and len(colours) > 50


def test_output_is_paged_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console
    from rich.text import Text

    from emobench.viewer.transcript import print_paged

    shown: list[str] = []
    monkeypatch.setattr("rich.pager.SystemPager.show", lambda self, content: shown.append(content))
    print_paged(Console(force_terminal=True, width=80, file=io.StringIO()), Text("turn 1 ─ hello"), pager=None)
    assert len(shown) == 1 and "hello" in shown[0]
    plain = io.StringIO()
    print_paged(Console(force_terminal=False, file=plain), Text("turn 1 ─ hello"), pager=None)
    print_paged(Console(force_terminal=True, file=plain), Text("again"), pager=False)
    assert len(shown) == 1 and "hello" in plain.getvalue() and "again" in plain.getvalue()
