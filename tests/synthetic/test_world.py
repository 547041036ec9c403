"""bevviz.synthetic.world: ray casting, occlusion by boxes, the ground beyond the texture, and
boxes kept out of the camera seams."""

from __future__ import annotations

import numpy as np

from bevviz import synthetic as syn
from bevviz.projection import project_points


def test_box_occludes_the_ground_behind_it():
    rig = syn.nuscenes_like_rig().resized(0.25).subset(["CAM_FRONT"])
    cam = rig["CAM_FRONT"]
    world = syn.default_world()
    car = next(i for i, b in enumerate(world.boxes) if b.name == "car_1")
    without = syn.World(world.texture, world.grid, tuple(b for i, b in enumerate(world.boxes) if i != car))
    with_img = syn.render_camera(cam, world)
    without_img = syn.render_camera(cam, without)
    # Pixels change only inside the car's projected outline, and they do change there.
    corners = project_points(world.boxes[car].corners(), rig).uv[0].numpy()
    (u0, v0), (u1, v1) = corners.min(0), corners.max(0)
    changed = np.any(with_img != without_img, axis=-1)
    vv, uu = np.nonzero(changed)
    assert changed.sum() > 20
    assert uu.min() >= np.floor(u0) - 1 and uu.max() <= np.ceil(u1) + 1
    assert vv.min() >= np.floor(v0) - 1 and vv.max() <= np.ceil(v1) + 1
    # The ray through the back face's centre hits the car before the ground it hides.
    back = np.array([[world.boxes[car].center[0] - 2.25, 0.0, 0.8]])
    uv = project_points(back, rig).uv[0].numpy()
    origin, d = syn.camera_rays(cam, uv=uv)
    hit = syn.cast_rays(world, origin, d)
    assert hit.kind[0] == syn.BOX and hit.box[0] == car and hit.face[0] == 1  # -x face
    assert -origin[2] / d[0, 2] > hit.t[0]  # the ground lies behind
    u, v = np.rint(uv[0]).astype(int)
    face = np.asarray(world.boxes[car].face_colors[1], float)
    ground = syn.sample_ground(origin[None, :2] - origin[2] / d[:, 2:] * d[:, :2])[0]
    assert np.linalg.norm(with_img[v, u] - face * 0.9) < 30
    assert np.linalg.norm(without_img[v, u] - ground) < 30


def test_no_box_stands_in_a_camera_seam_in_any_sample():
    # The calibration doctor compares neighbouring cameras on the ground they share; a box
    # there would look like a miscalibration on the true rig. For every sample's ego pose
    # and every pair of neighbours, the shared ground 3-30 m out must be visible to both.
    rig = syn.nuscenes_like_rig()
    world = syn.default_world()
    ring = ("CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_BACK_RIGHT", "CAM_BACK", "CAM_BACK_LEFT",
            "CAM_FRONT_LEFT")
    r, th = np.meshgrid(np.linspace(3, 30, 28), np.radians(np.arange(-180, 180, 0.5)))
    ground = np.stack([r.ravel() * np.cos(th.ravel()), r.ravel() * np.sin(th.ravel()),
                       np.zeros(r.size)], 1)  # ego frame
    in_image = project_points(ground, rig).valid.numpy()  # (6, M)
    ego_xs = sorted({x for scene in syn.SCENES for x in scene["ego_x"]})
    assert len(ego_xs) == 8  # scenes A and B: 4 poses; the drift scene C: 4 more
    for ego_x in ego_xs:
        world_pts = ground + [ego_x, 0.0, 0.0]
        visible = {}
        for ci, cam in enumerate(rig):
            origin = cam.position + [ego_x, 0.0, 0.0]
            hits = syn.cast_rays(world, origin, world_pts - origin)
            visible[cam.name] = in_image[ci] & (hits.kind == syn.GROUND) & (np.abs(hits.t - 1) < 1e-6)
        for a, b in zip(ring, ring[1:] + ring[:1]):
            shared = in_image[rig.names.index(a)] & in_image[rig.names.index(b)]
            assert shared.sum() > 100, (a, b)
            seen = (visible[a] & visible[b])[shared].mean()
            assert seen == 1.0, f"ego x {ego_x}: {a}/{b} see {100 * seen:.0f}% of their shared ground"
    # The check does catch a box: the old layout's car beside the ego blocks a seam.
    blocker = syn.Box("car_x", "car", (3.0, 11.1), (4.5, 1.9, 1.6), 0.0, ((0, 0, 0),) * 6)
    hits = syn.cast_rays(syn.World(world.texture, world.grid, world.boxes + (blocker,)),
                         rig["CAM_FRONT_LEFT"].position, ground - rig["CAM_FRONT_LEFT"].position)
    fl, bl = rig.names.index("CAM_FRONT_LEFT"), rig.names.index("CAM_BACK_LEFT")
    shared = in_image[fl] & in_image[bl]
    assert (hits.kind[shared] == syn.BOX).mean() > 0.5


def test_sample_ground_fades_outside_the_texture():
    far = syn.sample_ground(np.array([[200.0, 0.0], [0.0, -500.0]]))
    np.testing.assert_allclose(far, np.float32([syn.FAR_GROUND] * 2))
