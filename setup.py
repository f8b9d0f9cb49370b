"""Builds the native core: the cffi module and the object-boundary extension.

pyproject.toml says everything else; ``cffi_modules`` and the extension's
flags live here because they are computed (sanitizer builds).
"""

import sys

from setuptools import Extension, setup

sys.path.insert(0, "native")
from build_native import CORE_SOURCES, compile_args, link_args

# logstore._speedups: one extension, a file per part (native/speedups_module.c says which is which).
SPEEDUPS_SOURCES = [
    "native/speedups_module.c",
    "native/speedups_errors.c",
    "native/speedups_record.c",
    "native/speedups_message.c",
    "native/speedups_decode.c",
    "native/speedups_lookup.c",
    "native/speedups_encode.c",
    "native/speedups_partitioner.c",
    "native/speedups_lock.c",
    "native/speedups_accumulator.c",
]

setup(
    cffi_modules=["native/build_native.py:ffibuilder"],
    ext_modules=[
        Extension(
            "logstore._speedups",
            sources=[*SPEEDUPS_SOURCES, *CORE_SOURCES],
            include_dirs=["native"],
            extra_compile_args=compile_args(),
            extra_link_args=link_args(),
        )
    ],
)
