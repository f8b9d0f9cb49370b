"""cffi builder for the native core (out-of-line API mode).

setup.py names this through ``cffi_modules``, so ``pip install .`` compiles
the C sources with the system compiler. ``LOGSTORE_SANITIZE=1`` builds with
AddressSanitizer and UndefinedBehaviorSanitizer.
"""

from __future__ import annotations

import os
import pathlib

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent
SOURCES = ["crc32c.c", "batch.c", "records.c", "index.c", "walk.c", "arrow.c", "guard.c"]
CORE_SOURCES = [str(pathlib.Path("native") / name) for name in SOURCES]


def _cdef() -> str:
    """The API header, as cffi's cdef reads it (comments are fine)."""
    return (HERE / "ls_api.h").read_text()


def compile_args() -> list[str]:
    args = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    if os.environ.get("LOGSTORE_SANITIZE") == "1":
        args += [
            "-fsanitize=address,undefined",
            "-fno-omit-frame-pointer",
            "-fno-sanitize-recover=undefined",
            "-O1",
            "-g",
        ]
    return args


def link_args() -> list[str]:
    if os.environ.get("LOGSTORE_SANITIZE") == "1":
        return ["-fsanitize=address,undefined"]
    return []


ffibuilder = FFI()
ffibuilder.cdef(_cdef())
ffibuilder.set_source(
    "logstore._native_c",
    '#include "ls_core.h"\n',
    sources=CORE_SOURCES,
    include_dirs=["native"],
    extra_compile_args=compile_args(),
    extra_link_args=link_args(),
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
