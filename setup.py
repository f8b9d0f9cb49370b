"""Builds the native core: the cffi module and the object-boundary extension.

pyproject.toml says everything else; ``cffi_modules`` and the extension's
flags live here because they are computed (sanitizer builds).
"""

import sys

from setuptools import Extension, setup

sys.path.insert(0, "native")
from build_native import CORE_SOURCES, compile_args, link_args

setup(
    cffi_modules=["native/build_native.py:ffibuilder"],
    ext_modules=[
        Extension(
            "logstore._speedups",
            sources=["native/speedups.c", *CORE_SOURCES],
            include_dirs=["native"],
            extra_compile_args=compile_args(),
            extra_link_args=link_args(),
        )
    ],
)
