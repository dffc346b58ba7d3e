"""The node reader every section builder shares: error reporting and the checks of a single node. A
``Reader`` reports each problem with the operator being built, reads a mapping while reporting
unknown keys (with a did-you-mean hint, or the feature a later spec version may add) and missing
required ones, and reads non-empty strings and identifiers. The section builders
(``build_stages.py``, ``build_tensors.py``, ``build_tests.py``) and ``build.py`` call it.
"""

from __future__ import annotations

from .errors import Errors, Location, did_you_mean, one_of
from .limits import name_problem
from .load import Mapping, Node
from .names import check_name

# Keys a later spec version may add, listed apart so that a spec using them fails clearly instead
# of being half-understood.
NOT_YET = {
    "cute": "CuTeDSL layout contracts",
    "sharding": "DTensor sharding strategies",
}


class Reader:
    def __init__(self, path: str, errors: Errors) -> None:
        self.path = path
        self.errors = errors
        self.op: str | None = None  # the operator being built, named in each diagnostic

    def error(self, loc: Location, message: str) -> None:
        self.errors.add(loc, message, self.op)

    def mapping(
        self, node: Node, what: str, keys: tuple[str, ...], required: tuple[str, ...] = ()
    ) -> Mapping | None:
        if not node.is_map:
            self.error(node.loc, f"{what} must be a mapping, got {kind(node)}")
            return None
        m: Mapping = node.value
        for key in m.keys():
            if key in keys:
                continue
            if key in NOT_YET:
                self.error(
                    m.key_loc(key),
                    f"'{key}' is not supported by this generator yet ({NOT_YET[key]})",
                )
            else:
                self.error(
                    m.key_loc(key),
                    f"unknown key '{key}' in {what}{did_you_mean(key, keys)}; expected one of: {one_of(keys)}",
                )
        for key in required:
            if m.get(key) is None:
                self.error(node.loc, f"{what} is missing required key '{key}'")
        return m

    def string(self, node: Node | None, what: str) -> str | None:
        if node is None:
            return None
        if not isinstance(node.value, str) or not node.value.strip():
            self.error(node.loc, f"{what} must be a non-empty string, got {kind(node)}")
            return None
        return node.value

    def name(self, value: str, loc: Location, what: str) -> bool:
        problem = (isinstance(value, str) and name_problem(value, what)) or check_name(value, what)
        if problem:
            self.error(loc, problem)
            return False
        return True


def is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def kind(node: Node) -> str:
    """What a node holds, as diagnostics name it: 'a mapping', 'a list', 'int 3'."""
    if node.is_map:
        return "a mapping"
    if node.is_seq:
        return "a list"
    if node.value is None:
        return "nothing"
    return f"{type(node.value).__name__} {node.value!r}"


def inside(node: Node, offset: int | None) -> Location:
    """The location of character ``offset`` of a one-line scalar, quotes accounted for."""
    if offset is None or node.text_shift is None:
        return node.loc
    return Location(node.loc.path, node.loc.line, node.loc.col + offset + node.text_shift)
