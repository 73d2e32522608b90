"""Chinese cases on the three pages, in headless Chromium: the play page speaks Chinese (its words
from ui/zh.yaml) and the report and the leaderboard show Chinese text, all with real glyphs.

"Real glyphs" is checked from pixels: Chinese characters drawn by the page must differ from one
another and from characters no font has (private-use code points, drawn as identical empty
boxes). Without a CJK font every Chinese character is such a box, so these checks fail. Full
screenshots go to /tmp/emobench-zh-*.png.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

from emobench.viewer.episodes import open_run
from emobench.viewer.run_report import write_run_report
from tests.cdp import Browser, Page
from tests.fake_openai import FakeOpenAIServer, FakeState
from tests.play_support import PlayServer, emobench
from tests.test_html import chromium  # noqa: F401  (the fixture: skips, or fails in CI, without Chromium)
from tests.zh_support import zh_responder

SPLIT = "demo-zh"
TOFU = "\ue000\ue001\ue002\ue003"  # private use: no font draws these, so they are .notdef boxes
LI = "document.querySelectorAll('#conversation li').length"


@pytest.fixture(scope="module")
def cjk_font() -> None:
    """The checks need a CJK font (Debian's fonts-noto-cjk, which CI installs beside Chromium)."""
    found = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True).stdout \
        if shutil.which("fc-list") else ""
    if not found.strip():
        message = "no CJK font: apt-get install fonts-noto-cjk"
        if os.environ.get("EMOBENCH_REQUIRE_CHROMIUM") == "1":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def browser(tmp_path: Path, chromium: Path, cjk_font: None) -> Iterator[Browser]:  # noqa: F811
    with Browser(chromium, tmp_path / "profile") as b:
        yield b


def _drawn(page: Page, near: str, text: str) -> str:
    """The pixels of ``text`` drawn in the font of the element ``near`` (a PNG, base64)."""
    rect = page.eval(f"""(() => {{
        const host = document.querySelector({json.dumps(near)});
        let probe = document.getElementById('glyph-probe');
        if (!probe) {{ probe = document.createElement('span'); probe.id = 'glyph-probe'; }}
        host.appendChild(probe);
        probe.style.cssText = 'position:fixed;left:0;top:0;z-index:99999;font-size:40px;line-height:1.2;'
          + 'background:#fff;color:#000;padding:2px;white-space:nowrap';
        probe.textContent = {json.dumps(text)};
        const r = probe.getBoundingClientRect();
        return [r.x, r.y, r.width, r.height];
    }})()""")
    clip = dict(zip(("x", "y", "width", "height"), rect, strict=True)) | {"scale": 1}
    shot = str(page.send("Page.captureScreenshot", format="png", clip=clip)["data"])
    page.eval("document.getElementById('glyph-probe').remove()")
    return shot


def assert_real_glyphs(page: Page, near: str) -> None:
    """The Chinese text inside ``near`` is drawn with real glyphs, not boxes."""
    text = page.eval(f"document.querySelector({json.dumps(near)}).textContent")
    han = [ch for ch in text if "\u4e00" <= ch <= "\u9fff"]
    assert len(set(han)) >= 8, text
    first, second = "".join(han[:4]), "".join(sorted(set(han), key=han.index)[4:8])
    assert _drawn(page, near, TOFU) == _drawn(page, near, TOFU[::-1])  # boxes all look alike
    assert _drawn(page, near, first) != _drawn(page, near, second)
    assert _drawn(page, near, first) != _drawn(page, near, TOFU)


def _lang(page: Page, selector: str) -> str:
    return str(page.eval(f"document.querySelector({json.dumps(selector)}).closest('[lang]').lang"))


def _font(page: Page, selector: str) -> str:
    return str(page.eval(f"getComputedStyle(document.querySelector({json.dumps(selector)})).fontFamily"))


def _config(tmp_path: Path, url: str, **extra: object) -> Path:
    binding = f"openai:fake-model@{url}"
    data = {"subjects": [{"binding": binding, "label": "千问-小"}], "user": {"binding": binding},
            "judges": [{"binding": binding, "label": "judge-0"}], "split": SPLIT, "max_turns": 3, "min_turns": 2,
            **extra}
    path = tmp_path / "zh.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def test_the_play_page_of_a_chinese_run_speaks_chinese(tmp_path: Path, browser: Browser) -> None:
    words = yaml.safe_load((Path(__file__).parents[1] / "emobench/play/templates/ui/zh.yaml").read_text("utf-8"))
    with FakeOpenAIServer(FakeState(responder=zh_responder)) as fake:
        server = PlayServer(_config(tmp_path, fake.base_url, max_turns=6, min_turns=5), "user", tmp_path / "run")
        try:
            page = browser.new_page()
            page.goto(server.url + "/")
            assert page.eval("document.documentElement.lang") == "zh"
            assert page.eval("document.querySelector('#join').textContent") == words["page"]["join"]
            assert _font(page, "body").startswith('"Noto Sans CJK SC"')
            assert_real_glyphs(page, "#consent")
            page.screenshot(Path("/tmp/emobench-zh-play-start.png"))
            page.click("#agree")
            page.type_into("#handle", "xiaoyu")
            page.click("#join")
            page.wait_for("location.pathname.startsWith('/p/') && document.querySelector('#case')"
                          " && document.querySelector('#case').options.length > 0")
            page.click("#start")
            page.wait_for(f"{LI} == 2")
            assert page.eval("document.querySelector('#send').textContent") == words["page"]["send"]
            # The script's words too: the speaker labels are Chinese.
            who = page.eval("[...document.querySelectorAll('#conversation .who')].map(w => w.textContent)")
            assert who[0] == words["script"]["you"] and who[1].startswith(words["script"]["model_named"].strip())
            assert_real_glyphs(page, "#card-box")
            page.type_into("#meter", "45")
            page.type_into("#message", "其实我也不知道自己为什么这么难受，明明只是一个春节而已" * 3)  # a long unbroken run
            page.click("#send")
            page.wait_for(f"{LI} >= 4 && document.querySelector('#busy').classList.contains('hidden')")
            # The long line wraps inside its bubble instead of running off the page.
            widths = page.eval("(() => { const p = document.querySelectorAll('#conversation li')[2]; "
                               "return [p.scrollWidth, p.clientWidth, document.documentElement.scrollWidth, innerWidth]; })()")
            assert widths[0] <= widths[1] and widths[2] <= widths[3], widths
            assert_real_glyphs(page, "#conversation")
            page.screenshot(Path("/tmp/emobench-zh-play.png"))
        finally:
            server.stop()


@pytest.fixture(scope="module")
def zh_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("zhrun")
    with FakeOpenAIServer(FakeState(responder=zh_responder)) as fake:
        done = emobench("run", "--config", str(_config(tmp, fake.base_url)), "--out", str(tmp), "--run-id", "run",
                        "--no-progress", "--no-cache")
    assert done.returncode == 0, done.stderr
    return tmp / "run"


def test_the_report_of_a_chinese_run_marks_and_draws_its_text(zh_run: Path, tmp_path: Path, browser: Browser) -> None:
    write_run_report(open_run(zh_run), tmp_path / "report.html")
    key = open_run(zh_run).rows[0].key
    page = browser.new_page()
    page.goto((tmp_path / "report.html").as_uri() + "#ep=" + quote(key))
    page.wait_for("!!document.querySelector('.msg.user span')")
    assert page.eval("document.documentElement.lang") == "en"  # the page's own words stay English
    assert _lang(page, ".msg.user span") == "zh" and _lang(page, ".msg.reply span") == "zh"
    assert _font(page, ".msg.user span").startswith('"Noto Sans CJK SC"')
    assert_real_glyphs(page, ".turn")
    page.screenshot(Path("/tmp/emobench-zh-report.png"))


def test_the_leaderboard_draws_a_chinese_label(zh_run: Path, tmp_path: Path, browser: Browser) -> None:
    board = emobench("leaderboard", "build", str(zh_run), "-o", str(tmp_path / "board"))
    assert board.returncode == 0, board.stderr
    page = browser.new_page()
    page.goto((tmp_path / "board" / "index.html").as_uri())
    cell = page.eval("[...document.querySelectorAll('td')].findIndex(td => td.textContent.includes('千问-小'))")
    assert cell >= 0
    page.eval(f"document.querySelectorAll('td')[{cell}].id = 'zh-label'")
    assert "Noto Sans CJK SC" in _font(page, "#zh-label")
    # Four Chinese characters on the page are too few for assert_real_glyphs: compare them directly.
    assert _drawn(page, "#zh-label", "千问") != _drawn(page, "#zh-label", TOFU[:2])
    assert _drawn(page, "#zh-label", "千问") != _drawn(page, "#zh-label", "问千")
    page.screenshot(Path("/tmp/emobench-zh-leaderboard.png"))


def test_the_glyph_check_fails_on_boxes(tmp_path: Path, chromium: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The check above can fail: in a Chromium that sees only DejaVu (no CJK), Chinese is boxes."""
    latin = Path("/usr/share/fonts/truetype/dejavu")
    if not latin.is_dir():
        pytest.skip("no DejaVu fonts to build a font set without CJK from")
    conf = tmp_path / "fonts.conf"
    conf.write_text(f'<?xml version="1.0"?><fontconfig><dir>{latin}</dir><cachedir>{tmp_path / "fc"}</cachedir>'
                    "</fontconfig>")
    monkeypatch.setenv("FONTCONFIG_FILE", str(conf))
    page_file = tmp_path / "zh.html"
    page_file.write_text('<html lang="zh"><body><p id="t">今年过年回不去了，刚跟我妈视频完，她说没关系</p></body></html>',
                         encoding="utf-8")
    with Browser(chromium, tmp_path / "profile") as b:
        page = b.new_page()
        page.goto(page_file.as_uri())
        with pytest.raises(AssertionError):
            assert_real_glyphs(page, "#t")
