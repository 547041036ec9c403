"""Tests of bevviz.threads: one-thread blocks that leave every thread count as it was."""

from __future__ import annotations

import threading

import pytest
import torch

from bevviz.threads import set_process_default_threads, single_threaded


def _in_new_thread(fn):
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join(10)
    return out[0]


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_nested_blocks_restore_the_count(two_threads):
    with single_threaded():
        assert torch.get_num_threads() == 1
        with single_threaded():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    assert _in_new_thread(torch.get_num_threads) == 2


def test_restored_after_an_exception(two_threads):
    with pytest.raises(RuntimeError):
        with single_threaded():
            raise RuntimeError("boom")
    assert torch.get_num_threads() == 2
    assert _in_new_thread(torch.get_num_threads) == 2


def test_overlapping_threads_each_get_their_own_count_back(two_threads):
    # A enters, B enters, A leaves, B leaves (B had chosen one thread for itself). Each is
    # single-threaded inside and gets its own count back; a shared depth counter left A at
    # 1, and B's restore would have left new threads starting at 1.
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def thread_a():
        torch.get_num_threads()
        with single_threaded():
            seen["a_inside"] = torch.get_num_threads()
            a_in.set()
            b_in.wait(5)
        seen["a_after"] = torch.get_num_threads()
        a_out.set()

    def thread_b():
        torch.set_num_threads(1)  # this thread's own choice, before A enters
        ready.set()
        a_in.wait(5)
        with single_threaded():
            seen["b_inside"] = torch.get_num_threads()
            b_in.set()
            a_out.wait(5)
        seen["b_after"] = torch.get_num_threads()

    ready = threading.Event()
    b = threading.Thread(target=thread_b)
    b.start()
    ready.wait(5)
    torch.set_num_threads(2)  # B's choice also set the process default; put it back
    a = threading.Thread(target=thread_a)
    a.start()
    for t in (a, b):
        t.join(10)
    assert seen == {"a_inside": 1, "b_inside": 1, "a_after": 2, "b_after": 1}
    assert torch.get_num_threads() == 2
    assert _in_new_thread(torch.get_num_threads) == 2


def test_set_process_default_leaves_the_caller_alone(two_threads):
    set_process_default_threads(1)
    try:
        assert torch.get_num_threads() == 2
        assert _in_new_thread(torch.get_num_threads) == 1
    finally:
        set_process_default_threads(2)
    assert _in_new_thread(torch.get_num_threads) == 2
