"""The gross-error screen (:mod:`.screen`), its LiDAR step (:mod:`.lidar_placement`), its position
and focal-length step (:mod:`.pose`) and the evidence they all score poses with (:mod:`.views`)."""

from bevviz.calibration.gross.screen import (
    LIDAR_SENSOR,
    GrossError,
    GrossScreen,
    screen_gross_errors,
    swapped_images,
)
from bevviz.calibration.gross.views import GROSS_T, MIN_SCREEN_EDGES

__all__ = ["GROSS_T", "LIDAR_SENSOR", "MIN_SCREEN_EDGES", "GrossError", "GrossScreen", "screen_gross_errors",
           "swapped_images"]
