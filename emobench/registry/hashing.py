"""Content hashes: sha256 over canonical JSON, so YAML layout and key order never matter."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from emobench.registry.models import DEFAULT_LANGUAGE

# Bump when the meaning of a hash changes (not when a card does).
HASH_SCHEME = "emobench-registry/1"


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha256_hex(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def card_hash(card: BaseModel) -> str:
    """Hash of a validated card, so an explicit default equals an omitted one.

    Unset optional fields (None) are left out, so adding one to the schema keeps old hashes;
    so is the default language, so English cards kept theirs when cards gained a language.
    """
    data = card.model_dump(mode="json", exclude_none=True)
    if data.get("language") == DEFAULT_LANGUAGE:
        del data["language"]
    return sha256_hex(data)


def case_hash(case_id: str, scenario_hash: str, persona_hash: str, iedr: dict[str, int],
              opening: str | None = None, hidden_need: dict[str, str] | None = None,
              stratum: str | None = None) -> str:
    # Folding in the card hashes makes one changed word in a used card change the case.
    # Fields a case may leave out count only when present, so older editions keep their hashes.
    fields: dict[str, object] = {"id": case_id, "scenario": scenario_hash, "persona": persona_hash,
                                 "iedr": iedr}
    if opening is not None:
        fields["opening"] = opening
    if hidden_need is not None:
        fields["hidden_need"] = hidden_need
    if stratum is not None:
        fields["stratum"] = stratum
    return sha256_hex(fields)


def registry_version(cases: Iterable[tuple[str, str]]) -> str:
    """Version of a split from its (case id, case hash) pairs; listing order is irrelevant."""
    return sha256_hex({"scheme": HASH_SCHEME, "cases": sorted(cases)})
