"""sparkext.spark.reused: expressions built once per JVM gateway, bounded, rebuilt for a new JVM."""

from __future__ import annotations

import pytest

from sparkext.spark import reused as module


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    gateway = object()
    monkeypatch.setattr(module, "_gateway", lambda: gateway)
    monkeypatch.setattr(module, "_mode", lambda: False)
    module.clear()
    yield
    module.clear()


def _counting_builder():
    """A reused builder returning a new object per build, and the list of its builds."""
    built = []

    @module.reused
    def build(x):
        built.append(x)
        return object()

    return build, built


def test_same_arguments_build_once_and_return_the_same_object():
    built = []

    @module.reused
    def build(columns, key):
        built.append((columns, key))
        return [object()]

    first = build((("id", "bigint"),), ("id",))
    assert build((("id", "bigint"),), ("id",)) is first
    other = build((("id", "bigint"), ("a", "string")), ("id",))
    assert other is not first
    assert built == [((("id", "bigint"),), ("id",)), ((("id", "bigint"), ("a", "string")), ("id",))]


def test_two_builders_with_the_same_arguments_do_not_share_entries():
    @module.reused
    def one(x):
        return ("one", x)

    @module.reused
    def two(x):
        return ("two", x)

    assert one(1) == ("one", 1) and two(1) == ("two", 1)


def test_a_new_gateway_starts_an_empty_cache(monkeypatch):
    build, built = _counting_builder()

    first = build(1)
    monkeypatch.setattr(module, "_gateway", lambda: object())  # the driver JVM was restarted
    assert build(1) is not first
    assert built == [1, 1]


def test_entries_are_bounded(monkeypatch):
    monkeypatch.setattr(module, "CAPACITY", 3)
    built = []

    @module.reused
    def build(x):
        built.append(x)
        return x

    for x in range(5):
        build(x)
    build(4)  # still kept
    build(0)  # dropped long ago: built again
    assert built == [0, 1, 2, 3, 4, 0]
    assert len(module._entries) == 3


def test_expressions_built_under_ansi_are_not_reused_without_it(monkeypatch):
    """Spark fixes a cast's ANSI mode when the expression is built: the mode is in the key."""
    build, built = _counting_builder()

    legacy = build(1)
    monkeypatch.setattr(module, "_mode", lambda: True)
    ansi = build(1)
    assert ansi is not legacy and build(1) is ansi
    monkeypatch.setattr(module, "_mode", lambda: False)
    assert build(1) is legacy
    assert built == [1, 1]
