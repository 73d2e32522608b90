"""The library's checks read each language through its pack (emobench/registry/checks/lang/)."""

from __future__ import annotations

from emobench.registry.checks.meaning import KINDS
from emobench.registry.checks.packs import PACKS
from emobench.registry.models import LANGUAGES


def test_every_library_language_has_a_pack_with_a_cut_for_each_meaning_check() -> None:
    assert sorted(PACKS) == sorted(LANGUAGES)
    for code, pack in PACKS.items():
        assert pack.code == code
        assert sorted(pack.meaning.cuts) == sorted(KINDS)


def test_each_pack_reads_a_stage_s_shape_in_its_own_language() -> None:
    en, zh = PACKS["en"].shape, PACKS["zh"].shape
    assert en.scripted_outcome("By the end they have booked the flights.") is not None
    assert en.asks("Could you help me word it?") == "?"
    assert zh.asks("你能帮我想想怎么说吗？") == "？"
    assert zh.scripted_outcome("By the end they have booked the flights.") is None
