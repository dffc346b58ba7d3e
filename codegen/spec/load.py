"""Spec loading: YAML text to located nodes.

Every mapping, sequence and scalar keeps the line and column it came from, so any later stage
can point at the spec. Loading is safe (no arbitrary tags), and duplicate keys are errors rather
than PyYAML's silent last-one-wins.

Anchors, aliases and merge keys (``&base``, ``*base``, ``<<: *base``) are refused with their
location, before anything is built: a spec is read by people and diffed in review, where an alias
hides what an operator declares, and refusing them rules out the exponential expansion of
"billion laughs" documents and the cycles of recursive aliases. Nesting deeper than ``MAX_DEPTH``
is refused too, so no document can exhaust the stack, and so are a text of more than
``MAX_SPEC_BYTES`` (before it is parsed), more than ``MAX_NODES`` values (reading stops there) and
integers that do not fit in 64 bits (limits.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import Errors, Location
from .limits import MAX_INT_TEXT, MAX_SPEC_BYTES, int_problem


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
    """An ordered mapping of string keys to nodes, with each key's own location.

    Keys are distinct (the loader reports duplicates); ``index`` finds an entry by its key in
    constant time, so that reading every key of a large mapping stays linear.
    """

    entries: tuple[tuple[str, Location, Node], ...]
    index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", {k: i for i, (k, _, _) in enumerate(self.entries)})

    def keys(self) -> list[str]:
        return [k for k, _, _ in self.entries]

    def get(self, key: str) -> Node | None:
        i = self.index.get(key)
        return None if i is None else self.entries[i][2]

    def key_loc(self, key: str) -> Location:
        return self.entries[self.index[key]][1]

    def items(self):
        return [(k, node) for k, _, node in self.entries]


# libyaml's parser when PyYAML has it (about 20x faster), with the same marks and messages.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")
_MERGE_TAG = "tag:yaml.org,2002:merge"
_SCALAR_TYPES = (str, int, float, bool, type(None))
MAX_DEPTH = 64
# Scalars, lists and mappings of one document: about 150 make an operator (docs/spec.md, "Limits").
MAX_NODES = 250_000


def _loc(path: str, mark: yaml.Mark) -> Location:
    return Location(path, mark.line + 1, mark.column + 1)


# Scalars the spec uses, constructed without construct_object's bookkeeping (the same
# constructor is called, so values and errors are the same). Plain strings are the text itself.
_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_MISSING = object()
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


class _Deep(Exception):
    """The document nests deeper than MAX_DEPTH or has more than MAX_NODES values: reading stops
    there."""


class _TooLarge(ValueError):
    """An integer that does not fit in 64 bits, refused without echoing its text."""


class _Reader:
    """One pass over the parser's events: each is checked as it is read, and builds the nodes.

    ``refused`` collects anchors, aliases and nesting deeper than ``MAX_DEPTH`` (see the module
    doc), found in every event of the stream, skipped values and later documents included;
    ``errors`` the problems of nodes (tags, keys, values), which are reported only when nothing
    was refused, as if the nodes were built after the whole stream had been checked. Tags are
    resolved and values constructed as PyYAML's composer and SafeConstructor do, so the values,
    styles and marks are those of ``yaml.compose``.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.errors = Errors()
        self.refused = Errors()
        # The composer's error for a second document: reported only when nothing was refused.
        self.another: yaml.YAMLError | None = None
        self.depth = 0
        self.nodes = 0
        # Plain scalars resolve by their text alone (the loader has no path resolvers), and the
        # numbers, booleans and nulls are made from their tag and text alone.
        self.resolved: dict[tuple[str, Any], str] = {}
        self.constructed: dict[tuple[str, str], Any] = {}

    def read(self, text: str) -> Node | None:
        """The first document's root (None for an empty stream); every event is read."""
        loader = None
        try:
            self.loader = loader = _Loader(text)
            self.get_event = loader.get_event
            self.next()  # the stream's start
            if type(self.next()) is yaml.StreamEndEvent:
                return None
            event = self.next()
            root = self.node(event)
            self.next()  # the document's end
            following = self.next()
            if type(following) is not yaml.StreamEndEvent:
                self.another = yaml.composer.ComposerError(
                    "expected a single document in the stream",
                    event.start_mark,
                    "but found another document",
                    following.start_mark,
                )
                while type(self.next()) is not yaml.StreamEndEvent:
                    pass  # the rest is checked too
            return root
        except _Deep:
            return None
        except yaml.YAMLError as exc:
            self.refused.add(*_syntax_error(exc, text, self.path))
            return None
        finally:
            if loader is not None:
                loader.dispose()

    def next(self) -> yaml.Event:
        """The next event, checked."""
        event = self.get_event()
        cls = type(event)
        if cls is yaml.AliasEvent:
            self.refused.add(
                _loc(self.path, event.start_mark),
                f"YAML anchors and aliases are not supported (alias '*{event.anchor}'); write the value out",
            )
        elif (
            cls is yaml.ScalarEvent
            or cls is yaml.MappingStartEvent
            or cls is yaml.SequenceStartEvent
        ):
            if event.anchor is not None:
                self.refused.add(
                    _loc(self.path, event.start_mark),
                    f"YAML anchors and aliases are not supported (anchor '&{event.anchor}'); write the value out",
                )
            self.nodes += 1
            if self.nodes > MAX_NODES:
                self.refused.add(
                    _loc(self.path, event.start_mark),
                    f"the spec has more than {MAX_NODES} values (scalars, lists and mappings); "
                    "that is the limit",
                )
                raise _Deep
            if cls is not yaml.ScalarEvent:
                self.depth += 1
                if self.depth > MAX_DEPTH:
                    self.refused.add(
                        _loc(self.path, event.start_mark),
                        f"the spec nests deeper than {MAX_DEPTH} levels",
                    )
                    raise _Deep
        elif cls is yaml.MappingEndEvent or cls is yaml.SequenceEndEvent:
            self.depth -= 1
        return event

    def skip(self, event: yaml.Event) -> None:
        """Read past the node that ``event`` starts, building nothing."""
        if type(event) is yaml.MappingStartEvent or type(event) is yaml.SequenceStartEvent:
            depth = self.depth
            while self.depth >= depth:
                self.next()

    def node(self, event: yaml.Event) -> Node:
        """The node that ``event`` starts, read to its end."""
        mark = event.start_mark
        loc = Location(self.path, mark.line + 1, mark.column + 1)
        cls = type(event)
        if cls is yaml.ScalarEvent:
            return self.scalar(event, loc)
        if cls is yaml.AliasEvent:
            return Node(None, loc)  # refused
        kind = yaml.MappingNode if cls is yaml.MappingStartEvent else yaml.SequenceNode
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(kind, None, event.implicit)
        if tag not in _PLAIN_TAGS:
            self.errors.add(loc, f"unsupported YAML tag '{tag}'")
            self.skip(event)
            return Node(None, loc)
        if cls is yaml.MappingStartEvent:
            return Node(self.mapping(), loc)
        items = []
        while type(event := self.next()) is not yaml.SequenceEndEvent:
            items.append(self.node(event))
        return Node(tuple(items), loc)

    def mapping(self) -> Mapping:
        entries = []
        seen: dict[str, Location] = {}
        errors = self.errors
        while type(key_event := self.next()) is not yaml.MappingEndEvent:
            key_loc = _loc(self.path, key_event.start_mark)
            if type(key_event) is not yaml.ScalarEvent:
                errors.add(key_loc, "mapping keys must be plain strings")
                self.skip(key_event)
                self.skip(self.next())
                continue
            tag = self.tag(key_event)
            if tag == _MERGE_TAG or (key_event.value == "<<" and key_event.style is None):
                errors.add(key_loc, "YAML merge keys ('<<') are not supported; write the keys out")
                self.skip(self.next())
                continue
            try:
                key = self.value(key_event, tag)
            except _TooLarge as exc:
                errors.add(key_loc, f"invalid YAML key: {exc}")
                self.skip(self.next())
                continue
            except (yaml.YAMLError, *_CONSTRUCT_ERRORS) as exc:
                errors.add(key_loc, f"invalid YAML key: {getattr(exc, 'problem', None) or exc}")
                self.skip(self.next())
                continue
            if not isinstance(key, str):
                key = str(key_event.value)
            if key in seen:
                first = seen[key]
                errors.add(
                    key_loc, f"duplicate key '{key}' (first defined at {first.line}:{first.col})"
                )
                self.skip(self.next())
                continue
            seen[key] = key_loc
            entries.append((key, key_loc, self.node(self.next())))
        return Mapping(tuple(entries))

    def tag(self, event: yaml.ScalarEvent) -> str:
        tag = event.tag
        if tag is None or tag == "!":
            key = (event.value, event.implicit)
            tag = self.resolved.get(key)
            if tag is None:
                tag = self.resolved[key] = self.loader.resolve(
                    yaml.ScalarNode, event.value, event.implicit
                )
        return tag

    def value(self, event: yaml.ScalarEvent, tag: str) -> Any:
        """The scalar's value: the text itself for a string, else what SafeConstructor makes.

        Scalars the spec uses are constructed without construct_object's bookkeeping (the same
        constructor is called, so values and errors are the same).
        """
        if tag == _STR_TAG:
            return event.value
        if tag == _INT_TAG and len(event.value) > MAX_INT_TEXT:
            raise _TooLarge(
                f"an integer written with {len(event.value)} characters; "
                f"the limit is {MAX_INT_TEXT} (integers must fit in 64 bits)"
            )
        key = (tag, event.value)
        value = self.constructed.get(key, _MISSING)
        if value is not _MISSING:
            return value
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        constructor = _SCALAR_CONSTRUCTORS.get(tag)
        if constructor is None:
            return self.loader.construct_object(node)
        value = constructor(self.loader, node)
        if tag == _INT_TAG and (problem := int_problem(value)):
            raise _TooLarge(f"{problem}, got {event.value}")
        self.constructed[key] = value
        return value

    def scalar(self, event: yaml.ScalarEvent, loc: Location) -> Node:
        shift = None
        if event.start_mark.line == event.end_mark.line and event.style in (None, '"', "'"):
            shift = 1 if event.style else 0
        tag = self.tag(event)
        try:
            value = self.value(event, tag)
        except _TooLarge as exc:
            self.errors.add(loc, f"invalid YAML value: {exc}")
            return Node(None, loc)
        except yaml.YAMLError as exc:
            self.errors.add(loc, f"invalid YAML value: {getattr(exc, 'problem', None) or exc}")
            return Node(None, loc)
        except _CONSTRUCT_ERRORS:
            self.errors.add(loc, f"invalid YAML value '{event.value}' for tag '{tag}'")
            return Node(None, loc)
        if not isinstance(value, _SCALAR_TYPES):
            # SafeLoader turns 2024-01-01 into a date and !!binary into bytes: no spec value is either.
            self.errors.add(
                loc,
                f"unsupported YAML value '{event.value}' ({type(value).__name__}); quote it to make it a string",
            )
            return Node(None, loc)
        return Node(value, loc, shift)


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
    The text is parsed once: the events are checked (anchors, aliases, depth) as the nodes are
    built from them (``_Reader``).
    """
    own = errors is None
    errors = Errors() if errors is None else errors
    if text.startswith("\ufeff"):
        text = text[1:]  # a byte-order mark is not part of the document
    if len(text) > MAX_SPEC_BYTES // 4:  # else its UTF-8 cannot be over the limit
        data = text.encode("utf-8", "surrogatepass")
        if len(data) > MAX_SPEC_BYTES:
            position = len(data[:MAX_SPEC_BYTES].decode("utf-8", "ignore"))
            line = text.count("\n", 0, position) + 1
            col = position - (text.rfind("\n", 0, position) + 1) + 1
            errors.add(
                Location(path, line, col),
                f"the spec is {len(data)} bytes long; the limit is {MAX_SPEC_BYTES} bytes "
                "(the text from here on is over it)",
            )
            errors.raise_if_any()
    reader = _Reader(path)
    root = reader.read(text)
    if reader.refused.items:
        errors.items.extend(reader.refused.items)
        errors.raise_if_any()
    if reader.another is not None:
        errors.add(*_syntax_error(reader.another, text, path))
        errors.raise_if_any()
    if root is None:
        errors.add(
            Location(path, 1, 1), "the spec is empty; expected a mapping with 'version' and 'ops'"
        )
        errors.raise_if_any()
    errors.items.extend(reader.errors.items)
    if own:
        errors.raise_if_any()
    return root
