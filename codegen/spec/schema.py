"""Operator schemas, parsed by torch's own schema parser into a frozen model.

torch is the oracle for the schema language: whatever ``torch._C.parse_schema`` accepts is what
``torch.library.define`` registers. It is lenient in places that would only fail later (an unknown
type name parses as a type variable; duplicate argument names parse), so this module adds those
checks and turns every problem into a message with a column inside the schema string.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass

import torch

# real_type text -> Python annotation used in generated signatures.
_SCALAR_ANNOTATIONS = {
    "int": "int",
    "SymInt": "int",
    "float": "float",
    "bool": "bool",
    "str": "str",
    "ScalarType": "torch.dtype",
    "Layout": "torch.layout",
    "MemoryFormat": "torch.memory_format",
    "Device": "torch.device",
    "Generator": "torch.Generator",
    "Scalar": "float | int | bool",
}


@dataclass(frozen=True, slots=True)
class Argument:
    name: str
    type: str  # the schema type as written canonically, e.g. "Tensor?", "int[2]", "SymInt"
    annotation: str  # Python annotation for generated code
    default: str | None  # Python literal, or None when the argument has no default
    default_value: object  # the default as a Python value (None also when there is none)
    is_tensor: bool  # Tensor or Tensor?
    optional: bool  # the type is T?
    is_tensor_list: bool
    alias: str | None  # alias set name, e.g. "a"
    is_write: bool  # (a!)
    kwarg_only: bool
    offset: int | None = None  # where its type starts in the written schema text
    name_offset: int | None = None  # where its name starts in the written schema text

    @property
    def has_default(self) -> bool:
        return self.default is not None

    @property
    def is_scalar(self) -> bool:
        return not self.is_tensor and not self.is_tensor_list


@dataclass(frozen=True, slots=True)
class Return:
    name: str | None
    type: str
    alias: str | None
    is_write: bool


@dataclass(frozen=True, slots=True)
class Schema:
    text: str  # the schema as written in the spec, without the operator name
    canonical: str  # torch's rendering of the parsed schema, including the operator name
    arguments: tuple[Argument, ...]
    returns: tuple[Return, ...]

    def argument(self, name: str) -> Argument | None:
        for arg in self.arguments:
            if arg.name == name:
                return arg
        return None

    @property
    def tensor_arguments(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if a.is_tensor)

    @property
    def mutated(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if a.is_write)


class SchemaError(Exception):
    """A schema problem with the 0-based offset into the written schema text, if known."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


_KIND_NAMES = {
    "SymIntType": "SymInt",
    "ScalarTypeType": "ScalarType",
    "LayoutType": "Layout",
    "MemoryFormatType": "MemoryFormat",
    "DeviceObjType": "Device",
    "GeneratorType": "Generator",
    "NumberType": "Scalar",
}


def type_text(t, size: int | None = None) -> str:
    """The schema spelling of a parsed type; ``size`` is a fixed list length (``int[2]``)."""
    kind = t.kind()
    if kind in _KIND_NAMES:
        return _KIND_NAMES[kind]
    if kind == "OptionalType":
        return type_text(t.getElementType(), size) + "?"
    if kind == "ListType":
        return type_text(t.getElementType()) + f"[{size if size is not None else ''}]"
    return str(t)


@functools.cache
def _scalar_types() -> dict[int, torch.dtype]:
    """torch's ScalarType numbers (what the parser gives for ``ScalarType x=long``) to dtypes."""
    out: dict[int, torch.dtype] = {}
    for name in dir(torch):
        dtype = getattr(torch, name)
        if not isinstance(dtype, torch.dtype) or str(dtype) != f"torch.{name}":
            continue
        try:
            number = torch._C.parse_schema(f"f(ScalarType a={name}) -> ()").arguments[0]
        except RuntimeError:
            continue
        out.setdefault(number.default_value, dtype)
    return out


def _python_default(base: str, value):
    """A parsed default as the Python object a caller would pass (enums come back as ints)."""
    if value is None:
        return None
    if base == "ScalarType":
        return _scalar_types()[value]
    if base == "Layout":
        return {0: torch.strided}[value]
    if base == "MemoryFormat":
        return {0: torch.contiguous_format}[value]
    if base == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # what the dispatcher passes for 'float x=1'
    return value


def _annotation(type_text: str) -> str:
    if type_text.endswith("?"):
        return _annotation(type_text[:-1]) + " | None"
    m = re.fullmatch(r"(.+)\[\d*\]", type_text)
    if m:
        return f"list[{_annotation(m.group(1))}]"
    if type_text == "Tensor":
        return "Tensor"
    return _SCALAR_ANNOTATIONS[type_text]


def _base_type(type_text: str) -> str:
    return re.sub(r"(\?|\[\d*\])+$", "", type_text)


def _literal(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)


def _offset_of(text: str, pattern: str) -> int | None:
    m = re.search(pattern, text)
    return m.start() if m else None


def returns_offset(text: str) -> int | None:
    """Where the returns start in the written schema text (after '->' and its spaces)."""
    arrow = text.find("->")
    if arrow < 0:
        return None
    rest = text[arrow + 2 :]
    return arrow + 2 + len(rest) - len(rest.lstrip())


def _split_top(text: str, start: int, end: int) -> list[tuple[int, str]]:
    """Pieces of ``text[start:end]`` between top-level commas: (offset of the piece, piece)."""
    pieces: list[tuple[int, str]] = []
    depth, quote, escaped, begin = 0, None, False, start
    for i in range(start, end):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            pieces.append((begin, text[begin:i]))
            begin = i + 1
    if text[begin:end].strip():
        pieces.append((begin, text[begin:end]))
    out = []
    for offset, piece in pieces:
        stripped = piece.lstrip()
        out.append((offset + len(piece) - len(stripped), stripped.rstrip()))
    return out


_PIECE = re.compile(r"^(?P<type>.*?)(?:\s+(?P<name>\w+)(?P<default>\s*=.*)?)?$", re.S)


def _written_types(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]] | None:
    """Offsets and spellings of each argument's and return's type as written, or None."""
    depth, close = 0, None
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth == 0:
                close = i
                break
    if close is None:
        return None
    # Returns (argument types, return types, argument name offsets).
    args = []
    for offset, piece in _split_top(text, text.index("(") + 1, close):
        if piece == "*":
            continue
        m = _PIECE.match(piece)
        args.append((offset, m["type"], offset + m.start("name") if m["name"] else None))
    arrow = text.find("->", close)
    if arrow < 0:
        return [(o, t) for o, t, _ in args], [], [n for _, _, n in args]
    start = arrow + 2
    while start < len(text) and text[start].isspace():
        start += 1
    if text.startswith("(", start):
        end = text.rfind(")")
        rets = _split_top(text, start + 1, end)
    else:
        rets = _split_top(text, start, len(text))
    return (
        [(o, t) for o, t, _ in args],
        [(offset, _PIECE.match(piece)["type"]) for offset, piece in rets],
        [n for _, _, n in args],
    )


def parse_schema(qualname: str, text: str, *, forward: bool = False) -> Schema:
    """Parse ``text`` ("(args) -> returns") as the schema of ``qualname``; raise SchemaError."""
    if not isinstance(text, str) or not text.strip().startswith("("):
        raise SchemaError(
            "a schema starts with '(' and lists the arguments, e.g. '(Tensor x) -> Tensor'", 0
        )
    if not text.isascii():
        # torch's parser reads bytes: non-ASCII text makes it fail with UnicodeDecodeError.
        offset, char = next((i, c) for i, c in enumerate(text) if not c.isascii())
        raise SchemaError(f"schemas must be ASCII text; found {char!r}", offset)
    if not qualname.isascii():
        raise SchemaError(f"operator names must be ASCII for torch; got '{qualname}'", 0)
    full = f"{qualname}{text}"
    try:
        parsed = torch._C.parse_schema(full)
    except UnicodeError:
        raise SchemaError("invalid schema: torch cannot decode it", 0) from None
    except (IndexError, ValueError, TypeError, OverflowError) as exc:
        # torch's C++ parser lets some exceptions through untranslated (std::stod: IndexError).
        raise SchemaError(
            f"invalid schema: torch's parser failed ({type(exc).__name__}: {exc})", None
        ) from None
    except RuntimeError as exc:
        lines = str(exc).strip().splitlines()
        offset = None
        for i, line in enumerate(lines):
            if "<--- HERE" in line and i > 0:
                offset = max(0, line.index("~") - len(qualname))
        message = lines[0].rstrip(":").strip() if lines else "invalid schema"
        if "unexpected type" in message:
            message = "unknown or misplaced type; types are: Tensor, " + ", ".join(
                _SCALAR_ANNOTATIONS
            )
        if "INTERNAL ASSERT FAILED" in message:
            message = message.split("please report a bug to PyTorch.")[-1].strip()
            message = message.split(". Parameter")[0].strip().rstrip(".")
        raise SchemaError(f"invalid schema: {message}", offset) from None

    if parsed.overload_name:
        raise SchemaError("the schema must not carry an overload name", 0)
    key = (text, forward)
    signature = _signatures.get(key)
    if signature is None:
        signature = _signature(parsed, text, forward)
        if len(_signatures) >= _SIGNATURES_KEPT:
            _signatures.clear()
        _signatures[key] = signature
    arguments, returns = signature
    return Schema(text=text, canonical=str(parsed), arguments=arguments, returns=returns)


# Note [schema signatures]: what parse_schema reads from torch's parse of "<qualname><text>",
# besides the canonical text, depends on the text alone (the operator's name is only its name),
# so it is kept per text and forward flag: the schema of an operator whose text another one
# already wrote is only parsed by torch (which still reads the whole string, the name included).
# Values are frozen and failures are not kept; the dict empties when it reaches _SIGNATURES_KEPT.
_signatures: dict[tuple[str, bool], tuple[tuple[Argument, ...], tuple[Return, ...]]] = {}
_SIGNATURES_KEPT = 4096


def _signature(parsed, text: str, forward: bool) -> tuple[tuple[Argument, ...], tuple[Return, ...]]:
    """The arguments and returns of ``parsed``, torch's parse of ``text``; raise SchemaError."""
    spans = _written_types(text)
    if spans is None or len(spans[0]) != len(parsed.arguments):
        spans = ([(None, type_text(a.real_type)) for a in parsed.arguments], [], None)
    name_offsets = spans[2] or [None] * len(parsed.arguments)
    if len(spans[1]) != len(parsed.returns):
        spans = (
            spans[0],
            [(_offset_of(text, r"->"), type_text(r.real_type)) for r in parsed.returns],
            spans[2],
        )
    arguments = []
    seen: set[str] = set()
    for arg, (offset, spelled), name_offset in zip(
        parsed.arguments, spans[0], name_offsets, strict=True
    ):
        written = type_text(arg.real_type, getattr(arg, "N", None))
        raw_type = type_text(arg.real_type)
        base = _base_type(written)
        _check_argument_type(arg, written, spelled, offset)
        if arg.name in seen:
            raise SchemaError(
                f"duplicate argument name '{arg.name}'",
                _offset_of(text, rf"\b{re.escape(arg.name)}\b(?=.*\b{re.escape(arg.name)}\b)"),
            )
        seen.add(arg.name)
        alias = arg.alias_info
        alias_name = None
        is_write = False
        if alias is not None:
            sets = sorted(alias.before_set)
            alias_name = sets[0] if sets else None
            is_write = bool(alias.is_write)
        default = _python_default(base, arg.default_value)
        if arg.has_default_value():
            _check_default(arg.name, base, raw_type, default, text)
            default_text = _literal(default)
        else:
            default_text = None
        arguments.append(
            Argument(
                name=arg.name,
                type=written,
                annotation=_annotation(written),
                default=default_text,
                default_value=default if arg.has_default_value() else None,
                is_tensor=base == "Tensor" and "[" not in written,
                optional=written.endswith("?"),
                is_tensor_list=base == "Tensor" and "[" in written,
                alias=alias_name,
                is_write=is_write,
                kwarg_only=arg.kwarg_only,
                offset=offset,
                name_offset=name_offset,
            )
        )
    if not any(_base_type(a.type) == "Tensor" for a in arguments):
        first = spans[0][0] if spans[0] else (1 if text.startswith("()") else None, "()")
        raise SchemaError(
            f"no argument is a Tensor (the first is '{first[1]}'); the generated fakes "
            "allocate outputs on the device of a Tensor argument",
            0 if not spans[0] else first[0],
        )
    returns = []
    names: set[str] = set()
    for i, (ret, (offset, spelled)) in enumerate(zip(parsed.returns, spans[1], strict=True)):
        written = type_text(ret.real_type)
        if written not in ("Tensor", "Tensor?") and not (forward and written == "Tensor[]"):
            raise SchemaError(_return_problem(i, written, spelled, forward), offset)
        writes = next((a.name for a in arguments if a.is_write), None)
        if written == "Tensor[]" and writes is not None and ret.alias_info is None:
            # Note [list returns]: torch's auto_functionalize takes plain Tensor returns only.
            raise SchemaError(
                f"return {i} has type 'Tensor[]' and argument '{writes}' is updated in place: "
                "torch.compile cannot functionalize a custom operator that does both (it takes "
                "Tensor returns only beside in-place updates); return a fixed number of tensors: "
                "-> (Tensor a, Tensor b)",
                offset,
            )
        if ret.alias_info is not None:
            raise SchemaError(
                f"return {i} has the alias annotation '{spelled}'; returns are new tensors, "
                "never views or in-place results of an input: torch cannot functionalize a "
                "custom operator whose return aliases an input (opcheck and torch.compile fail), "
                "so mark the input 'Tensor(a!)' and return nothing or something else",
                offset,
            )
        if ret.name and ret.name in names:
            raise SchemaError(f"duplicate return name '{ret.name}'", _offset_of(text, r"->"))
        if ret.name:
            names.add(ret.name)
        returns.append(Return(name=ret.name or None, type=written, alias=None, is_write=False))
    return tuple(arguments), tuple(returns)


_TYPES_HINT = (
    "Tensor, Tensor?, Tensor[], Tensor?[], Tensor[]?, "
    + ", ".join(_SCALAR_ANNOTATIONS)
    + ", their optionals (int?) and lists of scalars (int[], int[2], float[]?)"
)


def _check_argument_type(arg, written: str, spelled: str, offset: int | None) -> None:
    """Refuse argument types that torch parses but the generator cannot generate correctly."""
    name = arg.name
    base = _base_type(written)
    lists = written.count("[")
    if base not in _SCALAR_ANNOTATIONS and base != "Tensor" or lists > 1:
        raise SchemaError(
            f"type '{spelled}' of argument '{name}' is not supported by the generator; types are: "
            + _TYPES_HINT,
            offset,
        )
    if base == "Tensor" and lists and written not in ("Tensor[]", "Tensor?[]", "Tensor[]?"):
        raise SchemaError(
            f"type '{spelled}' of argument '{name}' is not supported: tensor lists are "
            "'Tensor[]', 'Tensor?[]' or 'Tensor[]?', without a fixed size",
            offset,
        )
    alias = arg.alias_info
    if alias is None:
        return
    if written == "Tensor[]?" and alias.is_write:
        raise SchemaError(
            f"type '{spelled}' of argument '{name}' is not supported: torch.compile fails on an "
            "optional list updated in place when it is None (Inductor, torch 2.13); write "
            "'Tensor(a!)[]' and pass an empty list for none",
            offset,
        )
    if base != "Tensor":
        raise SchemaError(
            f"argument '{name}' of type '{spelled}' carries an alias annotation; only tensors "
            "(Tensor(a!), Tensor(a!)[]) can be updated in place (torch cannot functionalize "
            "an annotated non-Tensor argument either: opcheck and torch.compile fail)",
            offset,
        )
    if not alias.is_write or set(alias.after_set) - set(alias.before_set):
        raise SchemaError(
            f"argument '{name}' has the read-only alias annotation '{spelled}'; outputs are new "
            f"tensors, never views of inputs; declare in-place updates as 'Tensor(a!) {name}'",
            offset,
        )


def _return_problem(i: int, written: str, spelled: str, forward: bool = False) -> str:
    if written in ("Tensor?[]", "Tensor[]?"):
        # Note [list returns]: the fake must return None exactly where the launcher does, and
        # no declaration can say which elements of a list (or whether the list) are absent.
        return (
            f"return {i} has type '{spelled}'; a list return is 'Tensor[]', always given and "
            "holding tensors only: no declaration could say which of its elements (or whether "
            "the list) the fake returns as None"
        )
    if written == "Tensor?":
        hint = "use two fixed-arity operators (an arity_pair) instead of optional returns"
    elif written == "Tensor[]" and not forward:
        hint = (
            "a list of tensors ('Tensor[]') is returned only by the forward schema of an "
            "operator without a backward or arity_pair"
        )
    elif "[" in written:
        hint = "return a fixed number of tensors: -> (Tensor a, Tensor b)"
    else:
        # torch refuses these too: Dynamo stops at a custom operator that returns a non-Tensor
        # ("torch.* op returned non-Tensor"), and a fake cannot know a value the kernel computes.
        return (
            f"return {i} has type '{spelled}'; torch.compile cannot trace a custom operator "
            "that returns a non-Tensor value, so operators return Tensor values only (return "
            "the value as a 0-dim Tensor)"
        )
    return f"return {i} has type '{spelled}'; operators return Tensor values only ({hint})"


def _check_default(name: str, base: str, raw_type: str, value, text: str) -> None:
    if value is None:
        if not raw_type.endswith("?"):
            raise SchemaError(
                f"argument '{name}' of type {raw_type} cannot default to None; make it {raw_type}?",
                _offset_of(text, rf"\b{re.escape(name)}\s*="),
            )
        return
    expected = {"int": int, "SymInt": int, "float": (int, float), "bool": bool, "str": str}.get(
        base
    )
    if expected is None or "[" in raw_type:
        return
    ok = isinstance(value, expected) and not (base in ("int", "SymInt") and isinstance(value, bool))
    if base == "int" and isinstance(value, float):
        ok = False
    if not ok:
        raise SchemaError(
            f"default of argument '{name}' ({value!r}) is not a valid {base}",
            _offset_of(text, rf"\b{re.escape(name)}\s*="),
        )
