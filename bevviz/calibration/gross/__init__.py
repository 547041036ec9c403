"""The gross-error screen (:mod:`.screen`) over the evidence it scores poses with (:mod:`.views`)."""

from bevviz.calibration.gross.screen import (
    GROSS_T,
    LIDAR_SENSOR,
    GrossError,
    GrossScreen,
    screen_gross_errors,
    swapped_images,
)
from bevviz.calibration.gross.views import MIN_SCREEN_EDGES

__all__ = ["GROSS_T", "LIDAR_SENSOR", "MIN_SCREEN_EDGES", "GrossError", "GrossScreen", "screen_gross_errors",
           "swapped_images"]
