"""Which synthetic faults the seam tests sweep.

CI runs :data:`SUBSET`: every camera once and every axis twice (six of the eighteen camera x
axis faults; each diagnosis or refinement of the embedded scenes takes 3-10 s on two cores,
and the whole sweep would take the better part of CI's ten minutes). ``BEVVIZ_FULL=1``
sweeps every camera x axis (and, for the refinement, two seeds of each).
"""

from __future__ import annotations

import os

FULL = os.environ.get("BEVVIZ_FULL") == "1"

#: (camera, axis) pairs: each camera once, each axis twice.
SUBSET = [("CAM_FRONT", "yaw_deg"), ("CAM_FRONT_RIGHT", "pitch_deg"), ("CAM_BACK_RIGHT", "roll_deg"),
          ("CAM_BACK", "pitch_deg"), ("CAM_BACK_LEFT", "yaw_deg"), ("CAM_FRONT_LEFT", "roll_deg")]
