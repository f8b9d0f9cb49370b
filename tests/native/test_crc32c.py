"""CRC-32C in C (SSE4.2 and software paths) against the crc32c package."""

from __future__ import annotations

import os
import pathlib

import crc32c as oracle
import pytest

from logstore._native import crc32c, ffi, lib

pytestmark = pytest.mark.unit

# Lengths around every block boundary of the three-way hardware loop.
LENGTHS = [0, 1, 7, 8, 9, 63, 255, 256, 257, 767, 768, 769, 8191, 8192, 24575, 24576, 24577, 65536, 100_003]


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("misalign", [0, 1, 3, 7])
def test_crc_matches_oracle_at_every_boundary(length: int, misalign: int) -> None:
    data = os.urandom(length + misalign)[misalign:]
    expected = oracle.crc32c(data)
    assert crc32c(data) == expected
    assert lib.ls_crc32c_software(0, ffi.from_buffer(data), len(data)) == expected


def test_crc_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_crc_chains_like_the_package() -> None:
    a, b = os.urandom(10_000), os.urandom(33_333)
    assert crc32c(b, crc32c(a)) == oracle.crc32c(a + b)
    assert lib.ls_crc32c_software(crc32c(a), ffi.from_buffer(b), len(b)) == oracle.crc32c(a + b)


def test_hardware_path_detected_on_x86() -> None:
    import platform

    if platform.machine() in ("x86_64", "AMD64"):
        flags = pathlib.Path("/proc/cpuinfo").read_text()
        assert lib.ls_crc32c_hardware_available() == (1 if " sse4_2" in flags else 0)
