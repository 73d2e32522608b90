"""Versioned prompt templates: jinja2 files whose blocks become chat messages.

A template's version is a short hash of its file, so any edit changes the version that is
stamped into every record produced with it; nobody has to remember to bump a number.
Each language has its own set: prompts/NAME.j2 and judges/NAME.j2 are English, prompts/zh/ and
judges/zh/ mirror them in Chinese with the same variables and output schemas. A non-English
version names its language ("zh-<hash>"), so every record says which set it came from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from emobench.errors import InputError
from emobench.library_paths import library_root

if TYPE_CHECKING:
    from emobench.registry import Case

ROOT = library_root()
LANGUAGES = ("en", "zh")

_DICT_ATTRIBUTES = frozenset(dir(dict))


class _Environment(jinja2.Environment):
    """Jinja's own lookup, with a short cut for ``line.speaker`` on a dict: jinja tries the
    attribute first and reads the key only after an AttributeError, and raising it for every
    line of a transcript was most of the judge prompt's render time. A key that names a dict
    method (``items``) still goes the long way, so every lookup returns what jinja's would."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                pass
        return super().getattr(obj, attribute)


_env = _Environment(
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, autoescape=False
)


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    version: str
    template: jinja2.Template
    # Rendered system blocks by case content hash: they are the same on every turn of every
    # episode of a case, and re-rendering them was a sixth of the harness's CPU per call.
    _systems: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @cached_property  # stamped on every call record
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def has_block(self, block: str) -> bool:
        return block in self.template.blocks

    @cached_property
    def _globals(self) -> dict[str, Any]:
        return dict(self.template.globals)

    def block(self, block: str, **context: Any) -> str:
        # The context jinja would build (its globals, then ours), from a copy of the globals made once:
        # jinja merges them from a ChainMap on every render.
        render = self.template.blocks[block]
        return "".join(render(self.template.new_context({**self._globals, **context}, shared=True))).strip()

    def case_system(self, case: Case) -> str:
        """The "system" block for a case (its persona and scenario), rendered once per case."""
        text = self._systems.get(case.content_hash)
        if text is None:
            text = self._systems[case.content_hash] = self.block(
                "system", case=case, persona=case.persona, scenario=case.scenario)
        return text


def template_file(root: Path, folder: str, name: str, language: str) -> Path:
    """Where a template of a language lives: ``root/folder/name`` in English, else under ``zh/``."""
    if language not in LANGUAGES:
        raise InputError(root / folder / name, "language", f"{language!r} is not one of {', '.join(LANGUAGES)}")
    return root / folder / name if language == "en" else root / folder / language / name


def load_language_template(root: Path, folder: str, name: str, language: str) -> PromptTemplate:
    """``prompts`` or ``judges`` template ``name`` (a file name, e.g. "mdep.j2") in a language."""
    return load_template(template_file(root, folder, name, language), language)


def cases_language(cases: Iterable[Case]) -> str:
    """The one language of a run's cases, which picks its templates; English for no case."""
    languages = sorted({case.language for case in cases})
    if len(languages) > 1:
        raise InputError("config", "split", f"its cases are in several languages ({', '.join(languages)}); "
                         "a run plays one language: give a split of one")
    return languages[0] if languages else "en"


@lru_cache(maxsize=64)
def load_template(path: Path, language: str = "en") -> PromptTemplate:
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(path, "template", f"cannot read: {exc.strerror}") from exc
    try:
        template = _env.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise InputError(path, f"line {exc.lineno}", f"template syntax error: {exc.message}") from exc
    digest = hashlib.sha256(source.encode()).hexdigest()[:10]
    # English versions stay the bare hash that every earlier run recorded.
    version = digest if language == "en" else f"{language}-{digest}"
    return PromptTemplate(name=path.stem, version=version, template=template)
