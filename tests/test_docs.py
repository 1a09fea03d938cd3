"""The examples in the docstrings of the modules behind ``flowsim``'s names run and print
what they show."""

import doctest
import importlib
import inspect

import pytest

import flowsim
import flowsim.collectives

PUBLIC_MODULES = {
    getattr(getattr(package, name), "__module__", None)
    for package in (flowsim, flowsim.collectives)
    for name in package.__all__
} - {None}
WITH_EXAMPLES = sorted(name for name in PUBLIC_MODULES if ">>>" in inspect.getsource(importlib.import_module(name)))


def test_the_public_modules_have_examples():
    assert {"flowsim.presets", "flowsim.routing", "flowsim.topology", "flowsim.collectives.builders",
            "flowsim.collectives.costs"} <= set(WITH_EXAMPLES)


@pytest.mark.parametrize("module", WITH_EXAMPLES)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert (result.failed, result.attempted > 0) == (0, True)
