"""Shape declarations: ``[..., H, K]``, ``[N + 1]``, ``[H * K]``.

Each entry is ``...`` (the shared leading dims, called ``batch`` in test samples), an integer, or an
integer expression over dim names with ``+ - * //`` and parentheses. Expressions are parsed with
Python's ``ast`` and only that grammar is accepted; generated code is re-rendered from the checked
tree, never pasted from the spec. Text longer, more nested or with more tokens than limits.py
allows is refused before ``ast.parse`` reads it, so no tree is deeper than its token count and
no walk below recurses further.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from .limits import MAX_RANK, count_problem, expression_problem, int_problem

ELLIPSIS = "..."

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//"}


class ShapeError(Exception):
    pass


class EvaluationError(ShapeError):
    """An expression that cannot be evaluated for given sizes (a division by zero)."""


@functools.cache
def _parsed(text: str) -> ast.expr:
    """The tree of a checked expression's text: only read, so one is shared by every use."""
    return ast.parse(text, mode="eval").body


@dataclass(frozen=True, slots=True)
class Expr:
    """A checked integer expression; ``text`` is its canonical rendering."""

    text: str
    names: tuple[str, ...]  # dim names read
    tensors: tuple[str, ...] = ()  # tensors whose .shape is read or whose presence is tested
    flags: tuple[str, ...] = ()  # arguments tested as a condition ('a if <flag> else b')

    @property
    def name(self) -> str | None:
        """The dim name when the expression is a single name, else None."""
        return self.text if self.names == (self.text,) else None

    def render(self, rename: dict[str, str]) -> str:
        return _render(_parsed(self.text), rename)

    def evaluate(
        self,
        env: dict[str, int],
        tensors: dict[str, tuple[int, ...] | None] | None = None,
        flags: dict[str, bool] | None = None,
    ) -> int:
        """Value for sizes ``env``; ``tensors`` gives shapes of inputs (None: absent), ``flags``
        the values of the arguments tested as conditions (a missing one: KeyError)."""
        return _evaluate(_parsed(self.text), env, tensors or {}, flags or {})


@dataclass(frozen=True, slots=True)
class Shape:
    entries: tuple[Expr | str, ...]  # str entries are ELLIPSIS

    @property
    def has_ellipsis(self) -> bool:
        return ELLIPSIS in self.entries

    @property
    def before(self) -> tuple[Expr, ...]:
        i = self.entries.index(ELLIPSIS) if self.has_ellipsis else len(self.entries)
        return self.entries[:i]  # type: ignore[return-value]

    @property
    def after(self) -> tuple[Expr, ...]:
        if not self.has_ellipsis:
            return ()
        return self.entries[self.entries.index(ELLIPSIS) + 1 :]  # type: ignore[return-value]

    @property
    def min_rank(self) -> int:
        return len(self.entries) - (1 if self.has_ellipsis else 0)

    def __str__(self) -> str:
        return "[" + ", ".join(e if isinstance(e, str) else e.text for e in self.entries) + "]"


def _render(node: ast.AST, rename: dict[str, str]) -> str:
    if isinstance(node, ast.IfExp):
        # A flag test is an argument's name, never a dim: ``rename`` does not apply to it.
        test = node.test.id if isinstance(node.test, ast.Name) else _render(node.test, rename)
        return f"{_render(node.body, rename)} if {test} else {_render(node.orelse, rename)}"
    if isinstance(node, ast.Compare):
        op = "is not" if isinstance(node.ops[0], ast.IsNot) else "is"
        return f"{node.left.id} {op} None"
    if isinstance(node, ast.Subscript):
        return f"{node.value.value.id}.shape[{_render(node.slice, {})}]"
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.Name):
        return rename.get(node.id, node.id)
    if isinstance(node, ast.UnaryOp):
        return f"-{_render_operand(node.operand, rename)}"
    if isinstance(node, ast.BinOp):
        op = _BINOPS[type(node.op)]
        left = _render_operand(node.left, rename, node)
        right = _render_operand(node.right, rename, node, right=True)
        return f"{left} {op} {right}"
    raise AssertionError(node)


_PREC = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.FloorDiv: 2}


def _render_operand(node, rename, parent=None, right=False) -> str:
    text = _render(node, rename)
    if isinstance(node, ast.IfExp):
        return f"({text})"
    if isinstance(node, ast.BinOp) and parent is not None:
        mine, theirs = _PREC[type(node.op)], _PREC[type(parent.op)]
        if mine < theirs or (right and mine == theirs):
            return f"({text})"
    if isinstance(node, ast.BinOp) and parent is None:
        return f"({text})"
    return text


def _evaluate(node: ast.AST, env: dict[str, int], tensors, flags=None) -> int:
    flags = {} if flags is None else flags
    if isinstance(node, ast.IfExp):
        if isinstance(node.test, ast.Name):
            taken = bool(flags[node.test.id])
        else:
            taken = tensors.get(node.test.left.id) is not None
            if isinstance(node.test.ops[0], ast.Is):
                taken = not taken
        return _evaluate(node.body if taken else node.orelse, env, tensors, flags)
    if isinstance(node, ast.Subscript):
        shape = tensors[node.value.value.id]
        return shape[_evaluate(node.slice, env, tensors, flags)]
    if isinstance(node, ast.Constant):
        return int(node.value)
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.UnaryOp):
        return -_evaluate(node.operand, env, tensors, flags)
    left = _evaluate(node.left, env, tensors, flags)
    right = _evaluate(node.right, env, tensors, flags)
    op = type(node.op)
    if op is ast.Add:
        return left + right
    if op is ast.Sub:
        return left - right
    if op is ast.Mult:
        return left * right
    if right == 0:
        raise EvaluationError(f"division by zero in '{ast.unparse(node)}'")
    return left // right


def _constant(node: ast.AST) -> int | None:
    """The value of an expression without names, else None."""
    if any(isinstance(n, (ast.Name, ast.Subscript, ast.IfExp)) for n in ast.walk(node)):
        return None
    try:
        return _evaluate(node, {}, {})
    except (EvaluationError, KeyError, TypeError, ValueError):
        return None


def _check(
    node: ast.AST,
    names: list[str],
    tensors: list[str] | None = None,
    flags: list[str] | None = None,
) -> None:
    if tensors is not None and isinstance(node, ast.IfExp):
        test = node.test
        if flags is not None and isinstance(test, ast.Name):
            # 'a if <flag> else b': the resolver checks that <flag> is a bool argument.
            if test.id not in flags:
                flags.append(test.id)
            _check(node.body, names, tensors, flags)
            _check(node.orelse, names, tensors, flags)
            return
        if not (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Is, ast.IsNot))
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
        ):
            raise ShapeError(
                "a condition must be '<input> is None', '<input> is not None' or the name of a "
                f"bool argument, got '{ast.unparse(test)}'"
            )
        if test.left.id not in tensors:
            tensors.append(test.left.id)
        _check(node.body, names, tensors, flags)
        _check(node.orelse, names, tensors, flags)
        return
    if tensors is not None and isinstance(node, ast.Subscript):
        base = node.value
        idx = node.slice
        if isinstance(idx, ast.UnaryOp) and isinstance(idx.op, ast.USub):
            idx_ok = isinstance(idx.operand, ast.Constant) and type(idx.operand.value) is int
        else:
            idx_ok = isinstance(idx, ast.Constant) and type(idx.value) is int
        if not (
            isinstance(base, ast.Attribute)
            and base.attr == "shape"
            and isinstance(base.value, ast.Name)
            and idx_ok
        ):
            raise ShapeError(
                f"only '<input>.shape[<int>]' indexing is allowed, got '{ast.unparse(node)}'"
            )
        if base.value.id not in tensors:
            tensors.append(base.value.id)
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise ShapeError(f"only integer literals are allowed, got {node.value!r}")
        if problem := int_problem(node.value):
            raise ShapeError(f"{problem}, got {node.value}")
        return
    if isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise ShapeError(f"dim name '{node.id}' must not start with '_'")
        if node.id not in names:
            names.append(node.id)
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        _check(node.operand, names, tensors, flags)
        return
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        _check(node.left, names, tensors, flags)
        _check(node.right, names, tensors, flags)
        if isinstance(node.op, ast.FloorDiv) and _constant(node.right) == 0:
            raise ShapeError(f"division by zero in '{ast.unparse(node)}'")
        return
    raise ShapeError(
        f"unsupported syntax '{ast.unparse(node)}'; use dim names, integers, + - * // and parentheses"
    )


def parse_entry(entry: object) -> Expr | str:
    if entry == ELLIPSIS:
        return ELLIPSIS
    if isinstance(entry, bool):
        raise ShapeError(f"shape entry {entry!r} is not a dim")
    if isinstance(entry, int):
        if entry < 0:
            raise ShapeError(f"a fixed size must be >= 0, got {entry}")
        return Expr(str(entry), ())
    if not isinstance(entry, str) or not entry.strip():
        raise ShapeError(f"shape entry {entry!r} must be '...', an integer or a dim expression")
    return _shape_expr(entry)


@functools.lru_cache(maxsize=4096)
def _shape_expr(entry: str) -> Expr:
    """A shape entry's checked expression, kept per text: most shapes reuse a few dim names."""
    _measure(entry)
    try:
        tree = ast.parse(entry.strip(), mode="eval").body
    except SyntaxError:
        raise ShapeError(f"cannot parse shape expression '{entry}'") from None
    names: list[str] = []
    _check(tree, names)
    return Expr(_render(tree, {}), tuple(names))


def parse_dim_expr(text: object) -> Expr:
    """A derived dim: integer arithmetic over dims, ``<input>.shape[i]``,
    ``a if <input> is None else b`` and ``a if <flag> else b`` (``<flag>`` a name, which the
    resolver checks is a ``bool`` argument of the forward schema)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return Expr(str(text), ())
    if not isinstance(text, str) or not text.strip():
        raise ShapeError(f"a derived dim must be an expression string, got {text!r}")
    _measure(text)
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise ShapeError(f"cannot parse dim expression '{text}'") from None
    names: list[str] = []
    tensors: list[str] = []
    flags: list[str] = []
    _check(tree, names, tensors, flags)
    return Expr(_render(tree, {}), tuple(names), tuple(tensors), tuple(flags))


def _measure(text: str) -> None:
    """Refuse text too large to parse (limits.py), before anything recursive reads it."""
    if problem := expression_problem(text):
        raise ShapeError(problem)


def parse_shape(entries: list[object]) -> Shape:
    if problem := count_problem(len(entries), MAX_RANK, "entries in the shape"):
        raise ShapeError(problem)
    parsed = tuple(parse_entry(e) for e in entries)
    if parsed.count(ELLIPSIS) > 1:
        raise ShapeError("'...' may appear at most once in a shape")
    return Shape(parsed)


_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_COMPARE_FN = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


@dataclass(frozen=True, slots=True)
class Condition:
    """A comparison of two dim expressions, e.g. ``B == 1`` or ``K <= 256``."""

    left: Expr
    op: str
    right: Expr

    @property
    def text(self) -> str:
        return f"{self.left.text} {self.op} {self.right.text}"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.left.names + self.right.names))

    def holds(self, env: dict[str, int]) -> bool:
        """Whether the sizes ``env`` satisfy it; a check that divides by zero does not hold."""
        try:
            return _COMPARE_FN[self.op](self.left.evaluate(env), self.right.evaluate(env))
        except EvaluationError:
            return False


def parse_condition(text: object) -> Condition:
    if not isinstance(text, str) or not text.strip():
        raise ShapeError(f"a check must be a comparison such as 'B == 1', got {text!r}")
    _measure(text)
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise ShapeError(f"cannot parse check '{text}'") from None
    if not (isinstance(tree, ast.Compare) and len(tree.ops) == 1 and type(tree.ops[0]) in _COMPARE):
        raise ShapeError(
            f"a check must compare two dim expressions with one of == != < <= > >=, got '{text}'"
        )
    sides = []
    for node in (tree.left, tree.comparators[0]):
        names: list[str] = []
        _check(node, names)
        sides.append(Expr(_render(node, {}), tuple(names)))
    return Condition(sides[0], _COMPARE[type(tree.ops[0])], sides[1])
