"""Each figure builder returns a go.Figure with the expected traces on a tiny input."""

import numpy as np
import plotly.graph_objects as go
import pytest

from bevviz import overlays
from bevviz.bev_grid import BEVGrid
from bevviz.errors import InputError
from bevviz.synthetic import nuscenes_like_rig
from bevviz.viz import bev, cameras, common, panels, rig3d

RIG = nuscenes_like_rig().resized(0.04)  # 64 x 36
GRID = BEVGrid((-8.0, 8.0), (-6.0, 6.0), (0.0, 1.0), 1.0)  # 16 x 12 cells


def names(fig):
    return [t.name for t in fig.data]


def test_downsample_and_data_uri():
    img = np.zeros((90, 160, 3), np.uint8)
    small, scale = common.downsample(img, 40)
    assert small.shape == (22, 40, 3) and scale == pytest.approx(0.25)
    same, s1 = common.downsample(img, 400)
    assert same is img and s1 == 1.0
    assert common.data_uri(small).startswith("data:image/png;base64,")
    assert common.data_uri(small, "jpeg").startswith("data:image/jpeg;base64,")
    with pytest.raises(InputError, match=r"field 'image': must be uint8 \(got 'dtype float32'\)"):
        common.data_uri(small.astype(np.float32))


def test_flip_bev_puts_front_left_cell_at_largest_coordinates():
    a = np.arange(12).reshape(3, 4)
    f = common.flip_bev(a)
    assert f[-1, -1] == a[0, 0]  # front-left cell: largest x (top), largest y (reversed axis -> left)
    ys, xs = common.bev_coords(GRID)
    assert np.all(np.diff(ys) > 0) and np.all(np.diff(xs) > 0)


def test_camera_figure_has_image_and_all_overlays():
    cam = RIG["CAM_FRONT"]
    img = np.full((cam.height, cam.width, 3), 100, np.uint8)
    ov = cameras.CameraOverlay(
        points_uv=np.array([[10.0, 20.0], [30.0, 25.0]]), color=np.array([1.0, 2.0]),
        customdata=np.zeros((2, 6)), ghost_uv=np.array([[5.0, 5.0]]),
        grid_uv=np.array([[[0.0, 30.0], [63.0, 30.0]]]), grid_labels=["x = 10 m"],
        grid_label_uv=np.array([[30.0, 30.0]]), horizon=np.array([[-0.5, 17.0], [63.5, 17.5]]),
        picks=[{"u": 10.0, "v": 20.0, "z": 0.0, "status": "valid"},
               {"u": 0.0, "v": 0.0, "z": 1.0, "status": "behind"}])
    fig = cameras.camera_figure(cam, img, ov, style=cameras.CameraStyle(points=cameras.ColorScale(cmin=0, cmax=3)),
                                showscale=True)
    assert isinstance(fig, go.Figure)
    assert names(fig) == ["ground grid", "horizon", "behind camera", "points", "picked cell"]
    assert [a.text for a in fig.layout.annotations if a.text.startswith("x=")] == ["x=10m"]
    assert len(fig.layout.images) == 1 and fig.layout.images[0].sizex == cam.width
    assert list(fig.layout.yaxis.range) == [cam.height - 0.5, -0.5]  # v down
    assert len(fig.data[-1].x) == 1  # only the valid pick is drawn


def test_camera_figure_without_image_or_overlays():
    fig = cameras.camera_figure(RIG["CAM_BACK"], None)
    assert isinstance(fig, go.Figure) and len(fig.data) == 0 and len(fig.layout.shapes) == 1


def test_camera_grid_figure_puts_every_camera_on_its_own_axes():
    layout = [[RIG["CAM_FRONT_LEFT"], RIG["CAM_FRONT"], None], [RIG["CAM_BACK"]]]
    ovs = {n: cameras.CameraOverlay(points_uv=np.array([[1.0, 2.0]]), color=np.array([0.5]),
                                    customdata=np.zeros((1, 6)), horizon=np.array([[0.0, 1.0], [5.0, 1.0]]))
           for n in ("CAM_FRONT_LEFT", "CAM_FRONT", "CAM_BACK")}
    img = np.zeros((36, 64, 3), np.uint8)
    fig = cameras.camera_grid_figure(layout, {"CAM_FRONT": img, "CAM_BACK": None}, ovs,
                                     style=cameras.CameraStyle(points=cameras.ColorScale(cmin=0, cmax=1)))
    assert [(t.meta, t.name, t.xaxis) for t in fig.data] == [
        ("CAM_FRONT_LEFT", "horizon", "x"), ("CAM_FRONT_LEFT", "points", "x"),
        ("CAM_FRONT", "horizon", "x2"), ("CAM_FRONT", "points", "x2"),
        ("CAM_BACK", "horizon", "x4"), ("CAM_BACK", "points", "x4")]
    assert [t.marker.showscale for t in fig.data if t.name == "points"] == [True, False, False]  # one colour bar
    assert len(fig.layout.images) == 1 and fig.layout.images[0].xref == "x2"
    assert len(fig.layout.shapes) == 2  # blank frames where no image was given
    assert fig.layout.xaxis3.visible is False  # the empty slot
    assert {a.text for a in fig.layout.annotations} == {"CAM_FRONT_LEFT", "CAM_FRONT", "CAM_BACK"}
    assert fig.layout.yaxis4.scaleanchor == "x4"


def test_rig_figure_traces():
    fr = {c.name: overlays.frustum(c, 2.0) for c in RIG}
    ax = {c.name: overlays.camera_axes(c, 0.5) for c in RIG}
    fig = rig3d.rig_figure(RIG.names, fr, ax, GRID)
    n = names(fig)
    for cam in RIG.names:
        assert cam in n
    for k in ("camera x (RDF right)", "camera y (RDF down)", "camera z (RDF forward)", "ego axes", "BEV extent"):
        assert k in n
    assert "BEV extent" not in names(rig3d.rig_figure(RIG.names, fr, ax, None))


def test_bev_map_scalar_and_rgb():
    fig = bev.bev_map(np.random.rand(*GRID.shape), GRID, title="s")
    assert isinstance(fig.data[0], go.Heatmap)
    assert fig.data[0].z.shape == GRID.shape
    assert list(fig.layout.xaxis.range) == [6.0, -6.0]  # left (+y) on the left
    fig = bev.bev_map(np.zeros(GRID.shape + (3,), np.uint8), GRID)
    assert isinstance(fig.data[0], go.Image)


def test_bev_panels_share_one_colour_scale():
    maps = {"a": np.zeros(GRID.shape), "b": np.ones(GRID.shape) * 2, "rgb": np.zeros(GRID.shape + (3,))}
    fig = bev.bev_panels(maps, GRID, cols=2)
    assert [type(t) for t in fig.data] == [go.Heatmap, go.Heatmap, go.Image]
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 2
    assert all(t.coloraxis == "coloraxis" for t in fig.data[:2])


def test_footprint_overlap_difference_pick():
    fp = np.zeros((3,) + GRID.shape, bool)
    fp[0, :5] = True
    fp[1, 3:8] = True
    fig = bev.footprint_composite(fp, ["A", "B", "C"], GRID)
    assert isinstance(fig.data[0], go.Image) and names(fig)[1:] == ["A", "B", "C"]
    fig = bev.overlap_map(overlays.overlap_count(fp), GRID)
    assert isinstance(fig.data[0], go.Heatmap)
    fig = bev.difference_map(fp.any(0), fp[1], GRID)
    assert fig.data[0].z.max() == 2 and len(fig.data[1].x) == fp[1].sum()
    fig = bev.pick_map(fp.sum(0), GRID, (2.5, 0.5))
    assert names(fig) == ["map", "pick", "picked"]
    assert len(fig.data[1].x) == 8 * 6  # lattice every 2 m over 16 x 12 m


def test_pixel_panels_profile_bar():
    fig = panels.image_panels({"a": np.zeros((4, 5)), "b": np.ones((4, 5, 3)) * 0.5}, cols=2,
                              extents={"a": (-1.0, 5.0, -1.0, 4.0)}, frame=(-0.5, 4.5, -0.5, 3.5))
    assert [type(t) for t in fig.data] == [go.Heatmap, go.Image]
    assert fig.data[0].dx == pytest.approx(1.5) and len(fig.layout.shapes) == 2
    fig = panels.profile_figure(np.arange(5.0), {"zeros": np.zeros(5), "border": np.ones(5)}, borders=(-0.5, 4.5))
    assert names(fig) == ["zeros", "border"] and len(fig.layout.shapes) == 2
    fig = panels.bar_figure(["a", "b"], [1.0, 2.0])
    assert isinstance(fig.data[0], go.Bar)


def test_names_and_titles_show_literally_in_plotly():
    """Plotly renders <b>, <br>, <a href> in titles, hovers, legends and text: user names are escaped."""
    hostile = '<b>x</b> & <a href="http://x">[link](http://x)</a>'
    literal = '&lt;b&gt;x&lt;/b&gt; &amp; &lt;a href="http://x"&gt;[link](http://x)&lt;/a&gt;'
    assert common.plain_text(hostile) == literal
    assert common.plain_text("CAM_FRONT_LEFT") == "CAM_FRONT_LEFT"  # names by the rule pass unchanged
    # Titles, panel titles and trace names in templates.
    assert common.base_layout(100, title=hostile)["title"]["text"] == literal
    _, _, notes = common.subplot_grid(2, 2, titles=[hostile, "plain"])
    assert [n["text"] for n in notes] == [literal, "plain"]
    fig = bev.bev_panels({hostile: np.zeros((GRID.height, GRID.width))}, GRID)
    assert fig.data[0].name == literal and f"<extra>{literal}</extra>" in fig.data[0].hovertemplate
    # A dataset's box categories and a camera's hover label.
    cam = RIG["CAM_FRONT"]
    ov = cameras.CameraOverlay(box_segments=np.array([[[1.0, 2.0], [3.0, 4.0]]]), box_labels=[hostile])
    fig = cameras.camera_figure(cam, None, ov)
    (boxes,) = [t for t in fig.data if t.name == "boxes"]
    assert set(boxes.text) == {literal} and boxes.hovertemplate.startswith("<b>CAM_FRONT</b>")
    assert fig.layout.title.text == "CAM_FRONT"
