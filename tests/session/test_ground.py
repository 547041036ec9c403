"""Where the ground is (bevviz.session.ground): the shift the physical checks measure from, whom a note blames."""

from __future__ import annotations

import numpy as np
import pytest

from bevviz.lidar import LidarScan
from bevviz.session.ground import GROUND_SHIFT_M, cameras_grounded, ground_note, ground_shift, shift_of


@pytest.mark.parametrize(("ground_z", "shift"), [(None, 0.0), (0.0, 0.0), (0.1, 0.0), (-GROUND_SHIFT_M, 0.0),
                                                (-1.7, -1.7), (0.6, 0.6)])
def test_a_road_within_the_margin_of_z_0_shifts_nothing(ground_z, shift):
    assert shift_of(ground_z) == pytest.approx(shift)


def _flat_road(z: float) -> LidarScan:
    rng = np.random.default_rng(0)
    xy = rng.uniform(-30.0, 30.0, (4000, 2))
    points = np.column_stack([xy, np.full(len(xy), z), np.zeros(len(xy))]).astype(np.float32)
    return LidarScan(points, None, np.zeros(len(xy), np.int16), np.zeros(3))


def test_a_scan_of_a_road_far_below_z_0_is_the_ground_the_checks_measure_from():
    assert ground_shift(None) == 0.0
    assert ground_shift(_flat_road(0.05)) == 0.0
    assert ground_shift(_flat_road(-1.7)) == pytest.approx(-1.7, abs=0.05)


def test_cameras_at_plausible_heights_above_z_0_say_where_the_ground_is(rig):
    heights = [float(c.position[2]) for c in rig]
    assert all(0.5 <= h <= 3.0 for h in heights)  # the sample rig: 1.5-1.9 m up
    assert cameras_grounded(rig, 1.5)  # a LiDAR seeing the road 1.5 m up is the suspect
    assert not cameras_grounded(rig, 0.0)  # nothing to blame: the road is where the cameras say


def test_the_note_blames_the_lidar_when_the_cameras_are_grounded_else_names_the_sensor_frame(rig):
    assert ground_note(rig, 0.0, 0.0) == ""
    blamed = ground_note(rig, 1.2, 0.0)
    assert "look 1.20 m too high" in blamed and "judges the cameras' heights from z = 0" in blamed
    assert "too low" in ground_note(rig, -1.2, 0.0)
    frame = ground_note(rig, -1.7, -1.7)
    assert "z = -1.70 m" in frame and "stored in a sensor's frame" in frame
