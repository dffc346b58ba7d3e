"""How a schema becomes Python: parameters, call arguments, annotations and docstring types.

Every generated function that takes schema arguments (a shim, a fake, the autograd.Function,
the public function) gets its parameters here, and the docstring names each type as the
signature annotates it. The Python type of one schema type is ``Argument.annotation``
(``spec/schema.py``); what the public function accepts at run time for each type is
``SCALAR_TYPES`` below.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...spec.schema import Argument, Schema


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter of a generated function; ``star`` marks the keyword-only ``*``."""

    name: str
    annotation: str = ""
    has_default: bool = False
    default: object = None
    star: bool = False


def params(schema: Schema) -> tuple[Param, ...]:
    """Python parameters for a schema, defaults included.

    Note [kernel defaults]: the dispatcher leaves out trailing arguments that equal their
    schema default when it calls a Python kernel or fake, so every generated function taking
    schema arguments repeats the defaults.
    """
    out: list[Param] = []
    for a in schema.arguments:
        if a.kwarg_only and not any(p.star for p in out):
            out.append(Param("*", star=True))
        out.append(param(a))
    return tuple(out)


def param(a: Argument, with_default: bool = True) -> Param:
    # A list default is written as a tuple: a launcher that mutated a shared list default
    # would change it for every later call.
    default = tuple(a.default_value) if isinstance(a.default_value, list) else a.default_value
    return Param(a.name, a.annotation, with_default and a.has_default, default)


def call_args(schema: Schema) -> tuple[str, ...]:
    """Arguments of a call in schema order; keyword-only ones are passed by keyword."""
    return tuple(f"{a.name}={a.name}" if a.kwarg_only else a.name for a in schema.arguments)


def annotation(n: int, optional: tuple[bool, ...] = (), lists: tuple[bool, ...] = ()) -> str:
    """The return annotation of ``n`` tensors, some optional or lists."""
    if n == 0:
        return "None"
    kinds = [
        "list[Tensor]"
        if (lists and lists[i])
        else "Tensor | None"
        if (optional and optional[i])
        else "Tensor"
        for i in range(n)
    ]
    return kinds[0] if n == 1 else f"tuple[{', '.join(kinds)}]"


def returns_annotation(schema: Schema) -> str:
    """What a function implementing ``schema`` returns."""
    return annotation(
        len(schema.returns),
        tuple(ret.type == "Tensor?" for ret in schema.returns),
        tuple(ret.type == "Tensor[]" for ret in schema.returns),
    )


def doc_type(a: Argument) -> str:
    """How the docstring names a non-tensor argument's type: as the signature annotates it
    (``float | None``, ``list[int]``), not in schema syntax (``float?``, ``int[]``)."""
    return a.annotation


# What the public function accepts for each schema type (Note [scalar types] in _runtime), symbolic
# values included (torch.compile passes SymInt / SymFloat for dynamic scalars). bool is a subclass
# of int: where the classes list int but not bool, a bool is refused too.
SCALAR_TYPES = {
    "int": ("int", "torch.SymInt"),
    "SymInt": ("int", "torch.SymInt"),
    "float": ("float", "int", "torch.SymFloat", "torch.SymInt"),
    "bool": ("bool", "torch.SymBool"),
    "str": ("str",),
    "ScalarType": ("torch.dtype",),
    "Layout": ("torch.layout",),
    "MemoryFormat": ("torch.memory_format",),
    "Device": ("torch.device", "str"),
    "Generator": ("torch.Generator",),
    "Scalar": ("bool", "int", "float", "torch.SymInt", "torch.SymFloat", "torch.SymBool"),
}

# How a refusal names each type.
SCALAR_EXPECTED = {
    "SymInt": "int",
    "ScalarType": "torch.dtype",
    "Layout": "torch.layout",
    "MemoryFormat": "torch.memory_format",
    "Device": "torch.device or a device string",
    "Generator": "torch.Generator",
    "Scalar": "a real number (bool, int or float)",
}

# Element types whose fixed-size lists also take one number, repeated (torch's ``stride=2``).
BROADCAST = ("int", "SymInt", "float")


def classes(base: str) -> str:
    """The classes an argument of scalar type ``base`` may be, as an ``isinstance`` operand."""
    types = SCALAR_TYPES[base]
    return types[0] if len(types) == 1 else f"({', '.join(types)})"
