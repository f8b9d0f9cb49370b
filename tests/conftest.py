"""Shared fixtures of the suite."""

from __future__ import annotations

import pathlib

import pytest


@pytest.fixture
def segment_dir(tmp_path: pathlib.Path) -> str:
    """A fresh directory for one partition's segments."""
    path = tmp_path / "topic-0"
    path.mkdir()
    return str(path)
