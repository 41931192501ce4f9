"""The suite's own plumbing under pytest-xdist: each worker hands out ports from a slice of its own."""

from __future__ import annotations

import itertools

import pytest

from conftest import _ephemeral_range, _worker_ports, free_port


def test_the_port_slices_of_four_workers_are_disjoint_and_below_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    slices = []
    for worker in range(4):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
        slices.append(_worker_ports())
    low, _ = _ephemeral_range()
    for (first, last), (after, _) in itertools.pairwise(slices):
        assert first < last < after
    assert slices[-1][1] < low or low <= 21000
    assert all(last - first >= 1000 for first, last in slices)


def test_a_free_port_comes_from_this_workers_slice() -> None:
    first, last = _worker_ports()
    assert all(first <= free_port() <= last for _ in range(20))
