"""`leaderboard publish`: a leaderboard folder as a Hugging Face dataset: its tables, page and
verified submissions staged beside a dataset card (huggingface_hub's DatasetCard) whose configs
let `datasets.load_dataset` read each table; then uploaded, with the token read from HF_TOKEN.

Nothing is uploaded under --dry-run, and the token is never written anywhere.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from emobench.board.package import SUBMISSIONS, file_leaks, leaks
from emobench.errors import EndpointError, InputError

TABLES = {"leaderboard": "leaderboard.parquet", "cases": "cases.parquet", "pairs": "pairs.parquet"}
PAGE = "index.html"
TOKEN_ENV = "HF_TOKEN"


def _metadata(path: Path) -> dict[str, Any]:
    from emobench.publish.provenance import read_metadata

    return read_metadata(pq.read_schema(path))


def _card_environment() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("emobench.board", "templates"), autoescape=False,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    # A label is data: in a markdown table cell a pipe or a line break would end the cell.
    env.filters["cell"] = lambda text: str(text).replace("|", "\\|").replace("\n", " ")
    return env


def dataset_card(board: Path, *, staged: bool = False) -> Any:
    """The card: one config per table (the leaderboard the default), what the tables hold and what
    they rest on. A staged card names no external bundle: those are not uploaded."""
    from huggingface_hub import DatasetCard, DatasetCardData

    meta = _metadata(board / TABLES["leaderboard"])
    table = pq.read_table(board / TABLES["leaderboard"], columns=["subject", "slice_family", "epmq"]).to_pandas()
    overall = table[table["slice_family"] == "overall"].sort_values("epmq", ascending=False)
    kept = sorted(p.name for p in (board / SUBMISSIONS).iterdir()) if (board / SUBMISSIONS).is_dir() else []
    # datasets cannot load a table without rows ("corresponds to no data"): an empty pairs table
    # (one subject, or no comparisons) is still written and staged, but named by no config.
    pairs = board / TABLES["pairs"]
    compared = pairs.is_file() and pq.ParquetFile(pairs).metadata.num_rows > 0
    configs = {name: file for name, file in TABLES.items() if name != "pairs" or compared}
    data = DatasetCardData(
        license="apache-2.0", pretty_name="emobench leaderboard", language=["en", "zh"],
        tags=["emotional-intelligence", "leaderboard", "llm-evaluation", "multi-turn"],
        configs=[{"config_name": name, "data_files": file, **({"default": True} if name == "leaderboard" else {})}
                 for name, file in configs.items()],
    )
    sources = list(meta.get("source_runs", []))
    external = board / "external"
    body = _card_environment().get_template("card.md.j2").render(
        overall=list(overall.itertuples()), compared=compared, page=(board / PAGE).is_file(),
        registry=str(meta.get("registry_version", ""))[:12], kept=kept, submissions=SUBMISSIONS,
        verified=sorted(meta.get("verifications", {}).items()), source_runs=sources,
        demo_only=bool(sources) and all(run.get("split") == "demo" for run in sources),
        external=[] if staged or not external.is_dir() else sorted(
            p.name for p in external.iterdir() if p.is_dir() and not p.name.startswith(".")),
    )
    return DatasetCard(f"---\n{data.to_yaml()}\n---\n{body}")


def write_card(board: Path) -> None:
    """README.md beside the tables, so `datasets.load_dataset(board, CONFIG)` reads the folder as built."""
    dataset_card(board).save(board / "README.md")


def stage(board: Path, out: Path) -> list[str]:
    """Copy what is published into out with the card as README.md; the relative paths, sorted.
    A key, a token or a local path in any of it refuses the whole, naming the file and field."""
    for name in TABLES.values():
        if not (board / name).is_file():
            raise InputError(board / name, "", "missing: build the leaderboard first (leaderboard build or add)")
        leak = next(leaks(_metadata(board / name)), None)
        if leak is not None:
            raise InputError(board / name, f"schema metadata {leak[0]}", f"holds {leak[1]}; not published")
    if out.exists() and any(out.iterdir()):
        raise InputError(out, "", "exists and is not empty")
    out.mkdir(parents=True, exist_ok=True)
    names = [*TABLES.values(), *([PAGE] if (board / PAGE).is_file() else [])]
    for name in names:
        shutil.copyfile(board / name, out / name)
    if (board / SUBMISSIONS).is_dir():
        for sub in sorted(p for p in (board / SUBMISSIONS).iterdir() if not p.name.startswith(".")):
            for path in sorted(sub.iterdir()):
                leak = next(file_leaks(path), None) if path.suffix in (".json", ".jsonl", ".parquet") else None
                if leak is not None:
                    raise InputError(path, leak[0], f"holds {leak[1]}; not published")
            shutil.copytree(sub, out / SUBMISSIONS / sub.name)
    dataset_card(board, staged=True).save(out / "README.md")
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


def upload(staged: Path, repo: str) -> str:
    """Upload the staged folder to the dataset repo; the commit's URL. The Hub is HF_ENDPOINT's
    (read now, not at import), the token HF_TOKEN's; a refusal is one line naming the Hub."""
    token = os.environ.get(TOKEN_ENV)
    if not token:
        raise InputError(TOKEN_ENV, "", "not set: the Hub token is read from the environment only")
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    endpoint = os.environ.get("HF_ENDPOINT") or constants.ENDPOINT
    if constants.HF_HUB_OFFLINE:
        raise EndpointError(endpoint, "HF_HUB_OFFLINE is set: nothing is uploaded (--dry-run stages and lists)")
    api = HfApi(endpoint=endpoint, token=token)
    try:
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
        info = api.upload_folder(folder_path=staged, repo_id=repo, repo_type="dataset",
                                 commit_message="emobench leaderboard publish")
    except (HfHubHTTPError, OfflineModeIsEnabled) as exc:
        raise EndpointError(endpoint, str(exc).splitlines()[0]) from None
    return str(info)
