"""Fixtures shared by several test files."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def sandbox():
    """A small warm pool on the real Docker engine, one per test module."""
    from sandbox import Sandbox

    with Sandbox(pool_size=2) as sb:
        yield sb
