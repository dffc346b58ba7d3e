"""The build backend: setuptools', with the generator's requirements for building a wheel.

Building the wheel runs the generator (Note [generated at build time] in setup.py), so an
isolated wheel build installs what it imports; an editable install and an sdist generate nothing
and need only setuptools.
"""

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403 - every hook of setuptools' backend

# torch (its schema parser) and the `codegen` extra of pyproject.toml.
GENERATOR_REQUIRES = ["torch>=2.11", "pyyaml>=6.0", "jinja2>=3.1", "ruff>=0.14,<0.15"]


def get_requires_for_build_wheel(config_settings=None):
    return [*build_meta.get_requires_for_build_wheel(config_settings), *GENERATOR_REQUIRES]
