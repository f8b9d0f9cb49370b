"""The examples in docstrings are tests too."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import logstore

pytestmark = pytest.mark.unit

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(logstore.__path__, "logstore.")
    if not info.name.startswith("logstore.examples")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
