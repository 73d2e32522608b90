"""The library languages and their packs: adding a language is adding its pack here (and the
language code to emobench.registry.models.LANGUAGES)."""

from __future__ import annotations

from emobench.registry.checks.lang.en.pack import PACK as ENGLISH
from emobench.registry.checks.lang.zh.pack import PACK as CHINESE
from emobench.registry.checks.pack import LanguagePack, TextTools, language_of
from emobench.registry.loader import Registry
from emobench.registry.models import Language

PACKS: dict[Language, LanguagePack] = {pack.code: pack for pack in (ENGLISH, CHINESE)}


def pack_of(reg: Registry) -> LanguagePack:
    """The pack of a library view's language (English for a library of several)."""
    return PACKS[language_of(reg)]


def tools(reg: Registry) -> TextTools:
    return pack_of(reg).tools
