"""Versioned prompt templates: jinja2 files whose blocks become chat messages.

A template's version is a short hash of its file, so any edit changes the version that is
stamped into every record produced with it; nobody has to remember to bump a number.
Each language has its own set: prompts/NAME.j2 and judges/NAME.j2 are English, prompts/zh/ and
judges/zh/ mirror them in Chinese with the same variables and output schemas. A non-English
version names its language ("zh-<hash>"), so every record says which set it came from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2 import nodes

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
class PlainLoop:
    """A block's one loop over a list variable, whose body writes only text and fields of the
    item: the loop's output is then the items' lines joined, each line its pieces (text, or the
    ``(field,)`` to write) in turn. A transcript grows every turn, and jinja rendered it line by
    line again on every call."""

    variable: str
    pieces: tuple[str | tuple[str], ...]

    @property
    def marker(self) -> dict[str, str]:
        return {piece[0]: f"\x00{piece[0]}\x00" for piece in self.pieces if type(piece) is tuple}

    @cached_property
    def marked(self) -> str:
        """The marker item's line."""
        return "".join(piece if type(piece) is str else self.marker[piece[0]] for piece in self.pieces)

    @cached_property
    def _format(self) -> tuple[str, Callable[[Any], tuple[Any, ...]]] | None:
        """For items that are dicts (a transcript's lines): the line as a %-format, and its fields'
        getter. A field named like a dict method is read as jinja reads it, below."""
        fields = [piece[0] for piece in self.pieces if type(piece) is tuple]
        if len(fields) < 2 or _DICT_ATTRIBUTES & set(fields):
            return None
        line = "".join(piece.replace("%", "%%") if type(piece) is str else "%s" for piece in self.pieces)
        return line, itemgetter(*fields)

    def lines(self, items: list[Any], getattr_: Callable[[Any, str], Any]) -> str:
        """The loop's output for these items: each field written as jinja writes it (str)."""
        fast = self._format
        if fast is not None and all(type(item) is dict for item in items):
            line, fields = fast
            try:
                return "".join([line % fields(item) for item in items])
            except KeyError:
                pass  # a line without a field: jinja's own lookup below raises jinja's error
        return "".join([
            "".join([piece if type(piece) is str else str(getattr_(item, piece[0])) for piece in self.pieces])
            for item in items
        ])


def plain_loop(source: str, block: str) -> PlainLoop | None:
    """The block's plain loop, when it has one (see PlainLoop) and its list is read nowhere else in
    the block; None otherwise, and the block renders through jinja alone."""
    found = [b for b in _env.parse(source).find_all(nodes.Block) if b.name == block]
    if len(found) != 1 or any(found[0].find_all((nodes.Include, nodes.Macro, nodes.CallBlock))):
        return None
    body = found[0].body
    loops = [n for n in body if isinstance(n, nodes.For)]  # at the block's top level: run once per render
    if len(loops) != 1:
        return None
    loop = loops[0]
    if not isinstance(loop.iter, nodes.Name) or not isinstance(loop.target, nodes.Name):
        return None
    if loop.else_ or loop.test or loop.recursive:
        return None
    variable, item = loop.iter.name, loop.target.name
    names = [n.name for n in found[0].find_all(nodes.Name)]
    if names.count(variable) != 1 or {"self", "super", "caller"} & set(names):
        return None
    pieces: list[str | tuple[str]] = []
    for output in loop.body:
        if not isinstance(output, nodes.Output):
            return None
        for node in output.nodes:
            if isinstance(node, nodes.TemplateData):
                pieces.append(node.data)
            elif isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Name) and node.node.name == item:
                pieces.append((node.attr,))
            else:
                return None
    return PlainLoop(variable, tuple(pieces))


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    version: str
    template: jinja2.Template
    source: str = field(default="", compare=False, repr=False)
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

    def _render(self, block: str, context: dict[str, Any]) -> str:
        # The context jinja would build (its globals, then ours), from a copy of the globals made once:
        # jinja merges them from a ChainMap on every render.
        return "".join(self.template.blocks[block](self.template.new_context({**self._globals, **context}, shared=True)))

    def block(self, block: str, **context: Any) -> str:
        loop = self._plain_loops.get(block)
        items = context.get(loop.variable) if loop else None
        if loop is None or not isinstance(items, list) or len(items) < 2:
            return self._render(block, context).strip()
        # The loop's lines, joined here; jinja renders the rest around one marker line.
        text = self._render(block, {**context, loop.variable: [loop.marker]})
        if text.count(loop.marked) != 1:  # a marker in the context's own values: jinja renders it all
            return self._render(block, context).strip()
        return text.replace(loop.marked, loop.lines(items, self.template.environment.getattr)).strip()

    @cached_property
    def _plain_loops(self) -> dict[str, PlainLoop]:
        return {name: loop for name in self.template.blocks if (loop := plain_loop(self.source, name)) is not None}

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
    return PromptTemplate(name=path.stem, version=version, template=template, source=source)
