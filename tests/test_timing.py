"""bevviz.timing: interleaved rounds, equal windows, peak-memory and process figures.

No test asserts a speed: the interleaving tests use fake timers that return fixed seconds
(the schedule and the arithmetic are checked), the others only that a measurement is sane."""

from __future__ import annotations

import pytest
import torch

from bevviz import timing


def test_rounds_interleave_and_reverse_and_fast_entries_average_equal_windows():
    calls = []

    def timer(name, seconds):
        def run():
            calls.append(name)
            return seconds
        return run

    res = timing.time_group({"ref": timer("ref", 0.1), "slow": timer("slow", 0.2), "fast": timer("fast", 0.01)},
                           "ref", rounds=2, alternations=2)
    assert res["calls"] == {"ref": 1, "slow": 1, "fast": 10}
    timed = calls[3:]  # after one sizing call each
    fast = ["fast"] * 10
    forward, backward = ["ref", "slow", *fast], [*fast, "slow", "ref"]
    assert timed == forward + backward + forward + backward
    assert res["samples"]["fast"] == pytest.approx([0.01] * 4)
    assert res["round_min"]["slow"] == pytest.approx([0.2] * 2)


@pytest.mark.parametrize(("seconds", "baseline", "calls"),
                         [(0.2, 0.1, 1), (0.06, 0.1, 1), (0.01, 0.1, 10), (1e-6, 0.1, timing.MAX_CALLS_PER_SAMPLE),
                          (0.0, 0.1, 1)])
def test_calls_per_sample_make_windows_about_one_baseline_call(seconds, baseline, calls):
    assert timing.calls_per_sample(seconds, baseline) == calls


def test_peak_rss_sees_a_large_allocation_and_process_usage_counts():


    mb = timing.peak_rss_mb(lambda: torch.ones(64 * 2**20 // 4).add_(1))  # 64 MiB touched
    if mb is None:
        pytest.skip("no /proc/self/clear_refs here")
    assert 60 <= mb < 400
    usage = timing.process_usage()
    assert usage["user_s"] > 0 and usage["minor_faults"] >= 0


def test_backward_once_times_only_the_backward():


    x = torch.randn(3, 4)
    seconds = timing.backward_once(lambda t: (t * 2).sum(1), x)
    assert 0 <= seconds < 5 and x.grad is None  # the caller's tensor is left alone


def test_huge_pages_state_says_what_the_switch_and_the_kernel_say(monkeypatch, tmp_path):
    setting = tmp_path / "enabled"
    setting.write_text("always [madvise] never\n")
    monkeypatch.setattr(timing, "_THP_SETTING", setting)
    monkeypatch.setenv(timing.HUGE_PAGES_ENV, "1")
    assert timing.huge_pages_state() == "torch THP allocations on (kernel: madvise)"
    monkeypatch.delenv(timing.HUGE_PAGES_ENV)
    assert timing.huge_pages_state() == "torch THP allocations off (kernel: madvise)"
    monkeypatch.setattr(timing, "_THP_SETTING", tmp_path / "missing")
    assert timing.huge_pages_state().endswith("(kernel: unavailable)")


def test_machine_info_reads_what_torch_and_the_cpu_report(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    info = timing.machine_info(default_threads=7)
    assert info["threads_default"] == 7 and info["thread_env"]["OMP_NUM_THREADS"] == "3"
    assert info["cpu_capability"] == str(torch.backends.cpu.get_cpu_capability())
    assert info["torch"] == torch.__version__ and info["interop_threads"] == torch.get_num_interop_threads()
    line = timing.machine_line(info)
    assert "OMP_NUM_THREADS=3" in line and "(torch default 7)" in line and info["cpu_model"] in line
