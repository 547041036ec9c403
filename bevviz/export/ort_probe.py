"""One model in a fresh, light process: latency and peak resident memory (``VmHWM``).

Run by path (``python .../ort_probe.py MODEL.onnx FEED.npz OUT.npy --threads T --runs R``)
from :mod:`bevviz.export.rewrite_bench`, so that nothing but numpy and onnxruntime is loaded:
the process's ``VmHWM`` is then what onnxruntime needed for this model and these inputs
(``ru_maxrss`` of a child forked from a large parent would still hold the parent's size).
Imports nothing from bevviz (a package import would load torch).

Prints one JSON line: ``{"runs_s": [...], "cpu_s": [...], "vmhwm_kib": ..., "before_session_kib": ...}``
(``cpu_s``: the process's CPU seconds per run, all threads: on a loaded machine the wall
time of a run depends on the other load, its CPU time much less; ``before_session_kib``:
``VmHWM`` with the inputs loaded, before the session exists).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import onnxruntime as ort


def vmhwm_kib() -> int:
    """This process's peak resident set (``VmHWM`` of /proc/self/status), KiB."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def main() -> None:
    """Load, run ``--runs`` times after one warm-up, save the first output, print the JSON line."""
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("feed")
    ap.add_argument("out")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with np.load(args.feed) as data:
        feed = {k: data[k] for k in data.files}
    before = vmhwm_kib()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads, opts.log_severity_level = args.threads, 1, 3
    session = ort.InferenceSession(args.model, sess_options=opts, providers=["CPUExecutionProvider"])
    out = session.run(None, feed)[0]
    np.save(args.out, out)
    del out
    runs, cpu = [], []
    for _ in range(args.runs):
        t, c = time.perf_counter(), time.process_time()
        session.run(None, feed)
        runs.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    print(json.dumps({"runs_s": runs, "cpu_s": cpu, "vmhwm_kib": vmhwm_kib(), "before_session_kib": before}),
          flush=True)


if __name__ == "__main__":
    main()
