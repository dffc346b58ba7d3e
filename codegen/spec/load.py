"""Spec loading: YAML text to located nodes.

Every mapping, sequence and scalar keeps the line and column it came from, so any later stage
can point at the spec. Loading is safe (no arbitrary tags), and duplicate keys are errors rather
than PyYAML's silent last-one-wins.

Anchors, aliases and merge keys (``&base``, ``*base``, ``<<: *base``) are refused with their
location, before anything is built: a spec is read by people and diffed in review, where an alias
hides what an operator declares, and refusing them rules out the exponential expansion of
"billion laughs" documents and the cycles of recursive aliases. Nesting deeper than ``MAX_DEPTH``
is refused too, so no document can exhaust the stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from .errors import Errors, Location


@dataclass(frozen=True, slots=True)
class Node:
    """A YAML value with its location. ``value`` is a scalar, ``tuple[Node]`` or ``Mapping``."""

    value: Any
    loc: Location
    # Columns between the node's start and its text: 1 for a quoted one-line scalar, 0 for a
    # plain one, None when the text does not map onto one line (block scalars, multi-line).
    text_shift: int | None = None

    @property
    def is_map(self) -> bool:
        return isinstance(self.value, Mapping)

    @property
    def is_seq(self) -> bool:
        return isinstance(self.value, tuple)


@dataclass(frozen=True, slots=True)
class Mapping:
    """An ordered mapping of string keys to nodes, with each key's own location."""

    entries: tuple[tuple[str, Location, Node], ...]

    def keys(self) -> list[str]:
        return [k for k, _, _ in self.entries]

    def get(self, key: str) -> Node | None:
        for k, _, node in self.entries:
            if k == key:
                return node
        return None

    def key_loc(self, key: str) -> Location:
        for k, loc, _ in self.entries:
            if k == key:
                return loc
        raise KeyError(key)

    def items(self):
        return [(k, node) for k, _, node in self.entries]


# libyaml's parser when PyYAML has it (about 20x faster), with the same marks and messages.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")
_MERGE_TAG = "tag:yaml.org,2002:merge"
_SCALAR_TYPES = (str, int, float, bool, type(None))
MAX_DEPTH = 64


def _loc(path: str, mark: yaml.Mark) -> Location:
    return Location(path, mark.line + 1, mark.column + 1)


# Scalars the spec uses, constructed without construct_object's bookkeeping (the same
# constructor is called, so values and errors are the same). Plain strings are the text itself.
_STR_TAG = "tag:yaml.org,2002:str"
# What pyyaml's scalar constructors raise on a malformed explicitly tagged value: ``!!bool x``
# (KeyError), ``!!int ''`` (IndexError), ``!!float x`` (ValueError), a bad ``!!timestamp``.
_CONSTRUCT_ERRORS = (ValueError, TypeError, OverflowError, AttributeError, KeyError, IndexError)
_SCALAR_CONSTRUCTORS = {
    tag: _Loader.yaml_constructors[tag]
    for tag in (
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:null",
    )
}


def _scalar(node: yaml.ScalarNode, loader) -> Any:
    if node.tag == _STR_TAG:
        return node.value
    constructor = _SCALAR_CONSTRUCTORS.get(node.tag)
    if constructor is None:
        return loader.construct_object(node)
    return constructor(loader, node)


def _convert(node: yaml.Node, path: str, loader, errors: Errors) -> Node:
    mark = node.start_mark
    loc = Location(path, mark.line + 1, mark.column + 1)
    cls = type(node)
    if cls is not yaml.ScalarNode and node.tag not in _PLAIN_TAGS:
        errors.add(loc, f"unsupported YAML tag '{node.tag}'")
        return Node(None, loc)
    if cls is yaml.MappingNode:
        entries = []
        seen: dict[str, Location] = {}
        for key_node, value_node in node.value:
            key_loc = _loc(path, key_node.start_mark)
            if type(key_node) is not yaml.ScalarNode:
                errors.add(key_loc, "mapping keys must be plain strings")
                continue
            if key_node.tag == _MERGE_TAG or (key_node.value == "<<" and key_node.style is None):
                errors.add(key_loc, "YAML merge keys ('<<') are not supported; write the keys out")
                continue
            try:
                key = _scalar(key_node, loader)
            except (yaml.YAMLError, *_CONSTRUCT_ERRORS) as exc:
                errors.add(key_loc, f"invalid YAML key: {getattr(exc, 'problem', None) or exc}")
                continue
            if not isinstance(key, str):
                key = str(key_node.value)
            if key in seen:
                first = seen[key]
                errors.add(
                    key_loc, f"duplicate key '{key}' (first defined at {first.line}:{first.col})"
                )
                continue
            seen[key] = key_loc
            entries.append((key, key_loc, _convert(value_node, path, loader, errors)))
        return Node(Mapping(tuple(entries)), loc)
    if cls is yaml.SequenceNode:
        return Node(tuple([_convert(item, path, loader, errors) for item in node.value]), loc)
    shift = None
    if mark.line == node.end_mark.line and node.style in (None, '"', "'"):
        shift = 1 if node.style else 0
    try:
        value = _scalar(node, loader)
    except yaml.YAMLError as exc:
        errors.add(loc, f"invalid YAML value: {getattr(exc, 'problem', None) or exc}")
        return Node(None, loc)
    except _CONSTRUCT_ERRORS:
        errors.add(loc, f"invalid YAML value '{node.value}' for tag '{node.tag}'")
        return Node(None, loc)
    if not isinstance(value, _SCALAR_TYPES):
        # SafeLoader turns 2024-01-01 into a date and !!binary into bytes: no spec value is either.
        errors.add(
            loc,
            f"unsupported YAML value '{node.value}' ({type(value).__name__}); quote it to make it a string",
        )
        return Node(None, loc)
    return Node(value, loc, shift)


def _check_events(text: str, path: str, errors: Errors) -> None:
    """Refuse anchors, aliases and deep nesting before a node is composed (see the module doc)."""
    depth = 0
    parser = _Loader(text)
    try:
        while parser.check_event():
            event = parser.get_event()
            cls = type(event)
            if cls is yaml.AliasEvent:
                errors.add(
                    _loc(path, event.start_mark),
                    f"YAML anchors and aliases are not supported (alias '*{event.anchor}'); write the value out",
                )
            elif getattr(event, "anchor", None) is not None:
                errors.add(
                    _loc(path, event.start_mark),
                    f"YAML anchors and aliases are not supported (anchor '&{event.anchor}'); write the value out",
                )
            if cls is yaml.MappingStartEvent or cls is yaml.SequenceStartEvent:
                depth += 1
                if depth > MAX_DEPTH:
                    errors.add(
                        _loc(path, event.start_mark),
                        f"the spec nests deeper than {MAX_DEPTH} levels",
                    )
                    return
            elif cls is yaml.MappingEndEvent or cls is yaml.SequenceEndEvent:
                depth -= 1
    finally:
        parser.dispose()


def _syntax_error(exc: yaml.YAMLError, text: str, path: str) -> tuple[Location, str]:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        loc = _loc(path, mark) if mark else Location(path, 1, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.context_mark and exc.problem:
            start = exc.context_mark
            problem += f" ({exc.context} started at {start.line + 1}:{start.column + 1})"
        return loc, f"invalid YAML: {problem}"
    if isinstance(exc, yaml.reader.ReaderError):
        position = max(0, min(exc.position, len(text)))
        line = text.count("\n", 0, position) + 1
        col = position - (text.rfind("\n", 0, position) + 1) + 1
        char = exc.character
        shown = repr(chr(char)) if isinstance(char, int) else repr(char)
        return Location(
            path, line, col
        ), f"invalid YAML: character {shown} is not allowed ({exc.reason})"
    return Location(path, 1, 1), f"invalid YAML: {exc}"


def load_spec(text: str, path: str, errors: Errors | None = None) -> Node:
    """Parse spec text into located nodes.

    Syntax errors raise SpecError at once; problems that leave a usable tree (a duplicate key, an
    unsupported tag) are added to ``errors`` so later stages can report theirs in the same run.
    """
    own = errors is None
    errors = Errors() if errors is None else errors
    if text.startswith("\ufeff"):
        text = text[1:]  # a byte-order mark is not part of the document
    before = len(errors.items)
    try:
        _check_events(text, path, errors)
    except yaml.YAMLError as exc:
        errors.add(*_syntax_error(exc, text, path))
    if len(errors.items) > before:
        errors.raise_if_any()
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
    except yaml.YAMLError as exc:
        errors.add(*_syntax_error(exc, text, path))
        errors.raise_if_any()
        raise AssertionError("unreachable") from exc
    finally:
        loader.dispose()
    if root is None:
        errors.add(
            Location(path, 1, 1), "the spec is empty; expected a mapping with 'version' and 'ops'"
        )
        errors.raise_if_any()
    result = _convert(root, path, loader, errors)
    if own:
        errors.raise_if_any()
    return result
