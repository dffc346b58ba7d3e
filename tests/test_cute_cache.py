"""The disk cache of compiled CuTeDSL kernels (``attnops_kernels._cute``, Note [CuTe disk cache]):
where it lives and how it is switched off, what names an entry, and how entries are written and
read, with the compile step stubbed so that none of it needs CuTeDSL. Where CuTeDSL, TVM-FFI and a
C compiler are installed, a real kernel is compiled in one process and loaded in another (loading
only: no GPU is needed, the target is named)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from attnops_kernels import _abi
from attnops_kernels import _cute as C

DIR = "ATTNOPS_CUTE_CACHE_DIR"
SWITCH = "ATTNOPS_CUTE_CACHE"
MAGIC = "stub entry\n"


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """A fresh cache folder, a process's cache state reset, and the compile step stubbed: a
    "kernel" is its key, and an entry is a text file holding it."""
    for name in (SWITCH, "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "cache"
    monkeypatch.setenv(DIR, str(folder))
    monkeypatch.setattr(C, "_DISK_WRITES", True)
    monkeypatch.setattr(_abi, "_WARNED", set())
    monkeypatch.setattr(C, "tvm_ffi_available", lambda: True)
    C._cache_dir.cache_clear()

    def compile_(self, key, tvm_ffi):
        self.compiles += 1
        kernel = _Kernel(repr(key))
        return kernel, kernel

    def write(fn, folder, name, tvm_ffi):
        path = os.path.join(folder, name + C._suffix(tvm_ffi))
        Path(path).write_text(MAGIC + fn.key)
        return path

    def read(path, name, tvm_ffi):
        text = path.read_text()
        if not text.startswith(MAGIC):
            raise ValueError("not an entry")
        return _Kernel(text[len(MAGIC) :])

    monkeypatch.setattr(C.CompileCache, "_compile", compile_)
    monkeypatch.setattr(C, "_write_entry", write)
    monkeypatch.setattr(C, "_read_entry", read)
    yield folder
    C._cache_dir.cache_clear()


class _Kernel:
    def __init__(self, key: str) -> None:
        self.key = key


def _build(key):
    raise AssertionError("the stubbed compile never builds")


def _process():
    """A new process's view of one operator: an empty in-memory table."""
    return C.CompileCache("stub_op", _build)


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ---------------------------------------------------------------------------------------------
# Where the cache lives, and the switch
# ---------------------------------------------------------------------------------------------


def test_the_folder_is_the_one_named_else_under_the_xdg_cache_else_home(monkeypatch, tmp_path):
    monkeypatch.delenv(SWITCH, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(DIR, str(tmp_path / "named"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert C.cache_path() == tmp_path / "named"
    monkeypatch.setenv(DIR, "~/kernels")
    assert C.cache_path() == tmp_path / "home" / "kernels"
    monkeypatch.setenv(DIR, "")  # empty is unset
    assert C.cache_path() == tmp_path / "xdg" / "attnops" / "cute"
    monkeypatch.delenv(DIR)
    assert C.cache_path() == tmp_path / "xdg" / "attnops" / "cute"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # not absolute: ignored, as the spec says
    assert C.cache_path() == tmp_path / "home" / ".cache" / "attnops" / "cute"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert C.cache_path() == tmp_path / "home" / ".cache" / "attnops" / "cute"
    assert not (tmp_path / "home").exists()  # resolving creates nothing


@pytest.mark.parametrize(
    ("raw", "on"),
    [(None, True), ("", True), ("1", True), (" On ", True), ("TRUE", True), ("yes", True)]
    + [("0", False), ("false", False), ("Off", False), ("NO", False)],
)
def test_the_switch_reads_yes_and_no(monkeypatch, tmp_path, raw, on):
    monkeypatch.setenv(DIR, str(tmp_path))
    if raw is None:
        monkeypatch.delenv(SWITCH, raising=False)
    else:
        monkeypatch.setenv(SWITCH, raw)
    assert C.cache_path() == (tmp_path if on else None)


@pytest.mark.parametrize("raw", ["bogus", "2", "disable"])
def test_the_switch_refuses_anything_else_by_name_at_first_use(cache, monkeypatch, raw):
    monkeypatch.setenv(SWITCH, raw)
    process = _process()  # making the cache reads nothing yet
    expected = f"{SWITCH}={raw!r}: expected 1, true, yes, on, 0, false, no or off"
    with pytest.raises(ValueError, match=expected):
        process.get("k")


def test_switched_off_nothing_is_written_and_each_process_compiles(cache, monkeypatch):
    monkeypatch.setenv(SWITCH, "off")
    for _ in range(2):
        process = _process()
        process.get("k")
        assert (process.compiles, process.loads) == (1, 0)
    assert not cache.exists()


# ---------------------------------------------------------------------------------------------
# What names an entry
# ---------------------------------------------------------------------------------------------


def test_an_entry_name_changes_with_each_input_and_only_with_them(monkeypatch, tmp_path):
    monkeypatch.setattr(C, "_toolchain", lambda: ("nvidia-cutlass-dsl=4.8.1", "python 3.12"))
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    for name in [k for k in os.environ if k.startswith("CUTE_DSL_") and k != "CUTE_DSL_ARCH"]:
        monkeypatch.delenv(name)
    kernel, edited = tmp_path / "kernel.py", tmp_path / "edited.py"
    kernel.write_text("BT = 64\n")
    edited.write_text("BT = 32\n")
    sources = (str(kernel), C.__file__)

    def name():
        return C._entry_name("chunk_gla_fwd_walk", (torch.bfloat16, 64), sources, True)

    base = name()
    assert base == name()
    assert base.startswith("chunk_gla_fwd_walk_") and base.isidentifier()  # also a C symbol
    changed = {
        "op": C._entry_name("l2norm_fwd", (torch.bfloat16, 64), sources, True),
        "key": C._entry_name("chunk_gla_fwd_walk", (torch.float16, 64), sources, True),
        "launch path": C._entry_name("chunk_gla_fwd_walk", (torch.bfloat16, 64), sources, False),
        "source": C._entry_name(
            "chunk_gla_fwd_walk", (torch.bfloat16, 64), (str(edited), C.__file__), True
        ),
    }
    with monkeypatch.context() as m:
        m.setattr(C, "_toolchain", lambda: ("nvidia-cutlass-dsl=4.9.0", "python 3.12"))
        changed["CuTeDSL version"] = name()
        m.setattr(C, "_toolchain", lambda: ("nvidia-cutlass-dsl=4.8.1", "python 3.11"))
        changed["Python version"] = name()
    with monkeypatch.context() as m:
        m.setenv("CUTE_DSL_ARCH", "sm_100a")
        changed["target"] = name()
    with monkeypatch.context() as m:
        m.setenv("CUTE_DSL_COMPILER_OPT", "--opt-level 2")
        changed["a CUTE_DSL_ setting"] = name()
    assert base == name()
    names = [base, *changed.values()]
    assert len(set(names)) == len(names), changed
    monkeypatch.setenv("UNRELATED_SETTING", "1")
    assert base == name()


def test_the_target_is_the_one_named_else_the_gpus_as_cutedsl_spells_it(monkeypatch):
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    assert C._target_arch() == "sm_90a"
    monkeypatch.delenv("CUTE_DSL_ARCH")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for capability, arch in [((9, 0), "sm_90a"), ((8, 0), "sm_80"), ((10, 0), "sm_100a")]:
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i, c=capability: c)
        assert C._target_arch() == arch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert C._target_arch() == "none"


# ---------------------------------------------------------------------------------------------
# Writing and reading entries (compile stubbed)
# ---------------------------------------------------------------------------------------------


def test_a_second_process_loads_what_the_first_compiled(cache):
    first = _process()
    kernel = first.get(("bf16", 64))
    assert (first.compiles, first.loads) == (1, 0)
    assert first.get(("bf16", 64)) is kernel  # the in-memory table stays in front
    assert (first.compiles, first.loads) == (1, 0)
    [entry] = _entries(cache)
    assert entry.startswith("stub_op_") and entry.endswith(".so")
    second = _process()
    assert second.get(("bf16", 64)).key == kernel.key
    assert (second.compiles, second.loads) == (0, 1)
    second.get(("bf16", 128))  # another key: compiled and saved beside it
    assert (second.compiles, second.loads) == (1, 1)
    assert len(_entries(cache)) == 2


def test_each_launch_path_has_its_own_entry(cache):
    first = _process()
    first.get("k")
    with C.dlpack_launches():
        first.get("k")
    assert first.compiles == 2
    assert sorted(Path(e).suffix for e in _entries(cache)) == [".o", ".so"]


def test_an_entry_is_renamed_into_place_from_a_temporary_folder_beside_it(cache, monkeypatch):
    moves = []
    replace = os.replace

    def spy(src, dst):
        # At the rename the entry is whole in the temporary folder and absent at its name.
        assert Path(src).read_text().startswith(MAGIC)
        assert not Path(dst).exists()
        moves.append((Path(src), Path(dst)))
        replace(src, dst)

    monkeypatch.setattr(C.os, "replace", spy)
    _process().get("k")
    [(src, dst)] = moves
    assert src.parent.parent == cache and src.parent.name.startswith(".tmp-")
    assert dst.parent == cache
    assert _entries(cache) == [dst.name]  # the temporary folder is gone


def test_a_write_that_fails_halfway_leaves_no_entry_and_warns_once(cache, monkeypatch):
    def half(fn, folder, name, tvm_ffi):
        Path(folder, name + ".so").write_text(MAGIC[:3])
        raise OSError("disk full")

    monkeypatch.setattr(C, "_write_entry", half)
    process = _process()
    with pytest.warns(RuntimeWarning, match="could not save a compiled CuTeDSL kernel"):
        assert process.get("a").key == repr("a")  # the kernel still runs
    process.get("b")  # the second failure is silent
    assert _entries(cache) == []


def test_an_entry_that_does_not_load_is_compiled_again_and_replaced(cache):
    _process().get("k")
    [entry] = _entries(cache)
    for damage in (b"", MAGIC.encode()[:4], b"\x7fELF\x02\x01\x01 truncated"):
        (cache / entry).write_bytes(damage)
        process = _process()
        assert process.get("k").key == repr("k")
        assert (process.compiles, process.loads) == (1, 0)
        assert (cache / entry).read_text() == MAGIC + repr("k")  # replaced by a whole one
        assert _entries(cache) == [entry]
        after = _process()
        after.get("k")
        assert (after.compiles, after.loads) == (0, 1)


def test_a_folder_that_cannot_be_created_turns_the_cache_off_with_one_warning(
    cache, monkeypatch, tmp_path
):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(DIR, str(blocker / "cute"))  # a folder inside a file
    with pytest.warns(RuntimeWarning, match="cannot create the CuTeDSL kernel cache"):
        first = _process()
        first.get("k")
    second = _process()
    second.get("k")
    assert (first.compiles, second.compiles) == (1, 1)


def test_a_folder_that_cannot_be_written_is_only_read(cache, monkeypatch):
    _process().get("old")

    def refuse(**kwargs):
        raise PermissionError(13, "Permission denied", kwargs["dir"])

    monkeypatch.setattr(C.tempfile, "TemporaryDirectory", refuse)
    process = _process()
    with pytest.warns(RuntimeWarning, match="cannot write the CuTeDSL kernel cache"):
        process.get("new")
    assert process.get("old").key == repr("old")
    assert (process.compiles, process.loads) == (1, 1)
    assert len(_entries(cache)) == 1
    process.get("newer")  # no second warning, no second attempt
    assert not C._DISK_WRITES


def test_clear_stops_using_the_disk_for_that_operator(cache):
    process = _process()
    process.get("k")
    process.clear()  # a sweep changed module state the entry's name does not show
    process.get("k")
    assert (process.compiles, process.loads) == (2, 0)
    assert len(_entries(cache)) == 1  # what the first compile saved, nothing after the clear


# ---------------------------------------------------------------------------------------------
# A real kernel, compiled in one process and loaded in another
# ---------------------------------------------------------------------------------------------


def _real_skip():
    for module, what in [("cutlass", "nvidia-cutlass-dsl"), ("tvm_ffi", "apache-tvm-ffi")]:
        if importlib.util.find_spec(module) is None:
            return f"needs {what} (the cute extra) to compile a real kernel"
    if not (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")):
        return "needs a C compiler to link TVM-FFI entries"
    return None


# One process: the l2norm forward's compact bf16 kernel, on each launch path. With ``probe``,
# the TVM-FFI entry is first loaded directly, before anything imports cutlass.
_REAL = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import torch
    from attnops_kernels import _cute as C
    key = (torch.bfloat16, 128, True, False)
    out = {}
    if sys.argv[1] == "probe":
        sources = C._entry_sources(str(Path(C.__file__).parent / "l2norm" / "cute.py"))
        t = time.perf_counter()
        fn = C._load(C._cache_dir(), C._entry_name("l2norm_fwd", key, sources, True), True)
        out["probe"] = [type(fn).__name__, "cutlass" in sys.modules, time.perf_counter() - t]
    from attnops_kernels.l2norm import cute as L
    for path in ("tvm-ffi", "dlpack"):
        with C.dlpack_launches(path == "dlpack"):
            t = time.perf_counter()
            fn = L._FWD.get(key)
            out[path] = [L._FWD.compiles, L._FWD.loads, type(fn).__name__, time.perf_counter() - t]
        L._FWD.compiles = L._FWD.loads = 0
    print(json.dumps(out))
    """
)


@pytest.mark.skipif(_real_skip() is not None, reason=str(_real_skip()))
def test_a_real_kernel_compiled_in_one_process_loads_in_another(tmp_path):
    env = {**os.environ, DIR: str(tmp_path / "cache"), SWITCH: "1"}
    if not torch.cuda.is_available():
        env["CUTE_DSL_ARCH"] = "sm_90a"  # compile for Hopper without a GPU

    def run(*args):
        done = subprocess.run(
            [sys.executable, "-c", _REAL, *args], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.splitlines()[-1])

    first = run("compile")
    assert first["tvm-ffi"][:3] == [1, 0, "Function"], first
    assert first["dlpack"][:3] == [1, 0, "_DlpackLaunch"], first
    assert sorted(Path(e).suffix for e in os.listdir(tmp_path / "cache")) == [".o", ".so"]
    second = run("probe")
    assert second["probe"][:2] == ["Function", False], second  # loaded without cutlass
    assert second["tvm-ffi"][:3] == [0, 1, "Function"], second
    assert second["dlpack"][:3] == [0, 1, "_DlpackLaunch"], second
