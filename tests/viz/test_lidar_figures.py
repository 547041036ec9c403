"""Figure builders of the LiDAR views: points and boxes over the cameras, the doctor's evidence."""

import numpy as np
import plotly.graph_objects as go

from bevviz.synthetic import nuscenes_like_rig
from bevviz.viz import calibration_lidar, cameras

RIG = nuscenes_like_rig().resized(0.04)  # 64 x 36


def names(fig):
    return [t.name for t in fig.data]


def test_camera_grid_draws_lidar_and_boxes_with_their_own_colour_bar():
    ov = {n: cameras.CameraOverlay() for n in RIG.names}
    ov["CAM_FRONT"] = cameras.CameraOverlay(
        points_uv=np.array([[10.0, 20.0]]), color=np.array([1.0]), customdata=np.zeros((1, 6)),
        lidar_uv=np.array([[5.0, 6.0], [7.0, 8.0]]), lidar_color=np.array([3.0, 9.0]),
        lidar_customdata=np.array([[3.0, 10.0], [9.0, 20.0]]),
        box_segments=np.array([[[0.0, 0.0], [10.0, 10.0]], [[10.0, 10.0], [20.0, 5.0]]]),
        box_labels=["vehicle.car", "vehicle.car"])
    ov["CAM_BACK"] = cameras.CameraOverlay(lidar_uv=np.array([[1.0, 2.0]]), lidar_color=np.array([4.0]),
                                           lidar_customdata=np.array([[4.0, 1.0]]))
    layout = [[RIG[n] for n in row] for row in RIG.display_grid()]
    fig = cameras.camera_grid_figure(layout, {}, ov, style=cameras.CameraStyle(
        points=cameras.ColorScale(cmin=0, cmax=2), lidar=cameras.ColorScale("Plasma", 0, 10, "depth")))
    assert isinstance(fig, go.Figure)
    assert names(fig) == ["boxes", "lidar", "points", "lidar"]
    boxes, front_lidar, points, back_lidar = fig.data
    assert len(boxes.x) == 6 and np.isnan(boxes.x[2]) and list(boxes.text[:3]) == ["vehicle.car"] * 3
    assert front_lidar.marker.showscale and not back_lidar.marker.showscale  # one LiDAR colour bar
    assert front_lidar.marker.colorbar.x != points.marker.colorbar.x  # beside the points' bar, not on it
    assert (front_lidar.marker.cmin, front_lidar.marker.cmax) == (0, 10) and front_lidar.meta == "CAM_FRONT"


def test_lidar_alignment_figure_has_both_point_sets_on_pixel_axes():
    cam = RIG["CAM_FRONT"]
    pic = calibration_lidar.edge_picture(np.random.default_rng(0).random((36, 64)).astype(np.float32), 32)
    assert pic.startswith("data:image/jpeg;base64,")
    fig = calibration_lidar.lidar_alignment_figure(cam, pic, np.array([[1.0, 2.0], [3.0, 4.0]]),
                                                   np.array([[1.5, 2.0], [3.5, 4.0]]), title="CAM_FRONT")
    assert names(fig) == ["stored calibration (2)", "optimum (2)"]
    assert list(fig.layout.xaxis.range) == [-0.5, cam.width - 0.5]
    assert list(fig.layout.yaxis.range) == [cam.height - 0.5, -0.5]  # v down
    assert len(fig.layout.images) == 1


def test_score_profiles_mark_the_stored_calibration_and_the_optimum():
    offs = np.round(np.arange(-3.0, 3.0001, 0.1), 6)
    profiles = {a: (offs, 1.0 - (offs - c) ** 2) for a, c in zip(("roll", "pitch", "yaw"), (0.0, 0.5, -1.0))}
    fig = calibration_lidar.score_profiles_figure(profiles, {"roll": 0.0, "pitch": 0.5, "yaw": -1.0})
    assert names(fig) == ["score", "stored", "optimum"] * 3
    yaw_stored, yaw_best = fig.data[7], fig.data[8]
    assert yaw_stored.x[0] == 0.0 and yaw_best.x[0] == -1.0
    assert yaw_best.y[0] > yaw_stored.y[0]  # the optimum scores higher
    assert len(fig.layout.shapes) == 6  # a dotted line at each marker
    seq = calibration_lidar.score_profiles_figure(profiles, (0.0, 0.5, -1.0))
    assert seq.data[8].x[0] == -1.0
    stacked = calibration_lidar.score_profiles_figure(profiles, (0.0, 0.5, -1.0), cols=1)
    assert stacked.layout.yaxis.domain[0] > stacked.layout.yaxis3.domain[1]  # roll above yaw
    assert stacked.layout.xaxis.title.text is None and stacked.layout.xaxis3.title.text == "offset (deg)"


def test_camera_figure_colours_lidar_by_the_styles_lidar_scale_without_a_bar():
    ov = cameras.CameraOverlay(lidar_uv=np.array([[1.0, 2.0]]), lidar_color=np.array([4.0]),
                               lidar_customdata=np.array([[4.0, 1.0]]))
    style = cameras.CameraStyle(lidar=cameras.ColorScale("Plasma", 1, 7, "intensity"), marker_size=5.0)
    (lidar,) = cameras.camera_figure(RIG["CAM_BACK"], None, ov, style=style).data
    assert (lidar.marker.cmin, lidar.marker.cmax, lidar.marker.size) == (1, 7, 4.5)
    assert not lidar.marker.showscale
