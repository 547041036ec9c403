"""``python -m bevviz.calibration.evaluate``: the evaluation harness, which lives in :mod:`bevviz.lab.evaluate`.

The library does not import the laboratory; this entry point only runs it, so the command
documented for real frame folders keeps working (``--frames DIR [DIR ...]``, see
:mod:`bevviz.lab.evaluate` for every option).
"""

import runpy

__all__ = ["LAB_MODULE"]

#: The module this entry point runs.
LAB_MODULE = "bevviz.lab.evaluate"

if __name__ == "__main__":
    runpy.run_module(LAB_MODULE, run_name="__main__", alter_sys=True)
