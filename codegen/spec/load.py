"""Spec loading: YAML text to located nodes.

Every mapping, sequence and scalar keeps the line and column it came from, so any later stage
can point at the spec. Loading is safe (no arbitrary tags), and duplicate keys are errors rather
than PyYAML's silent last-one-wins.
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


def _loc(path: str, mark: yaml.Mark) -> Location:
    return Location(path, mark.line + 1, mark.column + 1)


def _convert(node: yaml.Node, path: str, loader, errors: Errors) -> Node:
    loc = _loc(path, node.start_mark)
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _PLAIN_TAGS:
        errors.add(loc, f"unsupported YAML tag '{node.tag}'")
        return Node(None, loc)
    if isinstance(node, yaml.MappingNode):
        entries = []
        seen: dict[str, Location] = {}
        for key_node, value_node in node.value:
            key_loc = _loc(path, key_node.start_mark)
            if not isinstance(key_node, yaml.ScalarNode):
                errors.add(key_loc, "mapping keys must be plain strings")
                continue
            key = loader.construct_object(key_node)
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
    if isinstance(node, yaml.SequenceNode):
        return Node(tuple(_convert(item, path, loader, errors) for item in node.value), loc)
    shift = None
    if node.start_mark.line == node.end_mark.line and node.style in (None, '"', "'"):
        shift = 1 if node.style else 0
    try:
        return Node(loader.construct_object(node), loc, shift)
    except yaml.constructor.ConstructorError as exc:
        errors.add(loc, f"invalid YAML value: {exc.problem}")
        return Node(None, loc)


def load_spec(text: str, path: str, errors: Errors | None = None) -> Node:
    """Parse spec text into located nodes.

    Syntax errors raise SpecError at once; problems that leave a usable tree (a duplicate key, an
    unsupported tag) are added to ``errors`` so later stages can report theirs in the same run.
    """
    own = errors is None
    errors = Errors() if errors is None else errors
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = _loc(path, mark) if mark else Location(path, 1, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.context_mark and exc.problem:
            start = exc.context_mark
            problem += f" ({exc.context} started at {start.line + 1}:{start.column + 1})"
        errors.add(loc, f"invalid YAML: {problem}")
        errors.raise_if_any()
        raise AssertionError("unreachable") from exc
    except yaml.YAMLError as exc:
        errors.add(Location(path, 1, 1), f"invalid YAML: {exc}")
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
