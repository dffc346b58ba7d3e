"""What ``torch.library.triton_op`` would register for a generated shim, computed up front.

triton_op infers its schema from the shim's annotations (``infer_schema``) instead of taking the
written one: it drops return names, renames alias sets, and registers every ``int`` as
``SymInt``. The generator asks torch what it would register for the shim it is about to write and
refuses the operator when that differs from the written schema in anything but return names,
so the operator a user declares is the operator torch has.
"""

from __future__ import annotations

import inspect
import logging

import torch

from ..spec.schema import Argument, Schema, type_text

# What the generated shim's annotations name, for infer_schema's eval.
_NAMESPACE = {"torch": torch, "Tensor": torch.Tensor}
_NO_DEFAULT = inspect.Parameter.empty


def _parameter(a: Argument) -> inspect.Parameter:
    kind = (
        inspect.Parameter.KEYWORD_ONLY if a.kwarg_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
    )
    annotation = eval(a.annotation, dict(_NAMESPACE))  # noqa: S307 - generated annotation text
    default = a.default_value if a.has_default else _NO_DEFAULT
    if isinstance(default, list):
        default = tuple(default)  # as the generated shim writes it
    return inspect.Parameter(a.name, kind, default=default, annotation=annotation)


def inferred_schema(schema: Schema) -> str:
    """The schema triton_op registers for a shim with ``schema``'s parameters."""

    def shim(*args, **kwargs):  # pragma: no cover - never called
        raise AssertionError

    n = len(schema.returns)
    kinds = tuple(
        list[torch.Tensor] if r.type == "Tensor[]" else torch.Tensor for r in schema.returns
    )
    returns = kinds[0] if n == 1 else tuple[kinds] if n else None
    shim.__signature__ = inspect.Signature(
        [_parameter(a) for a in schema.arguments], return_annotation=returns
    )
    mutated = tuple(a.name for a in schema.arguments if a.is_write)
    return torch.library.infer_schema(shim, mutates_args=mutated)


def _argument_key(a) -> tuple:
    alias = a.alias_info
    return (
        a.name,
        type_text(a.real_type, getattr(a, "N", None)),
        repr(a.default_value) if a.has_default_value() else None,
        a.kwarg_only,
        bool(alias is not None and alias.is_write),
    )


def differences(qualname: str, schema: Schema) -> list[str]:
    """How the schema triton_op would register differs from ``schema`` (return names aside).

    The answer depends on the schema's text alone (Note [schema signatures] in spec/schema.py:
    the operator's name is only its name), so it is kept per text.
    """
    found = _differences.get(schema.text)
    if found is None:
        found = tuple(_differences_of(qualname, schema))
        if len(_differences) >= _DIFFERENCES_KEPT:
            _differences.clear()
        _differences[schema.text] = found
    return list(found)


_differences: dict[str, tuple[str, ...]] = {}
_DIFFERENCES_KEPT = 4096


def _differences_of(qualname: str, schema: Schema) -> list[str]:
    quiet = logging.getLogger("torch._library")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # infer_schema warns before it raises on some types
    try:
        inferred = inferred_schema(schema)
    except (ValueError, TypeError, RuntimeError) as exc:
        reason = str(exc).splitlines()[0].split(" The valid types are")[0].split(". Please file")[0]
        return [
            f"triton_op cannot register this schema: {reason.removeprefix('infer_schema(func): ')}"
        ]
    finally:
        quiet.setLevel(level)
    written = torch._C.parse_schema(f"{qualname}{schema.text}")
    try:
        theirs = torch._C.parse_schema(f"{qualname}{inferred}")
    except RuntimeError:
        # infer_schema writes str defaults without escaping them.
        return [f"triton_op would register {inferred!r}, which torch cannot parse"]
    problems = []
    for ours, reg in zip(written.arguments, theirs.arguments, strict=False):
        if _argument_key(ours) != _argument_key(reg):
            problems.append(
                f"argument '{ours.name}' would be registered as '{_render(reg)}', not '{_render(ours)}'"
            )
    if len(written.arguments) != len(theirs.arguments):
        problems.append(f"triton_op would register {inferred}")
    if [str(r.type) for r in written.returns] != [str(r.type) for r in theirs.returns]:
        problems.append(f"the returns would be registered as {inferred.split(' -> ')[-1]}")
    return problems


def _render(a) -> str:
    text = f"{type_text(a.real_type, getattr(a, 'N', None))} {a.name}"
    return text + (f"={a.default_value!r}" if a.has_default_value() else "")
