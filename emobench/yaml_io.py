"""Reading a library file safely: size limits before parsing, UTF-8 errors with line and
column, control characters (a NUL, an escape) refused with their field, a YAML loader without
duplicate keys or loose booleans, and a length limit per field.

A card is a few kilobytes; the limits stop a planted 10 MB field before it is parsed (or even
read), so `validate` answers in one line instead of loading it.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any

import yaml

from emobench.errors import InputError

try:  # libyaml parses the library about ten times faster than the pure-Python parser
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

MAX_FILE_BYTES = 64 * 1024  # every card and split file; the largest shipped one is under 30 KB
MAX_FIELD_CHARS = 4000  # every text field; the longest shipped one is under 1,000
# A config may use anchors; expanded, it may hold this many nodes (a shipped one has under 200).
# Nine levels of nine aliases expand to 9**9 nodes: refused before anything is built.
MAX_EXPANDED_NODES = 20_000


class _UniqueKeyLoader(_SafeLoader):
    """Safe loader that rejects duplicate mapping keys instead of keeping the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # the base class reports unhashable keys itself
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 reads yes/no/on/off as booleans; cards take only the literal true and false, so any
# other word stays a string and the strict card model rejects it with the field named.
_BOOL = "tag:yaml.org,2002:bool"
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL]
    for first, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
}
_UniqueKeyLoader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def display_path(path: Path) -> str:
    """Path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _scalar_paths(node: yaml.Node, path: str = "") -> Iterator[tuple[str, yaml.Node]]:
    """Every scalar of a composed document with its dotted field path (cases[2].opening)."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
            yield from _scalar_paths(value, f"{path}.{name}" if path else name)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _scalar_paths(item, f"{path}[{i}]")
    else:
        yield path, node


def _field_at(text: str, index: int) -> str:
    """The field whose value holds character index, or "" when the text does not parse."""
    try:
        root = yaml.compose(text, Loader=_SafeLoader)
    except yaml.YAMLError:
        return ""
    if root is None:
        return ""
    for path, node in _scalar_paths(root):
        if node.start_mark.index <= index < max(node.end_mark.index, node.start_mark.index + 1):
            return path
    return ""


def _not_utf8(path: Path, data: bytes, exc: UnicodeDecodeError) -> InputError:
    line_start = data.rfind(b"\n", 0, exc.start) + 1
    line = data.count(b"\n", 0, exc.start) + 1
    column = len(data[line_start:exc.start].decode("utf-8", errors="replace")) + 1
    readable = data.decode("utf-8", errors="replace")
    field = _field_at(readable, len(data[:exc.start].decode("utf-8", errors="replace")))
    where = f"line {line}, column {column}"
    return InputError(display_path(path), field or where,
                      f"not UTF-8 ({exc.reason}, byte 0x{data[exc.start]:02x})"
                      + (f" at {where}" if field else "") + "; save the file as UTF-8")


# Controls other than tab and line breaks: written raw or as a YAML escape ("\0", "\e"), they
# hide text from a reader and from the checks, and no card needs one.
_RAW_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _control(char: str) -> str:
    return f"control character U+{ord(char):04X}: a library file holds plain text"


def _raw_control(shown: str, text: str) -> InputError | None:
    """The first control character written into the file, with its field (read from a copy
    in which each control is U+FFFD, which the YAML parser reads as text) and its line."""
    match = _RAW_CONTROL.search(text)
    if match is None:
        return None
    at = match.start()
    where = f"line {text.count(chr(10), 0, at) + 1}, column {at - text.rfind(chr(10), 0, at)}"
    field = _field_at(_RAW_CONTROL.sub("\ufffd", text), at)
    return InputError(shown, field or where, _control(match.group()) + (f" (at {where})" if field else ""))


def _controls(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Each field whose parsed text holds a control character (a YAML escape makes one)."""
    if isinstance(value, str):
        if match := _CONTROL.search(value):
            yield path, match.group()
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _controls(key, path)
            yield from _controls(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _controls(item, f"{path}[{i}]")


def _too_long(value: Any, path: str = "") -> Iterator[tuple[str, int]]:
    if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
        yield path, len(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _too_long(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _too_long(item, f"{path}[{i}]")


_KEY = re.compile(rb"^\s*(?:-\s+)?([A-Za-z_][\w-]*)\s*:")


def _key_before(path: Path, limit: int) -> str:
    """The key of the line that runs past the size limit, read from the first bytes only:
    the file is never parsed, so this is the nearest key above, not a full path."""
    with path.open("rb") as handle:
        head = handle.read(limit)
    for line in reversed(head.split(b"\n")):
        if match := _KEY.match(line):
            return match.group(1).decode("ascii")
    return ""


def refuse_anchors(text: str, shown: str) -> None:
    """One InputError for the first anchor, alias or merge key, read from the event stream, which
    never expands an alias (so an alias bomb costs no more than its bytes). A syntax error is
    left to the loader, which reports it with its line."""
    try:
        for event in yaml.parse(text, Loader=_SafeLoader):
            line = f"line {event.start_mark.line + 1}" if event.start_mark else ""
            if isinstance(event, yaml.AliasEvent):
                raise InputError(shown, line, f"YAML alias *{event.anchor} is not allowed in a library "
                                 "file: write the value out (aliases can expand a small file without bound)")
            anchor = getattr(event, "anchor", None)
            if anchor is not None:
                raise InputError(shown, line, f"YAML anchor &{anchor} is not allowed in a library file: "
                                 "write each value out")
            if isinstance(event, yaml.ScalarEvent) and event.value == "<<" and event.implicit[0]:
                raise InputError(shown, line, "YAML merge key << is not allowed in a library file: "
                                 "write each key out")
    except yaml.YAMLError:
        return


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes the document holds once every alias is expanded (an alias shares its node)."""
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = MAX_EXPANDED_NODES + 1  # a node inside itself: a recursive alias
    size = 1
    if isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(item, memo) for item in node.value)
    memo[id(node)] = size = min(size, MAX_EXPANDED_NODES + 1)
    return size


def load_capped(text: str, shown: str | Path) -> Any:
    """yaml.safe_load, but a document whose aliases expand past MAX_EXPANDED_NODES nodes is
    refused with one InputError before it is built. YAML errors pass to the caller."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            size = _expanded_size(node, {})
        except RecursionError:
            raise InputError(shown, "", "nested too deeply") from None
        if size > MAX_EXPANDED_NODES:
            raise InputError(shown, f"line {node.start_mark.line + 1}", f"YAML aliases expand to over "
                             f"{MAX_EXPANDED_NODES:,} values; write the file without nested aliases")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml(path: Path) -> Any:
    """The parsed file, or one InputError naming the file and, where it can, the field."""
    shown = display_path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:  # before reading: a huge file is never loaded
            raise InputError(shown, _key_before(path, MAX_FILE_BYTES), f"the file is {size:,} "
                             f"bytes, over the {MAX_FILE_BYTES // 1024} KB limit for a library file")
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(shown, "", f"cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, data, exc) from None
    if control := _raw_control(shown, text):
        raise control
    refuse_anchors(text, shown)
    try:
        parsed = yaml.load(text, Loader=_UniqueKeyLoader)  # a safe loader: no object tags
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "unreadable"
        kind = "invalid YAML" if isinstance(exc, yaml.constructor.ConstructorError) else "YAML syntax error"
        raise InputError(shown, where, f"{kind}: {problem}") from None
    except yaml.YAMLError as exc:
        raise InputError(shown, "", f"YAML error: {exc}") from None
    try:
        long = next(_too_long(parsed), None)
    except RecursionError:
        raise InputError(shown, "", "nested too deeply for a card") from None
    if long is not None:
        raise InputError(shown, long[0], f"{long[1]:,} characters, over the {MAX_FIELD_CHARS:,} "
                         "limit for a text field")
    if escaped := next(_controls(parsed), None):
        raise InputError(shown, escaped[0] or "", _control(escaped[1]) + " (written as a YAML escape)")
    return parsed
