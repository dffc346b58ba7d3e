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


def parse_schema(qualname: str, text: str) -> Schema:
    """Parse ``text`` ("(args) -> returns") as the schema of ``qualname``; raise SchemaError."""
    if not isinstance(text, str) or not text.strip().startswith("("):
        raise SchemaError(
            "a schema starts with '(' and lists the arguments, e.g. '(Tensor x) -> Tensor'", 0
        )
    for offset, char in enumerate(text):
        # torch's parser reads bytes: non-ASCII text makes it fail with UnicodeDecodeError.
        if not char.isascii():
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
    arguments = []
    seen: set[str] = set()
    # Offsets of each argument's written type, in order, for pointing at the culprit.
    for arg in parsed.arguments:
        written = type_text(arg.real_type, getattr(arg, "N", None))
        raw_type = type_text(arg.real_type)
        base = _base_type(written)
        if base != "Tensor" and base not in _SCALAR_ANNOTATIONS:
            raise SchemaError(
                f"unknown type '{base}' of argument '{arg.name}'; expected one of: Tensor, "
                + ", ".join(_SCALAR_ANNOTATIONS),
                _offset_of(text, rf"\b{re.escape(base)}\b"),
            )
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
            )
        )
    returns = []
    names: set[str] = set()
    for ret in parsed.returns:
        written = type_text(ret.real_type)
        if written != "Tensor":
            raise SchemaError(
                f"return type '{written}' is not supported; operators return Tensor values "
                "(use two fixed-arity operators instead of optional returns)",
                _offset_of(text, r"->"),
            )
        if ret.name and ret.name in names:
            raise SchemaError(f"duplicate return name '{ret.name}'", _offset_of(text, r"->"))
        if ret.name:
            names.add(ret.name)
        alias = ret.alias_info
        returns.append(
            Return(
                name=ret.name or None,
                type=written,
                alias=sorted(alias.before_set)[0]
                if alias is not None and alias.before_set
                else None,
                is_write=bool(alias.is_write) if alias is not None else False,
            )
        )
    return Schema(
        text=text, canonical=str(parsed), arguments=tuple(arguments), returns=tuple(returns)
    )


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
