"""How much of a prompt a provider's prompt cache can hold: the longest prefix it shares with an
earlier prompt, counted in whole blocks and only from a minimum length (OpenAI: from 1,024 tokens,
in 128-token blocks). The fake server in tests/ reports cached tokens with it, and `run --dry-run`
estimates each role's cacheable share with it.

Tokens are cl100k_base's (tiktoken, which litellm brings with its encoding files, so no download):
OpenAI's own counts, close enough to other providers' for a share.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CacheRule:
    """A provider's cache granularity: nothing below ``minimum`` tokens, then whole ``block``s."""

    minimum: int = 1024
    block: int = 128


OPENAI = CacheRule()


@cache
def _encoding() -> Any:
    if "TIKTOKEN_CACHE_DIR" not in os.environ:  # litellm ships the encoding files; tiktoken would fetch them
        spec = importlib.util.find_spec("litellm")
        if spec is not None and spec.origin is not None:
            bundled = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
            os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def prompt_tokens(messages: Sequence[dict[str, Any]]) -> list[int]:
    """The token ids of a chat prompt: each message's role, then its content, in order."""
    encode = _encoding().encode
    ids: list[int] = []
    for message in messages:
        ids += encode(f"<|{message['role']}|>")
        content = message.get("content") or ""
        ids += encode(content if isinstance(content, str) else "".join(p.get("text", "") for p in content),
                      disallowed_special=())
    return ids


@dataclass
class PrefixCache:
    """The prefixes of every prompt seen so far, as chained hashes of whole blocks."""

    rule: CacheRule = OPENAI
    _seen: set[bytes] = field(default_factory=set)

    def admit(self, tokens: Sequence[int]) -> int:
        """The tokens of this prompt an earlier one had cached (0 below the minimum); then cache it."""
        shared, chain, block = 0, b"", self.rule.block
        for start in range(0, len(tokens) - block + 1, block):
            chain = hashlib.blake2b(chain + array("I", tokens[start:start + block]).tobytes(), digest_size=16).digest()
            if chain in self._seen and shared == start:
                shared = start + block
            self._seen.add(chain)
        return shared if shared >= self.rule.minimum else 0
