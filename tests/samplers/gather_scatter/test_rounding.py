"""bevviz.samplers.gather_scatter.rounding: the fused multiply-add of the CPU kernel is detected."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_default_cpu_kernel_rounding_is_detected():
    # PyTorch's DEFAULT (non-AVX) kernel does not fuse multiply-adds; nearest ties at
    # pixel edges then fall differently. A fresh process forced onto that kernel must
    # detect it and still match the oracle bit for bit.
    code = textwrap.dedent(
        """
        import torch, torch.nn.functional as F
        from bevviz.samplers import gather_scatter as gs
        assert not gs.FUSED_MULTIPLY_ADD, torch.backends.cpu.get_cpu_capability()
        for dtype in (torch.float32, torch.float64):
            for w in (3, 5, 7, 100):
                u = torch.arange(-2 * w, 4 * w, dtype=torch.float64) / 2  # centres, edges
                for ac in (False, True):
                    gx = (2 * u + 1) / w - 1 if not ac else 2 * u / (w - 1) - 1
                    gx = torch.cat([gx, gx * 1000.37])
                    g = torch.stack([gx, torch.zeros_like(gx)], -1).to(dtype).view(1, 1, -1, 2)
                    x = torch.randn(1, 1, 2, w, dtype=dtype)
                    for pad in ("zeros", "border", "reflection"):
                        a = F.grid_sample(x, g, "nearest", pad, ac)
                        b = gs.grid_sample(x, g, "nearest", pad, ac)
                        assert torch.equal(a, b), (dtype, w, ac, pad)
        print("ok")
        """
    )
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]
