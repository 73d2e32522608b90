"""A temporary library with Chinese cases: the repository's library plus tests/data/zh_prompts
(split tiny-zh), and a fake-server responder that answers in Chinese."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from emobench.run.runner import ROOT
from tests.fake_openai import default_responder

ZH_DATA = Path(__file__).parent / "data" / "zh_prompts"
ZH_SPLIT = "tiny-zh"
LIBRARY_PARTS = ("library.yaml", "personas", "scenarios", "editions", "prompts", "judges")


def zh_library(root: Path) -> Path:
    """Copy the library to ``root`` and lay the tiny Chinese library over it."""
    root.mkdir(parents=True, exist_ok=True)
    for part in LIBRARY_PARTS:
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, root / part)
        else:
            shutil.copy(ROOT / part, root / part)
    for part in ("personas", "scenarios"):
        shutil.copytree(ZH_DATA / part, root / part, dirs_exist_ok=True)
    return root


def zh_responder(body: dict[str, Any]) -> str:
    """default_responder, with the simulated person and the subject speaking Chinese."""
    fmt = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if fmt == "user_move":
        return json.dumps({"message": f"嗯……就是有点难受（{int(body.get('seed') or 0) % 97}）",
                           "meter_delta": 2, "inner": "再试探一下", "leave": False}, ensure_ascii=False)
    if fmt is None:
        return "听起来你心里很不是滋味。挂了电话以后，你最放不下的是什么？"
    return default_responder(body)
