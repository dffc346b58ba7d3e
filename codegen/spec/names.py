"""Name hygiene for everything a spec can name.

Generated modules use names that begin with an underscore for their internals (``_l2norm_fwd``,
``_L2normFunction``), so a spec name must not begin with one. Names that generated code imports
or uses as parameters (``torch``, ``Tensor``, ``ctx``) and Python keywords are refused outright
instead of being renamed silently.
"""

from __future__ import annotations

import builtins
import keyword
import re
import sys

IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
RESERVED = frozenset(
    {"torch", "Tensor", "NamedTuple", "ctx", "self", "cls", "pytest", "batch", "set_offsets_check"}
    | {"set_index_check", "warmup", "WarmupEntry"}
)
# 'batch' names the '...' sizes in test samples and locals; an argument may take it (the
# generated code then calls its local '_batch': resolve/symbols.py, batch_local).
AMBIGUOUS = frozenset({"l", "O", "I"})
BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_"))


# Note [library names]: kernel libraries name arguments ``input``, ``self``, ``filter`` or ``_x``,
# and the public function keeps the schema's names. A parameter shadows a module-level name
# only inside its function, so an argument name is refused only where the generated code needs
# the name it would shadow: the builtins that generated code calls (GENERATED_BUILTINS, kept
# equal to what the generated files use by tests/test_probe_suites.py), the module names it
# reads (RESERVED), and the underscore names of generated internals (GENERATED_LOCALS, the
# runtime helpers imported as ``_<helper>`` and every ``_<op>...`` symbol of the operator).
GENERATED_BUILTINS = frozenset(
    {
        "AssertionError",
        "RuntimeError",
        "TypeError",
        "ValueError",
        "bool",
        "complex",
        "dict",
        "enumerate",
        "float",
        "int",
        "isinstance",
        "iter",
        "len",
        "list",
        "next",
        "object",
        "range",
        "staticmethod",
        "str",
        "super",
        "tuple",
    }
)
# Locals and test-module names of generated code that begin with an underscore.
GENERATED_LOCALS = frozenset(
    {
        "_",
        "_b",
        "_batch",
        "_bwd",
        "_c",
        "_compiled",
        "_config",
        "_ctx",
        "_device",
        "_dt",
        "_dtype",
        "_e",
        "_fn",
        "_fwd",
        "_fwd_pair",
        "_gen",
        "_grad",
        "_i",
        "_n",
        "_reference",
        "_s",
        "_sample",
        "_shape",
        "_t",
        "_tc",
        "_te",
    }
)
ARGUMENT_RESERVED = RESERVED - {
    "self",
    "cls",
    "set_offsets_check",
    "set_index_check",
    "warmup",
    "WarmupEntry",
    "batch",
}


def check_argument_name(
    name: object, what: str, op: str, helpers: frozenset[str] = frozenset()
) -> str | None:
    """A problem with a schema argument's name in operator ``op``, or None (Note [library
    names]); ``helpers`` are the runtime helpers generated modules import as ``_<helper>``."""
    if not isinstance(name, str) or not name:
        return f"{what} must be a non-empty string"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return f"{what} '{name}' is not a valid Python identifier"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"{what} '{name}' is a Python keyword"
    if name.startswith("__"):
        return f"{what} '{name}' must not start with '__' (Python mangles such names in classes)"
    if name in ARGUMENT_RESERVED:
        return f"{what} '{name}' is reserved by the generated code"
    # 'l', 'O' and 'I' are kept: the generated files then tell ruff to allow them (E741).
    if name in GENERATED_BUILTINS:
        return f"{what} '{name}' would shadow the builtin '{name}', which the generated code calls"
    if name.startswith("_"):
        internal = (f"_{op}", f"_{op.upper()}", f"_{camel(op)}")
        if (
            name in GENERATED_LOCALS
            or name[1:] in helpers
            or any(name.startswith(p) for p in internal)
        ):
            return f"{what} '{name}' is the name of a generated internal; choose another name"
    return None


def check_name(name: object, what: str, builtins_ok: bool = False) -> str | None:
    """Return a problem description, or None when ``name`` is usable in generated code.

    With ``builtins_ok`` (output names: NamedTuple fields and locals), a builtin's name is
    refused only where generated code calls that builtin (Note [library names])."""
    if not isinstance(name, str) or not name:
        return f"{what} must be a non-empty string"
    if name.startswith("_"):
        return f"{what} '{name}' must not start with '_' (reserved for generated internals)"
    if not IDENTIFIER.fullmatch(name):
        return f"{what} '{name}' is not a valid Python identifier"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"{what} '{name}' is a Python keyword"
    if name in RESERVED:
        return f"{what} '{name}' is reserved by the generated code"
    if name in AMBIGUOUS:
        return f"{what} '{name}' is easily misread as a digit (ruff E741); choose another name"
    if name in BUILTINS and (not builtins_ok or name in GENERATED_BUILTINS):
        return f"{what} '{name}' shadows the Python builtin '{name}'"
    return None


def camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


# Note [reserved library names]: the namespace, the package and each operator name become names
# outside the generated code: a torch.library namespace, an importable top-level package, a module
# and a test file beside pytest's. Each is refused where it would take a name someone else owns.
# The lists are fixed in the source, not read from the running environment, so that whether a
# spec is accepted does not depend on what happens to be installed.
#
# Namespaces torch registers operators in (torch._C._dispatch_get_all_op_names() after
# ``import torch``; tests/test_spec_limits.py keeps this list a superset of it), those it
# reserves (torch.library refuses to define in 'prim') and its own and its device backends'
# names. Names that begin with '_' are refused by check_name already.
TORCH_NAMESPACES = frozenset(
    {
        "aten",
        "c10",
        "c10d",
        "cuda",
        "debug_mode_ops",
        "debugprims",
        "export",
        "higher_order",
        "inductor",
        "inductor_prims",
        "mkl",
        "mkldnn",
        "mkldnn_prepacked",
        "mps",
        "onednn",
        "prim",
        "prims",
        "profiler",
        "quantization",
        "quantized",
        "rngprims",
        "sparse",
        "static_runtime",
        "symm_mem",
        "torch",
        "xpu",
    }
)
# Top-level modules of the standard library of every Python the generator runs on (3.10 to 3.14):
# this Python's list plus those added or removed by the others.
STDLIB_MODULES = frozenset(sys.stdlib_module_names) | frozenset(
    {
        "aifc",
        "annotationlib",
        "asynchat",
        "asyncore",
        "audioop",
        "cgi",
        "cgitb",
        "chunk",
        "compression",
        "crypt",
        "distutils",
        "imghdr",
        "imp",
        "lib2to3",
        "mailcap",
        "msilib",
        "nis",
        "nntplib",
        "ossaudiodev",
        "pipes",
        "smtpd",
        "sndhdr",
        "spwd",
        "sunau",
        "telnetlib",
        "tomllib",
        "uu",
        "xdrlib",
    }
)
# Packages the generator, the generated code and its tests import, the project's own, and the
# folder the generated tests are written to beside the package.
IMPORTED_PACKAGES = frozenset(
    {
        "attnops_kernels",
        "codegen",
        "cutlass",
        "jinja2",
        "numpy",
        "pytest",
        "setuptools",
        "tests",
        "torch",
        "triton",
        "yaml",
    }
)
# Module names pytest gives a meaning to (a generated package may sit where pytest collects).
PYTEST_MODULES = frozenset({"conftest"})


def check_namespace(name: str) -> str | None:
    """A problem with ``name`` as the torch.library namespace, or None (Note [reserved library
    names]); ``check_name`` has accepted it."""
    if name in TORCH_NAMESPACES:
        return f"namespace '{name}' belongs to PyTorch; choose the name of your library"
    return None


def check_package(name: str, what: str = "package") -> str | None:
    """A problem with ``name`` as the generated package's import name, or None (Note [reserved
    library names]); ``check_name`` has accepted it."""
    if name in STDLIB_MODULES:
        return f"{what} '{name}' would shadow the standard library module '{name}'"
    if name in IMPORTED_PACKAGES:
        return f"{what} '{name}' would shadow the package '{name}', which the generated code or its tests use"
    return None


def check_operator_module(name: str) -> str | None:
    """A problem with ``name`` as a module of the generated package, or None (Note [reserved
    library names]): pytest reads ``conftest.py`` and collects ``test_*.py`` and ``*_test.py``."""
    if name in PYTEST_MODULES:
        return f"operator name '{name}' would make the module '{name}.py', which pytest loads as its configuration"
    if name.startswith("test_") or name.endswith("_test"):
        return (
            f"operator name '{name}' would make the module '{name}.py', which pytest collects as "
            "a test file; choose a name that neither starts with 'test_' nor ends with '_test'"
        )
    return None
