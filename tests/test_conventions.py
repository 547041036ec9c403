"""Tests for bevviz.conventions: raw stored calibration <-> Camera for all 12 conventions.

The stored representations are built here by hand, from the definitions of the conventions
(which axes the stored frame has, which way the transform points, which order the quaternion
is written in), with pyquaternion for quaternions, and never with bevviz's own inverse.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyquaternion import Quaternion

from bevviz.camera import Camera, Rig, invert_transform, make_transform
from bevviz.conventions import NUSCENES, Convention, RawCamera, camera_from_raw, raw_from_camera
from bevviz.projection import project_points

EXTRINSICS = ("sensor_to_ego", "ego_to_sensor")
ORDERS = ("wxyz", "xyzw")
AXES = ("RDF", "RUB", "FLU")
ALL = list(itertools.product(EXTRINSICS, ORDERS, AXES))

#: The stored frame's axes written in RDF coordinates (columns x, y, z): ``rdf_from_stored``.
#: RUB: x right, y up, z backward. FLU: x forward, y left, z up.
RDF_FROM_STORED = {
    "RDF": np.eye(3),
    "RUB": np.column_stack([[1, 0, 0], [0, -1, 0], [0, 0, -1]]).astype(float),
    "FLU": np.column_stack([[0, 0, 1], [-1, 0, 0], [0, -1, 0]]).astype(float),
}
#: Unit vector pointing out of the lens (the viewing direction), in stored axes.
FORWARD_IN_STORED = {"RDF": [0, 0, 1], "RUB": [0, 0, -1], "FLU": [1, 0, 0]}

#: Two real nuScenes v1.0-mini calibrated_sensor records (scene-0061): sensor_to_ego, wxyz, RDF.
K_FRONT = [[1266.417203046554, 0.0, 816.2670197447984], [0.0, 1266.417203046554, 491.50706579294757], [0, 0, 1]]
K_BACK_LEFT = [[1256.7414812095406, 0.0, 792.1125740759628], [0.0, 1256.7414812095406, 492.7757465151356], [0, 0, 1]]
NUSCENES_RECORDS = [
    ("CAM_FRONT", K_FRONT, [0.4998015430569128, -0.5030316162024876, 0.4997798114386805, -0.49737083824542755],
     [1.70079118954, 0.0159456324149, 1.51095763913]),
    ("CAM_BACK_LEFT", K_BACK_LEFT, [0.6924185592174665, -0.7031619420114925, -0.11648342771943819, 0.11203317912370753],
     [1.03569100218, 0.484795032713, 1.59097014818]),
]


def true_cameras() -> list[Camera]:
    """The two real cameras, built with pyquaternion from the nuScenes definition."""
    cams = []
    for name, K, q, t in NUSCENES_RECORDS:
        ego_from_cam = make_transform(Quaternion(q).rotation_matrix, np.array(t))
        cams.append(Camera(name, K, np.linalg.inv(ego_from_cam), 1600, 900))
    return cams


def store(cam: Camera, extrinsic: str, order: str, axes: str, as_matrix: bool = False) -> RawCamera:
    """Store ``cam`` in a convention, by hand from the definitions."""
    ego_from_rdf = np.linalg.inv(cam.cam_from_ego)
    ego_from_stored = ego_from_rdf @ make_transform(RDF_FROM_STORED[axes], np.zeros(3))
    T = ego_from_stored if extrinsic == "sensor_to_ego" else np.linalg.inv(ego_from_stored)
    R, t = T[:3, :3], T[:3, 3]
    if as_matrix:
        rotation = R.copy()
    else:
        w, x, y, z = Quaternion(matrix=R, atol=1e-9).elements
        rotation = np.array([w, x, y, z] if order == "wxyz" else [x, y, z, w])
    return RawCamera(cam.name, cam.K.copy(), rotation, t.copy(), cam.width, cam.height)


def assert_same_camera(a: Camera, b: Camera, atol: float = 1e-12) -> None:
    assert a.name == b.name and a.size == b.size
    np.testing.assert_allclose(a.K, b.K, rtol=0, atol=atol)
    np.testing.assert_allclose(a.cam_from_ego, b.cam_from_ego, rtol=0, atol=atol)


def assert_same_quaternion_up_to_sign(q1, q2, atol: float = 1e-12) -> None:
    q1, q2 = np.asarray(q1, float), np.asarray(q2, float)
    assert min(np.abs(q1 - q2).max(), np.abs(q1 + q2).max()) < atol, (q1, q2)


# --- Convention ------------------------------------------------------------------------------

def test_default_convention_is_nuscenes():
    assert Convention() == NUSCENES == Convention("sensor_to_ego", "wxyz", "RDF")
    assert NUSCENES.label == "sensor_to_ego / wxyz / RDF"
    assert NUSCENES.to_dict() == {"extrinsic": "sensor_to_ego", "quaternion": "wxyz", "camera_axes": "RDF"}


def test_all_conventions():
    conventions = Convention.all()
    assert len(conventions) == 12 and len(set(conventions)) == 12
    assert conventions[0] == NUSCENES
    assert {(c.extrinsic, c.quaternion, c.camera_axes) for c in conventions} == set(ALL)


@pytest.mark.parametrize("kwargs, field, value", [
    ({"extrinsic": "cam_to_world"}, "extrinsic", "'cam_to_world'"),
    ({"quaternion": "wzyx"}, "quaternion", "'wzyx'"),
    ({"camera_axes": "RFU"}, "camera_axes", "'RFU'"),
])
def test_convention_rejects_unknown_values(kwargs, field, value):
    with pytest.raises(ValueError, match=rf"field '{field}': must be one of .* \(got {value}\)"):
        Convention(**kwargs)


# --- every convention: raw -> rig -> raw -----------------------------------------------------

@pytest.mark.parametrize("extrinsic, order, axes", ALL)
def test_from_raw_recovers_true_rig(extrinsic, order, axes):
    conv = Convention(extrinsic, order, axes)
    cams = true_cameras()
    rig = Rig.from_raw([store(c, extrinsic, order, axes) for c in cams], conv)
    assert rig.names == ["CAM_FRONT", "CAM_BACK_LEFT"]
    for got, want in zip(rig, cams):
        assert_same_camera(got, want)


@pytest.mark.parametrize("extrinsic, order, axes", ALL)
def test_from_raw_accepts_matrix_rotation(extrinsic, order, axes):
    conv = Convention(extrinsic, order, axes)
    cams = true_cameras()
    rig = Rig.from_raw([store(c, extrinsic, order, axes, as_matrix=True) for c in cams], conv)
    for got, want in zip(rig, cams):
        assert_same_camera(got, want)


@pytest.mark.parametrize("extrinsic, order, axes", ALL)
def test_round_trip_raw_rig_raw(extrinsic, order, axes):
    conv = Convention(extrinsic, order, axes)
    raws = [store(c, extrinsic, order, axes) for c in true_cameras()]
    rig = Rig.from_raw(raws, conv)
    back = rig.to_raw(conv)
    for raw, again in zip(raws, back):
        assert again.name == raw.name and (again.width, again.height) == (raw.width, raw.height)
        assert again.rotation.shape == (4,)
        assert_same_quaternion_up_to_sign(again.rotation, raw.rotation)
        np.testing.assert_allclose(again.translation, raw.translation, rtol=0, atol=1e-12)
        np.testing.assert_allclose(again.K, raw.K, rtol=0, atol=0)
    # Matrix form.
    for raw, cam in zip(raws, rig):
        as_matrix = raw_from_camera(cam, conv, rotation_as="matrix")
        np.testing.assert_allclose(as_matrix.rotation, raw.rotation_matrix(order), rtol=0, atol=1e-12)
        np.testing.assert_allclose(as_matrix.translation, raw.translation, rtol=0, atol=1e-12)
    assert Rig.from_raw(back, conv) == Rig.from_raw(back, conv)
    for a, b in zip(Rig.from_raw(back, conv), rig):
        assert_same_camera(a, b)


@settings(max_examples=60, deadline=None)
@given(
    st.tuples(*[st.floats(-1, 1, allow_nan=False)] * 4).filter(lambda q: np.linalg.norm(q) > 0.1),
    st.tuples(*[st.floats(-5, 5, allow_nan=False)] * 3),
    st.sampled_from(ALL),
)
def test_round_trip_random_rigid_transforms(q, t, conv_tuple):
    """Any rigid cam_from_ego survives camera -> raw -> camera in any convention."""
    cam_from_ego = make_transform(Quaternion(np.array(q) / np.linalg.norm(q)).rotation_matrix, np.array(t))
    cam = Camera("CAM", K_FRONT, cam_from_ego, 1600, 900)
    conv = Convention(*conv_tuple)
    raw = raw_from_camera(cam, conv)
    assert_same_camera(camera_from_raw(raw, conv), cam, atol=1e-11)
    # ... and the hand-built stored form agrees with bevviz's.
    hand = store(cam, *conv_tuple)
    assert_same_quaternion_up_to_sign(raw.rotation, hand.rotation, atol=1e-9)
    np.testing.assert_allclose(raw.translation, hand.translation, atol=1e-11)


# --- semantics, checked independently -------------------------------------------------------

@pytest.mark.parametrize("order, axes", list(itertools.product(ORDERS, AXES)))
def test_sensor_to_ego_translation_is_camera_centre(order, axes):
    for cam in true_cameras():
        raw = store(cam, "sensor_to_ego", order, axes)
        got = camera_from_raw(raw, Convention("sensor_to_ego", order, axes))
        np.testing.assert_allclose(got.position, raw.translation, atol=1e-12)


def test_nuscenes_translation_is_the_recorded_mount_position():
    raw = RawCamera("CAM_FRONT", K_FRONT, NUSCENES_RECORDS[0][2], NUSCENES_RECORDS[0][3], 1600, 900)
    cam = camera_from_raw(raw, NUSCENES)
    np.testing.assert_allclose(cam.position, [1.70079118954, 0.0159456324149, 1.51095763913], atol=1e-12)
    # CAM_FRONT looks forward: its optical axis (RDF z) is close to ego +x, its image "down" to ego -z.
    ego_from_cam = cam.ego_from_cam
    assert ego_from_cam[:3, 2] @ [1, 0, 0] > 0.99
    assert ego_from_cam[:3, 1] @ [0, 0, -1] > 0.99
    assert ego_from_cam[:3, 0] @ [0, -1, 0] > 0.99  # image right = ego right (-y)


@pytest.mark.parametrize("order, axes", list(itertools.product(ORDERS, AXES)))
def test_ego_to_sensor_maps_camera_centre_to_origin(order, axes):
    for cam in true_cameras():
        raw = store(cam, "ego_to_sensor", order, axes)
        R = Quaternion(raw.rotation if order == "wxyz" else np.roll(raw.rotation, 1)).rotation_matrix
        np.testing.assert_allclose(R @ cam.position + raw.translation, 0, atol=1e-12)
        got = camera_from_raw(raw, Convention("ego_to_sensor", order, axes))
        np.testing.assert_allclose(got.position, cam.position, atol=1e-12)
        # Mistaking it for sensor_to_ego puts the camera somewhere else entirely.
        wrong = camera_from_raw(raw, Convention("sensor_to_ego", order, axes))
        assert np.linalg.norm(wrong.position - cam.position) > 0.5


@pytest.mark.parametrize("extrinsic", EXTRINSICS)
@pytest.mark.parametrize("axes", AXES)
def test_point_in_front_has_the_stored_axes_sign(extrinsic, axes):
    """A point 10 m in front of the lens: RDF stored z = +10, RUB stored z = -10, FLU stored x = +10."""
    for cam in true_cameras():
        forward_ego = cam.ego_from_cam[:3, 2]
        p_ego = cam.position + 10.0 * forward_ego
        raw = store(cam, extrinsic, "wxyz", axes)
        T = make_transform(Quaternion(raw.rotation).rotation_matrix, raw.translation)
        stored_from_ego = invert_transform(T) if extrinsic == "sensor_to_ego" else T
        p_stored = (stored_from_ego @ np.append(p_ego, 1.0))[:3]
        np.testing.assert_allclose(p_stored, 10.0 * np.array(FORWARD_IN_STORED[axes]), atol=1e-12)
        # bevviz sees it straight ahead: depth 10, at the principal point.
        got = camera_from_raw(raw, Convention(extrinsic, "wxyz", axes))
        proj = project_points(p_ego[None], Rig([got]))
        assert proj.depth[0, 0].item() == pytest.approx(10.0, abs=1e-12)
        np.testing.assert_allclose(proj.uv[0, 0].numpy(), got.K[:2, 2], atol=1e-9)


def test_rub_data_read_as_rdf_looks_backwards():
    """The classic Blender/OpenGL mix-up: reading RUB as RDF flips the camera to look behind."""
    cam = true_cameras()[0]
    raw = store(cam, "sensor_to_ego", "wxyz", "RUB")
    wrong = camera_from_raw(raw, Convention("sensor_to_ego", "wxyz", "RDF"))
    ahead = cam.position + 10.0 * cam.ego_from_cam[:3, 2]
    assert project_points(ahead[None], Rig([wrong])).depth[0, 0].item() == pytest.approx(-10.0)


def test_quaternion_order_is_applied():
    cam = true_cameras()[1]  # CAM_BACK_LEFT: the orders differ a lot for it
    raw_xyzw = store(cam, "sensor_to_ego", "xyzw", "RDF")
    assert_same_camera(camera_from_raw(raw_xyzw, Convention("sensor_to_ego", "xyzw", "RDF")), cam)
    wrong = camera_from_raw(raw_xyzw, Convention("sensor_to_ego", "wxyz", "RDF"))
    assert np.abs(wrong.cam_from_ego[:3, :3] - cam.cam_from_ego[:3, :3]).max() > 0.5


# --- errors from raw input -------------------------------------------------------------------

def _raw(**changes) -> RawCamera:
    name, K, q, t = NUSCENES_RECORDS[0]
    values = dict(name=name, K=K, rotation=q, translation=t, width=1600, height=900)
    values.update(changes)
    return RawCamera(**values)


@pytest.mark.parametrize("raw, pattern", [
    (_raw(rotation=[0, 0, 0, 0]),
     r"camera CAM_FRONT: field 'rotation': quaternion has zero norm \(got \[0\., 0\., 0\., 0\.\]\)"),
    (_raw(rotation=[1, 0, np.nan, 0]), r"camera CAM_FRONT: field 'rotation': quaternion must be finite"),
    (_raw(rotation=[1, 0, 0]), r"camera CAM_FRONT: field 'rotation': expected shape \(3, 3\), got shape \(3,\)"),
    (_raw(rotation=np.eye(3) * 1.01), r"camera CAM_FRONT: field 'rotation': rotation is not orthonormal"),
    (_raw(rotation=np.diag([1.0, 1.0, -1.0])), r"camera CAM_FRONT: field 'rotation': rotation has det -1"),
    (_raw(rotation=[[1, 0, 0], [0, 1, 0], [0, 0, np.inf]]), r"camera CAM_FRONT: field 'rotation': must be finite"),
    (_raw(translation=[1.0, np.nan, 0.0]), r"camera CAM_FRONT: field 'translation': must be finite.*nan"),
    (_raw(translation=[1.0, 2.0]), r"camera CAM_FRONT: field 'translation': expected shape \(3,\), got shape \(2,\)"),
    (_raw(translation="abc"), r"camera CAM_FRONT: field 'translation': must be numeric"),
    (_raw(K=[[0, 0, 800], [0, 1200, 450], [0, 0, 1]]), r"camera CAM_FRONT: field 'K': fx and fy must be > 0"),
    (_raw(width=0), r"camera CAM_FRONT: field 'width': must be a positive integer \(got 0\)"),
])
def test_bad_raw_input_raises_named_error(raw, pattern):
    with pytest.raises(ValueError, match=pattern):
        camera_from_raw(raw, NUSCENES)
    with pytest.raises(ValueError, match=pattern):
        Rig.from_raw([_raw(name="CAM_OK"), raw], NUSCENES)


@pytest.mark.parametrize("scale", [2.0, 0.5, 1.0011, 0.9989])
@pytest.mark.parametrize("order", ORDERS)
def test_a_non_unit_quaternion_is_refused_naming_its_norm(scale, order):
    q = np.asarray(NUSCENES_RECORDS[0][2]) * scale
    norm = f"{np.linalg.norm(q):.6g}".replace(".", r"\.")
    with pytest.raises(ValueError, match=rf"camera CAM_FRONT: field 'rotation': quaternion norm is {norm}, not 1 "
                                         r"\(off by more than QUATERNION_NORM_TOL = 0\.001\); store a unit quaternion"):
        camera_from_raw(_raw(rotation=q), Convention(quaternion=order))


@pytest.mark.parametrize("off", [1e-9, -1e-7, 5e-4, -9e-4])
def test_rounded_quaternions_are_accepted(off):
    """nuScenes stores unit quaternions to ~1e-9, float32 files to ~1e-7; both are well inside the tolerance."""
    q = np.asarray(NUSCENES_RECORDS[0][2])
    q = q / np.linalg.norm(q) * (1 + off)
    assert np.allclose(camera_from_raw(_raw(rotation=q), NUSCENES).cam_from_ego,
                       camera_from_raw(_raw(rotation=q / np.linalg.norm(q)), NUSCENES).cam_from_ego, atol=1e-12)
    f32 = camera_from_raw(_raw(rotation=q.astype(np.float32)), NUSCENES)
    assert np.isfinite(f32.cam_from_ego).all()


def test_from_raw_rejects_duplicate_names():
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'name': duplicate camera name"):
        Rig.from_raw([_raw(), _raw()], NUSCENES)


def test_raw_from_camera_rejects_unknown_rotation_form():
    with pytest.raises(ValueError, match=r"camera CAM_FRONT: field 'rotation_as'.*'euler'"):
        raw_from_camera(true_cameras()[0], NUSCENES, rotation_as="euler")
