"""Benchmark of the audit's engines: ``python -m bevviz.audit.bench [--json PATH]``.

Measures, on the embedded data:

* the synthetic dataset (``sample_data/nuscenes``, 8 samples, seams only: its sparse LiDAR
  sweep cannot judge, the seams decide there anyway) audited by the ``local`` engine (1 process) and by
  ``ray`` with 2 workers: samples per second of the engine (without opening the dataset in
  the driver, with the workers' start and index loading) and each worker's peak RSS;
* the real keyframe (``sample_data/real_nuscenes``) checked with its LiDAR sweep, the
  setting a real nuScenes audit runs with: seconds per sample (warm: the second of two runs).

From these it projects (a projection, not a measurement) the wall time of an audit of
nuScenes trainval (34,149 samples): ``samples x seconds per sample / (workers x
efficiency)``, with the parallel efficiency measured for 2 Ray workers here
(``ray rate / (2 x local rate)``, at most 1), plus nothing for opening the trainval index in
each worker (it runs once per worker, in parallel, and is not measured here).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bevviz.audit.check import EMBEDDED, CheckSettings
from bevviz.audit.run import AuditOptions, run_audit

__all__ = ["TRAINVAL_SAMPLES", "main", "measure", "project"]

#: Key-frame samples of nuScenes v1.0-trainval (6 cameras each).
TRAINVAL_SAMPLES = 34_149
PROJECTED_WORKERS = (1, 8, 64)


def measure(dataroot: str | Path, settings: CheckSettings, engine: str = "local", workers: int | None = None,
            repeat: int = 1) -> dict:
    """Audit ``dataroot`` ``repeat`` times into fresh folders; the last run's figures.

    Returns:
        ``engine``, ``workers``, ``samples``, ``seconds`` (engine wall time), ``startup_s``
        (until every worker was up with the index open), ``samples_per_s`` (over the whole
        engine time), ``steady_samples_per_s`` and ``seconds_per_sample`` (after start-up),
        ``peak_rss_mib`` (per worker).
    """
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bevviz-bench-") as tmp:
            run = run_audit(dataroot, Path(tmp) / "out", settings=settings, progress=False,
                            options=AuditOptions(engine=engine, workers=workers, report=False))
    steady = max(run.seconds - run.stats.startup_s, 1e-9)
    return {"engine": engine, "workers": run.stats.workers, "samples": run.checked, "seconds": run.seconds,
            "startup_s": run.stats.startup_s, "samples_per_s": run.samples_per_second,
            "steady_samples_per_s": run.checked / steady, "seconds_per_sample": steady / max(run.checked, 1),
            "peak_rss_mib": run.stats.peak_rss_mib}


def project(seconds_per_sample: float, efficiency: float, samples: int = TRAINVAL_SAMPLES,
            workers: Sequence[int] = PROJECTED_WORKERS) -> dict[int, float]:
    """Projected wall time (seconds) of ``samples`` on each worker count (1 worker: efficiency 1)."""
    eff = min(max(efficiency, 1e-6), 1.0)
    return {w: samples * seconds_per_sample / (w * (1.0 if w == 1 else eff)) for w in workers}


def _hours(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.1f} min"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m bevviz.audit.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    ap.add_argument("--workers", type=int, default=2, help="Ray workers (default 2)")
    args = ap.parse_args(argv)
    seams = CheckSettings(lidar=False)
    t0 = time.perf_counter()
    local = measure(EMBEDDED["nuscenes"], seams, "local")
    ray = measure(EMBEDDED["nuscenes"], seams, "ray", workers=args.workers)
    real = measure(EMBEDDED["real-nuscenes"], CheckSettings(), "local", repeat=2)
    efficiency = min(1.0, ray["steady_samples_per_s"] / (args.workers * local["steady_samples_per_s"]))
    projection = project(real["seconds_per_sample"], efficiency)
    print(f"{'data':<30} {'engine':<6} {'workers':>7} {'samples':>7} {'seconds':>8} {'start-up':>8} "
          f"{'samples/s':>9} {'steady':>7}  peak RSS per worker (MiB)")
    for name, m in (("synthetic nuScenes, seams", local), ("synthetic nuScenes, seams", ray),
                    ("real keyframe + LiDAR (warm)", real)):
        rss = ", ".join(f"{x:.0f}" for x in m["peak_rss_mib"])
        print(f"{name:<30} {m['engine']:<6} {m['workers']:>7} {m['samples']:>7} {m['seconds']:>8.1f} "
              f"{m['startup_s']:>8.1f} {m['samples_per_s']:>9.2f} {m['steady_samples_per_s']:>7.2f}  {rss}")
    print(f"Ray parallel efficiency on {args.workers} workers (steady state): {efficiency:.2f}")
    print(f"Projection (not a measurement) for nuScenes trainval, {TRAINVAL_SAMPLES:,} samples at "
          f"{real['seconds_per_sample']:.2f} s each with LiDAR:")
    for w, s in projection.items():
        print(f"  {w:>3} worker{'s' if w > 1 else ' '}: {_hours(s)}")
    print(f"(benchmark took {time.perf_counter() - t0:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"local": local, "ray": ray, "real_lidar": real,
                                               "efficiency": efficiency,
                                               "trainval_projection_s": projection}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
