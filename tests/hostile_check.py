"""Runs in a subprocess of tests/test_hostile_strings.py: imports generated packages and checks
that every hostile spec string arrived as the same text, by calling the generated code.

``python hostile_check.py MANIFEST RESULT`` reads the manifest (JSON: packages and cases) and
writes the problems it found (JSON: case id -> list of problems, plus package-level problems).
Each op module is imported on its own (below a stub package) so that one broken module does not
hide what the others do.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
import traceback
import types
from pathlib import Path

import torch

NOT_A_VARIANT = "\x00not one of the variant values"


def _short(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    return " ".join(line.strip() for line in lines)[:600]


def _load_module(package: str, out: Path, name: str) -> types.ModuleType:
    """Import ``<package>.<name>`` from ``out`` without running the package's ``__init__``."""
    if package not in sys.modules:
        stub = types.ModuleType(package)
        stub.__path__ = [str(out / package)]
        sys.modules[package] = stub
    full = f"{package}.{name}"
    spec = importlib.util.spec_from_file_location(full, out / package / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[full] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[full]
        raise
    return module


def _load_test_module(out: Path, op: str) -> types.ModuleType:
    name = f"_hostile_generated_test_{op}"
    spec = importlib.util.spec_from_file_location(name, out / "tests" / f"test_{op}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lines(text: str) -> list[str]:
    return [line.rstrip(" \t") for line in text.split("\n")]


def expected_doc(text: str) -> str:
    """The doc as the public docstring must carry it: stripped as a whole (docs/spec.md)."""
    return "\n".join(_lines(text.strip()))


def docstring_text(doc: str, indent: str = "    ") -> str:
    """A docstring as written, less the indentation the generator puts before later lines."""
    lines = doc.split("\n")
    rest = [line[len(indent) :] if line.startswith(indent) else line for line in lines[1:]]
    return "\n".join(_lines("\n".join([lines[0].lstrip()] + rest)))


def _check_doc(case: dict, module: types.ModuleType, public) -> list[str]:
    problems = []
    text = case["text"]
    doc = expected_doc(text)
    summaries = {doc.split("\n")[0].strip(), (doc.splitlines() or [""])[0].strip()}
    got = (module.__doc__ or "").strip()
    if got not in summaries:
        problems.append(f"module docstring is {got!r}, expected the doc's first line {doc!r}")
    actual = docstring_text(public.__doc__ or "")
    if not actual.startswith(doc + "\n\nArgs:"):
        problems.append(
            f"public docstring does not start with the doc: got {actual[: len(doc) + 40]!r}, "
            f"expected {doc!r} + '\\n\\nArgs:'"
        )
    return problems


def _call(public, x, **kwargs):
    try:
        return public(x, **kwargs), None
    except Exception as exc:  # noqa: BLE001  (reported as a problem)
        return None, exc


def _check_message(case: dict, public) -> list[str]:
    text, op = case["text"], case["op"]
    ok, _ = _call(public, torch.zeros(4))
    problems = [] if ok is not None else ["a call that satisfies the constraint was refused"]
    _, exc = _call(public, torch.zeros(case["violating_size"]))
    if not isinstance(exc, ValueError):
        problems.append(f"violating the constraint raised {exc!r}, expected a ValueError")
    elif text not in str(exc) or not str(exc).startswith(f"{op}: "):
        problems.append(f"the ValueError does not carry the message verbatim: {str(exc)!r}")
    return problems


def _check_signature_default(case: dict, module, public, arg: str) -> list[str]:
    problems = []
    text = case["text"]
    functions = {"public function": public}
    for name in case["shims"]:
        functions[name] = getattr(module, name, None)
    for what, fn in functions.items():
        if fn is None:
            problems.append(f"no {what} in the generated module")
            continue
        param = inspect.signature(fn).parameters.get(arg)
        if param is None or param.default != text:
            got = None if param is None else param.default
            problems.append(f"default of {arg} in the {what} is {got!r}, expected {text!r}")
    return problems


def _check_registered_default(case: dict, arg: str) -> list[str]:
    ns, op = case["namespace"], case["op"]
    schema = getattr(getattr(torch.ops, ns), f"{op}_fwd").default._schema
    a = next(a for a in schema.arguments if a.name == arg)
    if a.default_value != case["text"]:
        return [f"registered schema default of {arg} is {a.default_value!r}"]
    return []


def _check_launched(case: dict, launchers, value, public, **kwargs) -> list[str]:
    launchers.CALLS.clear()
    _, exc = _call(public, torch.zeros(4), **kwargs)
    if exc is not None:
        return [f"calling with {kwargs or 'the default'} raised {_short(exc)}"]
    got = launchers.CALLS[-1][1] if launchers.CALLS else None
    if got != value:
        return [f"the launcher received {got!r}, expected {value!r}"]
    return []


def _check_variant(case: dict, module, public, launchers, tests) -> list[str]:
    text, op = case["text"], case["op"]
    problems = _check_launched(case, launchers, text, public, kind=text)
    _, exc = _call(public, torch.zeros(4), kind=NOT_A_VARIANT)
    if not isinstance(exc, ValueError):
        problems.append(f"a value outside the variants raised {exc!r}, expected a ValueError")
    elif not str(exc).startswith(f"{op}: kind ") or repr(text) not in str(exc):
        problems.append(f"the refused-value message does not show {text!r}: {str(exc)!r}")
    if repr(text) not in (public.__doc__ or ""):
        problems.append(f"the public docstring does not list {text!r}")
    values = {c.get("kind") for c in tests.CONFIGS.values()}
    if text not in values:
        problems.append(f"the generated test configs do not carry {text!r}: {sorted(values)!r}")
    return problems


def _check_default(case: dict, module, public, launchers, tests) -> list[str]:
    problems = _check_variant(case, module, public, launchers, tests)
    problems += _check_signature_default(case, module, public, "kind")
    problems += _check_registered_default(case, "kind")
    problems += _check_launched(case, launchers, case["text"], public)
    return problems


def _check_plain_default(case: dict, module, public, launchers, tests) -> list[str]:
    problems = _check_signature_default(case, module, public, "tag")
    problems += _check_registered_default(case, "tag")
    problems += _check_launched(case, launchers, case["text"], public)
    sample = next(iter(tests.SAMPLES))
    got = tests.make_inputs(sample, next(iter(tests.DTYPES))).get("tag")
    if got != case["text"]:
        problems.append(f"the generated test passes tag={got!r}, expected {case['text']!r}")
    return problems


def _check_sample(case: dict, tests) -> list[str]:
    text = case["text"]
    sample = next(iter(tests.SAMPLES))
    problems = []
    if tests.SAMPLES[sample].get("mode") != text:
        got = tests.SAMPLES[sample].get("mode")
        problems.append(f"SAMPLES carries mode={got!r}, expected {text!r}")
    got = tests.make_inputs(sample, next(iter(tests.DTYPES))).get("mode")
    if got != text:
        problems.append(f"make_inputs passes mode={got!r}, expected {text!r}")
    return problems


def check_case(case: dict, out: Path, launchers) -> list[str]:
    package, op, field = case["package"], case["op"], case["field"]
    try:
        module = _load_module(package, out, op)
    except BaseException as exc:  # noqa: BLE001
        return [f"importing {package}.{op} failed: {_short(exc)}"]
    public = getattr(module, op, None)
    if public is None:
        return [f"{package}.{op} defines no public function {op}"]
    setattr(sys.modules[package], op, public)  # what the package's __init__ would export
    tests = None
    if field in ("variant", "default", "triton_default", "plain_default", "sample"):
        try:
            tests = _load_test_module(out, op)
        except BaseException as exc:  # noqa: BLE001
            return [f"importing the generated test_{op}.py failed: {_short(exc)}"]
    if field == "doc":
        return _check_doc(case, module, public)
    if field == "message":
        return _check_message(case, public)
    if field == "variant":
        return _check_variant(case, module, public, launchers, tests)
    if field in ("default", "triton_default"):
        return _check_default(case, module, public, launchers, tests)
    if field == "plain_default":
        return _check_plain_default(case, module, public, launchers, tests)
    if field == "sample":
        return _check_sample(case, tests)
    raise AssertionError(field)


def main(manifest_path: str, result_path: str) -> None:
    manifest = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
    launchers = importlib.import_module(manifest["launchers"])
    results: dict[str, list[str]] = {}
    for case in manifest["cases"]:
        try:
            results[case["id"]] = check_case(case, Path(case["out"]), launchers)
        except BaseException as exc:  # noqa: BLE001
            results[case["id"]] = [f"checking raised {_short(exc)}"]
    unloaded = {
        c["package"] for c in manifest["cases"] if f"{c['package']}.{c['op']}" not in sys.modules
    }
    # The packages as a user imports them, through __init__ (the op modules loaded above are
    # reused: an operator registers once per process).
    packages: dict[str, list[str]] = {}
    for package, out in manifest["packages"].items():
        if package in unloaded:
            packages[package] = []  # an op module does not import: its case says why
            continue
        init = Path(out) / package / "__init__.py"
        spec = importlib.util.spec_from_file_location(
            package, init, submodule_search_locations=[str(init.parent)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module
        try:
            spec.loader.exec_module(module)
            packages[package] = [] if module.__all__ else [f"{package} exports nothing"]
        except BaseException as exc:  # noqa: BLE001
            packages[package] = [f"import {package} failed: {_short(exc)}"]
    Path(result_path).write_text(
        json.dumps({"cases": results, "packages": packages}), encoding="utf-8"
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
