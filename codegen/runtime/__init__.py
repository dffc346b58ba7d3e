"""Modules copied verbatim into every generated package, below the generated-file header.

They are ordinary Python so that they are linted and unit-tested where they live; the generator
prepends the header and writes them as ``<package>/_runtime.py``, ``<package>/_layout.py``,
``<package>/_testing.py``, ``<package>/_testing_cases.py``, ``<package>/_testing_edges.py``,
``<package>/_testing_backends.py``, ``<package>/_bench.py``, ``<package>/_warmup.py`` and
``tests/conftest.py`` (``STATIC`` in ``codegen/emit/render.py``). They must not import this
package or anything of the generator.
"""
