"""bevviz.samplers.gather_scatter.engine: the drop-in grid_sample, the blocked and sparse gathers,
the scatter-add and their gradients, with F.grid_sample as the oracle."""

from __future__ import annotations

import ast
import inspect
import os
import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bevviz import threads
from bevviz.samplers import gather_scatter as gs
from bevviz.samplers.gather_scatter import blocks, engine, rounding, taps, transpose
from bevviz.samplers.reference import MODES, PADDING_MODES

DTYPES = [torch.float32, torch.float64]
#: (H_in, W_in): single pixels, single rows/columns, non-square.
SHAPES = [(1, 1), (1, 5), (4, 1), (3, 4), (6, 7)]
#: Max |diff| against F.grid_sample (the same as conftest's ``tolerance`` fixture; hypothesis
#: tests cannot take function-scoped fixtures).
TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def _examples(default: int) -> int:
    """Hypothesis examples per test; BEVVIZ_HYPOTHESIS_EXAMPLES overrides the default."""
    return int(os.environ.get("BEVVIZ_HYPOTHESIS_EXAMPLES", default))


def _features(n, c, h, w, dtype, seed=0):
    return torch.randn(n, c, h, w, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def _oracle(x, g, mode, padding_mode, align_corners):
    return F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


class _no_warning_check:
    """Context manager that ignores warnings (the tracer warns about Python ints)."""

    def __enter__(self):
        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def _tol(mode, dtype, tolerance):
    # nearest is a pure gather: it must be bit-exact, ties at pixel edges included.
    return 0.0 if mode == "nearest" else tolerance[dtype]


# ----------------------------------------------------------------------------- forward


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", PADDING_MODES)
@pytest.mark.parametrize("mode", MODES)
def test_matches_grid_sample_on_edge_grids(
    mode, padding_mode, align_corners, dtype, edge_grid, matches, tolerance
):
    for i, (h, w) in enumerate(SHAPES):
        x = _features(2, 3, h, w, dtype, seed=i)
        g = edge_grid(2, h, w, align_corners, dtype, seed=i)
        expected = _oracle(x, g, mode, padding_mode, align_corners)
        out = gs.grid_sample(x, g, mode, padding_mode, align_corners)
        assert out.is_contiguous()
        matches(out, expected, _tol(mode, dtype, tolerance))


@pytest.mark.parametrize("channels", [1, 256])
@pytest.mark.parametrize("padding_mode", PADDING_MODES)
@pytest.mark.parametrize("mode", MODES)
def test_matches_grid_sample_for_one_and_many_channels(
    mode, padding_mode, channels, edge_grid, matches, tolerance
):
    for dtype, align_corners in [(torch.float32, False), (torch.float64, True)]:
        x = _features(1, channels, 5, 6, dtype)
        g = edge_grid(1, 5, 6, align_corners, dtype)[:, ::3]
        expected = _oracle(x, g, mode, padding_mode, align_corners)
        out = gs.grid_sample(x, g, mode, padding_mode, align_corners)
        matches(out, expected, _tol(mode, dtype, tolerance))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "n,h_out,w_out", [(0, 3, 4), (2, 0, 5), (2, 4, 0), (0, 0, 0)], ids=["N=0", "H=0", "W=0", "all"]
)
def test_empty_batches(mode, n, h_out, w_out):
    x = _features(n, 3, 4, 5, torch.float32)
    g = torch.zeros(n, h_out, w_out, 2)
    expected = _oracle(x, g, mode, "zeros", False)
    out = gs.grid_sample(x, g, mode)
    assert out.shape == expected.shape == (n, 3, h_out, w_out)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_reflection_of_a_single_pixel(mode, align_corners, matches, tolerance):
    # The famous edge case: reflecting about an empty span (W=1, align_corners=True) must
    # map every coordinate, NaN and inf included, to pixel 0, exactly as PyTorch does.
    x = _features(1, 2, 1, 1, torch.float64)
    vals = [-5.0, -1.0, -0.3, 0.0, 0.7, 1.0, 2.5, 1e30, float("nan"), float("inf"), float("-inf")]
    g = torch.tensor([[[[a, b] for a in vals] for b in vals]], dtype=torch.float64)
    expected = _oracle(x, g, mode, "reflection", align_corners)
    out = gs.grid_sample(x, g, mode, "reflection", align_corners)
    matches(out, expected, _tol(mode, torch.float64, tolerance))
    if mode != "bicubic" and align_corners:
        assert torch.equal(out, x.expand_as(out))


def test_single_row_and_column_reflection_with_align_corners(edge_grid, matches, tolerance):
    for h, w in [(1, 6), (6, 1)]:
        x = _features(1, 2, h, w, torch.float32)
        g = edge_grid(1, h, w, True, torch.float32)
        for mode in MODES:
            expected = _oracle(x, g, mode, "reflection", True)
            out = gs.grid_sample(x, g, mode, "reflection", True)
            matches(out, expected, _tol(mode, torch.float32, tolerance))


def test_non_contiguous_inputs(edge_grid, matches, tolerance):
    x = _features(2, 4, 5, 7, torch.float32).contiguous(memory_format=torch.channels_last)
    g = edge_grid(2, 5, 7, False, torch.float32).transpose(1, 2)  # strided view
    for mode in MODES:
        expected = _oracle(x, g, mode, "border", False)
        out = gs.grid_sample(x, g, mode, "border", False)
        matches(out, expected, _tol(mode, torch.float32, tolerance))


def test_nan_and_inf_are_exactly_where_pytorch_puts_them():
    x = _features(1, 1, 3, 4, torch.float32)
    specials = [float("nan"), float("inf"), float("-inf")]
    g = torch.tensor([[[[s, 0.0] for s in specials] + [[0.0, s] for s in specials]]])
    for mode in MODES:
        for pad in PADDING_MODES:
            expected = _oracle(x, g, mode, pad, False)
            out = gs.grid_sample(x, g, mode, pad, False)
            assert torch.equal(torch.isnan(out), torch.isnan(expected)), (mode, pad)
            assert torch.equal(out.nan_to_num(7.0), expected.nan_to_num(7.0)), (mode, pad)


def test_sampling_is_not_trivially_zero_or_input():
    # Guard against a vacuous oracle comparison: the test grids do produce varied values.
    x = _features(1, 1, 4, 5, torch.float64)
    g = torch.rand(1, 6, 6, 2, dtype=torch.float64) * 2 - 1
    out = gs.grid_sample(x, g, "bicubic", "zeros", False)
    assert out.abs().sum() > 0 and out.unique().numel() > 10


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(1, 1), (1, 5), (4, 7), (56, 100)], ids=str)
def test_points_judged_far_read_no_pixel_in_any_mode(size, align_corners):
    # Soundness of the sparse path's pre-check: on an all-inf image any tap that reads a
    # pixel turns the output into inf or NaN, so a point judged far must give exactly 0 in
    # every mode; everything within the image must be judged near.
    h, w = size
    axis = torch.cat([torch.linspace(-4, 4, 161, dtype=torch.float64),
                      torch.linspace(-40, 40, 41, dtype=torch.float64),
                      torch.tensor([1e30, -1e30, 7.25, float("nan"), float("inf")],
                                   dtype=torch.float64)])
    gy, gx = torch.meshgrid(axis, axis, indexing="ij")
    g = torch.stack([gx, gy], -1).unsqueeze(0)
    reach = engine._reaches_image(g.reshape(1, -1, 2), h, w, align_corners).view(g.shape[1:3])
    far = ~reach
    if align_corners and h == 1 and w == 1:
        assert not far.any()  # every finite point reads the single pixel
    else:
        assert far.sum() > 0.2 * far.numel()
    assert reach[(gx.abs() <= 1) & (gy.abs() <= 1)].all()
    assert reach[torch.isnan(gx) | torch.isinf(gy)].all()  # non-finite points stay exact
    x = torch.full((1, 1, h, w), float("inf"), dtype=torch.float64)
    for mode in MODES:
        out = F.grid_sample(x, g, mode, "zeros", align_corners)[0, 0]
        assert torch.equal(out[far], torch.zeros_like(out[far])), mode


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", ["sparse", "dense"])
def test_sparse_and_dense_zeros_paths_match_grid_sample(path, mode, align_corners, dtype,
                                                        monkeypatch, edge_grid, matches,
                                                        tolerance):
    # Tiles of 4 points so small grids have many; force one path and check it was taken.
    monkeypatch.setattr(blocks, "TILE", 4)
    monkeypatch.setattr(transpose, "TILE", 4)
    monkeypatch.setattr(engine, "_SPARSE_MAX_FRACTION", 1.0 if path == "sparse" else -1.0)
    calls = []
    sparse = blocks._sparse_gather_blocks
    monkeypatch.setattr(blocks, "_sparse_gather_blocks",
                        lambda *a, **k: calls.append(1) or sparse(*a, **k))
    x = _features(3, 5, 4, 7, dtype)
    g = edge_grid(3, 4, 7, align_corners, dtype)[:, :-1, :-1]  # P not a multiple of 4
    assert (g.shape[1] * g.shape[2]) % 4 != 0
    # A BEV-like image: the first half of the rows far outside (whole tiles skipped).
    g[2, : g.shape[1] // 2] = g[2, : g.shape[1] // 2] * 0 + 5.0
    expected = _oracle(x, g, mode, "zeros", align_corners)
    matches(gs.grid_sample(x, g, mode, "zeros", align_corners), expected,
            _tol(mode, dtype, tolerance))
    assert len(calls) == (path == "sparse")


def test_mostly_outside_grid_takes_the_sparse_path(monkeypatch, matches, tolerance):
    # The default threshold: a grid 80 % outside the image (as a BEV grid seen by one
    # camera) is gathered sparsely; one mostly inside is not.
    calls = []
    sparse = blocks._sparse_gather_blocks
    monkeypatch.setattr(blocks, "_sparse_gather_blocks",
                        lambda *a, **k: calls.append(1) or sparse(*a, **k))
    x = _features(2, 8, 10, 12, torch.float32)
    gen = torch.Generator().manual_seed(3)
    g = torch.rand(2, 50, 64, 2, generator=gen) * 2.2 - 1.1
    g[:, 10:] += 4.0
    matches(gs.grid_sample(x, g), _oracle(x, g, "bilinear", "zeros", False),
            tolerance[torch.float32])
    assert calls == [1]
    g[:, 10:] -= 4.0
    matches(gs.grid_sample(x, g), _oracle(x, g, "bilinear", "zeros", False),
            tolerance[torch.float32])
    assert calls == [1]


def test_plan_decides_dense_from_a_sample_and_only_speed_depends_on_it(monkeypatch, matches, tolerance):
    # A grid inside the image goes dense from the strided sample, without the full pass;
    # one whose sampled points are inside but whose others all miss (the sample misjudges
    # it) is gathered densely too, with the same values as F.grid_sample; mostly outside
    # with the sample agreeing: the full pass, sparse.
    x = _features(2, 8, 10, 12, torch.float32)
    g = torch.rand(2, 20, 61, 2, generator=torch.Generator().manual_seed(4)) * 2 - 1
    full = []
    reaches = engine._reaches_image
    monkeypatch.setattr(engine, "_reaches_image", lambda pts, *a: full.append(pts.shape[1]) or reaches(pts, *a))
    points = g.reshape(2, -1, 2)
    assert engine._plan(points, (10, 12), "zeros", False).positions is None
    assert full == [20]  # only the sample: every 61st of 1220 points
    fooled = g.clone().reshape(2, -1, 2)
    fooled[:, torch.arange(fooled.shape[1]) % engine._PLAN_SAMPLE_STRIDE != 0] += 5.0
    fooled = fooled.view_as(g)
    assert engine._plan(fooled.reshape(2, -1, 2), (10, 12), "zeros", False).positions is None
    matches(gs.grid_sample(x, fooled), _oracle(x, fooled, "bilinear", "zeros", False), tolerance[torch.float32])
    full.clear()
    far = g + 5.0
    assert engine._plan(far.reshape(2, -1, 2), (10, 12), "zeros", False).positions is not None
    assert full == [20, 1220]


def test_traced_graph_is_out_of_place_and_matches(edge_grid):
    # While tracing (ONNX export), one out-of-place block: no slice writes that an exporter
    # would turn into ScatterND, and the same values.
    x = _features(2, 3, 4, 6, torch.float32)
    g = edge_grid(2, 4, 6, False, torch.float32, nonfinite=False)
    with _no_warning_check():
        traced = torch.jit.trace(lambda a, b: gs.grid_sample(a, b), (x, g), check_trace=False)
    kinds = {node.kind() for node in traced.graph.nodes()}
    assert "aten::index_select" in kinds
    assert not kinds & {"aten::copy_", "aten::index_put_", "aten::slice_scatter"}
    torch.testing.assert_close(traced(x, g), _oracle(x, g, "bilinear", "zeros", False),
                               rtol=0, atol=1e-5)


# ----------------------------------------------------------------------------- no oracle inside


def test_module_never_calls_grid_sample_or_interpolate():
    trees = [ast.parse(inspect.getsource(module)) for module in (gs, rounding, taps, engine, blocks)]
    called = set()
    for node in (n for tree in trees for n in ast.walk(tree)):
        if isinstance(node, ast.Call):
            func = node.func
            called.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    forbidden = {"grid_sample", "grid_sampler", "grid_sampler_2d", "interpolate", "upsample"}
    assert not called & forbidden


def test_works_with_the_oracle_disabled(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("grid_sample called")

    x = _features(1, 2, 4, 5, torch.float32)
    g = torch.rand(1, 3, 3, 2) * 2 - 1
    expected = {m: _oracle(x, g, m, "zeros", False) for m in MODES}
    monkeypatch.setattr(F, "grid_sample", boom)
    monkeypatch.setattr(torch, "grid_sampler", boom)
    monkeypatch.setattr(torch, "grid_sampler_2d", boom)
    monkeypatch.setattr(F, "interpolate", boom)
    for mode in MODES:
        torch.testing.assert_close(gs.grid_sample(x, g, mode), expected[mode], rtol=0, atol=1e-5)


# ----------------------------------------------------------------------------- gradients


def _smooth_grid(n, h_out, w_out, h, w, align_corners, margin=0.08, seed=0):
    """Normalised points whose pixel coordinates keep ``margin`` away from integers and
    half-integers (where bilinear, clipping and reflection are not differentiable)."""
    gen = torch.Generator().manual_seed(seed)

    def axis(size):
        base = torch.randint(-size, 2 * size, (n, h_out, w_out), generator=gen).double()
        frac = torch.rand(n, h_out, w_out, generator=gen, dtype=torch.float64)
        frac = margin + frac * (0.5 - 2 * margin) + 0.5 * (frac > 0.5).double()
        u = base + frac
        if align_corners:
            return 2 * u / max(size - 1, 1) - 1
        return (2 * u + 1) / size - 1

    return torch.stack([axis(w), axis(h)], -1)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", PADDING_MODES)
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_gradcheck_input_and_grid(mode, padding_mode, align_corners):
    x = _features(1, 2, 3, 4, torch.float64).requires_grad_()
    g = _smooth_grid(1, 2, 3, 3, 4, align_corners).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, b: gs.grid_sample(a, b, mode, padding_mode, align_corners), (x, g)
    )


def test_gradcheck_nearest_input():
    x = _features(1, 2, 3, 4, torch.float64).requires_grad_()
    g = _smooth_grid(1, 2, 3, 3, 4, False)
    assert torch.autograd.gradcheck(lambda a: gs.grid_sample(a, g, "nearest", "zeros"), (x,))


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", PADDING_MODES)
@pytest.mark.parametrize("mode", MODES)
def test_gradients_equal_pytorch(mode, padding_mode, align_corners, edge_grid):
    for i, (h, w) in enumerate([(1, 5), (3, 4), (6, 7)]):
        x = _features(2, 3, h, w, torch.float64, seed=i)
        g = edge_grid(2, h, w, align_corners, torch.float64, nonfinite=False, seed=i)
        g = g.clamp(-50, 50)  # finite and moderate: gradients of huge coordinates are 0 anyway
        grad_out = torch.randn(2, 3, *g.shape[1:3], dtype=torch.float64)
        grads = []
        for fn in (F.grid_sample, gs.grid_sample):
            xi, gi = x.clone().requires_grad_(), g.clone().requires_grad_()
            fn(xi, gi, mode, padding_mode, align_corners).backward(grad_out)
            grads.append((xi.grad, gi.grad))
        torch.testing.assert_close(grads[1][0], grads[0][0], rtol=0, atol=1e-10)
        torch.testing.assert_close(grads[1][1], grads[0][1], rtol=0, atol=1e-9)


@pytest.mark.parametrize("padding_mode", ["border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_zero_grid_gradient_at_and_beyond_clipped_borders(padding_mode, align_corners):
    x = _features(1, 2, 4, 5, torch.float64)
    pts = [[-1.7, 0.1], [1.6, -0.2], [0.1, -1.9], [0.2, 2.4]]
    if padding_mode == "border":  # exactly on the clip borders (pixel 0 or W - 1 when
        pts += [[-1.0, 0.3], [1.0, 0.3], [0.3, -1.0], [0.3, 1.0]]  # align_corners=True)
    g = torch.tensor([[pts]], dtype=torch.float64)
    grads = []
    for fn in (F.grid_sample, gs.grid_sample):
        gi = g.clone().requires_grad_()
        fn(x, gi, "bilinear", padding_mode, align_corners).sum().backward()
        grads.append(gi.grad)
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=1e-12)
    if padding_mode == "border":
        # x beyond/at the left/right border: d/dx = 0; y beyond/at top/bottom: d/dy = 0
        assert torch.all(grads[1][0, 0, [0, 1, 4, 5], 0] == 0)
        assert torch.all(grads[1][0, 0, [2, 3, 6, 7], 1] == 0)
        assert torch.any(grads[1][0, 0, [0, 1, 4, 5], 1] != 0)  # the other axis still moves


def test_nearest_grid_gradient_is_zero_not_missing():
    x = _features(1, 2, 4, 5, torch.float64, seed=3)
    g = torch.rand(1, 3, 3, 2, dtype=torch.float64) * 2.4 - 1.2
    grads = []
    for fn in (F.grid_sample, gs.grid_sample):
        xi, gi = x.clone().requires_grad_(), g.clone().requires_grad_()
        fn(xi, gi, "nearest", "zeros", False).sum().backward()
        grads.append((xi.grad, gi.grad))
    assert grads[1][1] is not None and torch.equal(grads[1][1], torch.zeros_like(g))
    assert torch.equal(grads[1][0], grads[0][0]) and grads[1][0].sum() > 0


# ----------------------------------------------------------------------------- hypothesis

_SPECIAL = [float("nan"), float("inf"), float("-inf"), 1.0, -1.0, 0.0, 1e30, -1e30, 2.0, -2.0]


@st.composite
def _sampling_case(draw, max_size=6):
    n = draw(st.integers(0, 2))
    c = draw(st.integers(1, 3))
    h, w = draw(st.integers(1, max_size)), draw(st.integers(1, max_size))
    h_out, w_out = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    align_corners = draw(st.booleans())
    dtype = draw(st.sampled_from(DTYPES))
    # normalised pixel centres / edges of this size, plus anything in [-3, 3] and specials
    halves = st.integers(-2 * max(h, w) - 2, 4 * max(h, w) + 2).map(lambda k: k / 2)
    edge_x = halves.map(lambda u: (2 * u + 1) / w - 1 if not align_corners or w == 1
                        else 2 * u / (w - 1) - 1)
    edge_y = halves.map(lambda u: (2 * u + 1) / h - 1 if not align_corners or h == 1
                        else 2 * u / (h - 1) - 1)
    anyval = st.floats(-3, 3, allow_nan=False)
    count = n * h_out * w_out
    xs = draw(st.lists(st.one_of(edge_x, anyval, st.sampled_from(_SPECIAL)),
                       min_size=count, max_size=count))
    ys = draw(st.lists(st.one_of(edge_y, anyval, st.sampled_from(_SPECIAL)),
                       min_size=count, max_size=count))
    grid = torch.tensor(list(zip(xs, ys)), dtype=torch.float64).reshape(n, h_out, w_out, 2)
    seed = draw(st.integers(0, 2**16))
    x = _features(n, c, h, w, dtype, seed)
    return x, grid.to(dtype), align_corners


@settings(max_examples=_examples(300), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=_sampling_case(), mode=st.sampled_from(MODES),
       padding_mode=st.sampled_from(PADDING_MODES))
def test_property_matches_grid_sample(case, mode, padding_mode):
    x, g, align_corners = case
    expected = _oracle(x, g, mode, padding_mode, align_corners)
    out = gs.grid_sample(x, g, mode, padding_mode, align_corners)
    tol = 0.0 if mode == "nearest" else TOL[x.dtype]
    assert out.shape == expected.shape
    assert torch.equal(torch.isnan(out), torch.isnan(expected))
    if out.numel():
        assert (out - expected).nan_to_num(0.0).abs().max().item() <= tol


@settings(max_examples=_examples(200), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=_sampling_case(), mode=st.sampled_from(MODES), tile=st.integers(1, 3))
def test_property_sparse_zeros_path_matches_grid_sample(case, mode, tile):
    # Tiles of 1-3 points, sparse path forced: tile skipping and partial last tiles.
    x, g, align_corners = case
    expected = _oracle(x, g, mode, "zeros", align_corners)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(blocks, "TILE", tile)
        mp.setattr(transpose, "TILE", tile)
        mp.setattr(engine, "_SPARSE_MAX_FRACTION", 1.0)
        out = gs.grid_sample(x, g, mode, "zeros", align_corners)
    tol = 0.0 if mode == "nearest" else TOL[x.dtype]
    assert torch.equal(torch.isnan(out), torch.isnan(expected))
    if out.numel():
        assert (out - expected).nan_to_num(0.0).abs().max().item() <= tol


@settings(max_examples=_examples(100), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=_sampling_case(max_size=5), mode=st.sampled_from(MODES),
       padding_mode=st.sampled_from(PADDING_MODES))
def test_property_gradients_match_grid_sample(case, mode, padding_mode):
    x, g, align_corners = case
    x, g = x.double(), g.double().nan_to_num(0.5, 0.25, -0.25).clamp(-50, 50)
    grads = []
    for fn in (F.grid_sample, gs.grid_sample):
        xi, gi = x.clone().requires_grad_(), g.clone().requires_grad_()
        out = fn(xi, gi, mode, padding_mode, align_corners)
        out.backward(torch.ones_like(out))
        grads.append((xi.grad, gi.grad))
    torch.testing.assert_close(grads[1][0], grads[0][0], rtol=0, atol=1e-10)
    torch.testing.assert_close(grads[1][1], grads[0][1], rtol=0, atol=1e-9)


@settings(max_examples=_examples(150), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=_sampling_case(), padding_mode=st.sampled_from(PADDING_MODES))
def test_property_gather_points_matches_grid_sample(case, padding_mode):
    x, g, align_corners = case
    n, h_out, w_out, _ = g.shape
    pts = g.reshape(n, h_out * w_out, 2)
    res = gs.gather_points(x, pts, padding_mode, align_corners)
    expected = _oracle(x, pts[:, :, None], "bilinear", padding_mode, align_corners)[..., 0]
    values = res.values().transpose(1, 2)
    assert values.shape == expected.shape
    assert torch.equal(torch.isnan(values), torch.isnan(expected))
    tol = TOL[x.dtype]
    if values.numel():
        assert (values - expected).nan_to_num(0.0).abs().max().item() <= tol


@settings(max_examples=_examples(100), deadline=None)
@given(
    m=st.integers(0, 12), c=st.integers(1, 3), cells=st.integers(1, 5),
    weighted=st.booleans(), int32=st.booleans(), seed=st.integers(0, 2**16),
)
def test_property_scatter_add_matches_loop(m, c, cells, weighted, int32, seed):
    gen = torch.Generator().manual_seed(seed)
    values = torch.randn(m, c, dtype=torch.float64, generator=gen)
    index = torch.randint(0, cells, (m,), generator=gen)
    weights = (torch.randint(0, 3, (m,), generator=gen).double() / 2) if weighted else None
    sums, hits = gs.scatter_add_points(
        values, index.to(torch.int32 if int32 else torch.int64), cells, weights
    )
    exp_sums = torch.zeros(cells, c, dtype=torch.float64)
    exp_hits = torch.zeros(cells, dtype=torch.int64)
    for i in range(m):
        wi = 1.0 if weights is None else float(weights[i])
        exp_sums[index[i]] += wi * values[i]
        exp_hits[index[i]] += int(wi != 0)
    torch.testing.assert_close(sums, exp_sums, rtol=0, atol=1e-12)
    assert torch.equal(hits, exp_hits)


def test_gather_is_differentiable_through_taps():
    x = _features(1, 2, 3, 4, torch.float64).requires_grad_()
    pts = (_smooth_grid(1, 1, 5, 3, 4, False).reshape(1, 5, 2)).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, p: gs.gather(a, gs.bilinear_taps(p, 3, 4)), (x, pts))


# ----------------------------------------------------------------------------- scatter


def test_scatter_add_points_by_hand():
    values = torch.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0], [5.0, 50.0]])
    cells = torch.tensor([0, 2, 0, 3, 2], dtype=torch.int32)
    sums, hits = gs.scatter_add_points(values, cells, 4)
    assert sums.tolist() == [[4.0, 40.0], [0.0, 0.0], [7.0, 70.0], [4.0, 40.0]]
    assert hits.tolist() == [2, 0, 2, 1] and hits.dtype == torch.int64
    weights = torch.tensor([1.0, 0.5, 2.0, 0.0, 1.0])
    sums, hits = gs.scatter_add_points(values, cells, 4, weights)
    assert sums.tolist() == [[7.0, 70.0], [0.0, 0.0], [6.0, 60.0], [0.0, 0.0]]
    assert hits.tolist() == [2, 0, 2, 0]


def test_scatter_add_points_gradients():
    values = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    weights = torch.rand(6, dtype=torch.float64, requires_grad=True)
    cells = torch.tensor([1, 1, 0, 2, 2, 2])
    assert torch.autograd.gradcheck(
        lambda v, w: gs.scatter_add_points(v, cells, 3, w)[0], (values, weights)
    )


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: gs.grid_sample(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 1, 2), "area"), "mode"),
        (lambda: gs.grid_sample(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 1, 2), "bilinear",
                                "circular"), "padding_mode"),
        (lambda: gs.grid_sample(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 1, 2),
                                align_corners=None), "align_corners"),
        (lambda: gs.grid_sample(torch.zeros(1, 2, 2), torch.zeros(1, 1, 1, 2)), "input"),
        (lambda: gs.grid_sample(torch.zeros(1, 1, 2, 2), torch.zeros(2, 1, 1, 2)), "grid"),
        (lambda: gs.grid_sample(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 1, 2).double()),
         "grid"),
        (lambda: gs.compute_taps(torch.zeros(1, 3, 3), 2, 2), "grid"),
        (lambda: gs.compute_taps(torch.zeros(1, 3, 2), 0, 2), "height"),
        (lambda: gs.compute_taps(torch.zeros(1, 3, 2), 2, 2.5), "width"),
        (lambda: gs.compute_taps(torch.zeros(1, 3, 2), 2, 2, coords="uv"), "coords"),
        (lambda: gs.compute_taps(torch.zeros(1, 3, 2), 2, 2, mode="cubic"), "mode"),
        (lambda: gs.gather(torch.zeros(1, 1, 3, 3), gs.bilinear_taps(torch.zeros(1, 2, 2), 2, 2)),
         "features"),
        (lambda: gs.gather_points(torch.zeros(2, 1, 3, 3), torch.zeros(1, 2, 2)), "points"),
        (lambda: gs.scatter_add_points(torch.zeros(3, 2), torch.tensor([0, 1, 5]), 4),
         "cell_index"),
        (lambda: gs.scatter_add_points(torch.zeros(3, 2), torch.tensor([0.0, 1, 2]), 4),
         "cell_index"),
        (lambda: gs.scatter_add_points(torch.zeros(3, 2), torch.tensor([0, 1, 2]), -1),
         "num_cells"),
        (lambda: gs.scatter_add_points(torch.zeros(3, 2), torch.tensor([0, 1, 2]), 4,
                                       torch.ones(2)), "weights"),
    ],
)
def test_errors_name_the_field(call, field):
    with pytest.raises(ValueError, match=f"'{field}'"):
        call()


# ----------------------------------------------------------------------------- the gather's own backward
# With autograd, grid_sample records its gather as one node (engine._GridSampleGather) whose
# backward scatter-adds the input's gradient and computes the weights' gradient in one pass
# over blocks (dense, or only the gathered points of the sparse zeros path), on the worker
# threads.


def _grads(fn, x, g, mode, padding_mode, align_corners, grad_out=None, wrt=(True, True)):
    """(output, grad wrt input or None, grad wrt grid or None) of one backward."""
    xi = x.clone().requires_grad_(wrt[0])
    gi = g.clone().requires_grad_(wrt[1])
    out = fn(xi, gi, mode, padding_mode, align_corners)
    out.backward(torch.ones_like(out) if grad_out is None else grad_out)
    return out, xi.grad, gi.grad


def _force_path(mp, path, tile=4):
    """Transposition tiles of ``tile`` points (blocks are whole tiles); the sparse zeros
    path forced, or never taken."""
    mp.setattr(blocks, "TILE", tile)
    mp.setattr(transpose, "TILE", tile)
    mp.setattr(engine, "_SPARSE_MAX_FRACTION", 1.0 if path == "sparse" else -1.0)


def _linear_map_grad_input(x, g, mode, padding_mode, align_corners, grad_out):
    """Oracle of the input's gradient from F.grid_sample's *forward* only: the sampler is
    linear in the input, so the gradient is J^T grad_out with J read off one-hot images
    (points that give NaN contribute nothing). PyTorch's own backward cannot serve at
    NaN/inf grids: under border/reflection padding it reads outside the image there."""
    n, c, h, w = x.shape
    grad = torch.zeros(n, c, h * w, dtype=x.dtype)
    for j in range(h * w):
        one_hot = torch.zeros(n, 1, h * w, dtype=x.dtype)
        one_hot[:, :, j] = 1
        jac = F.grid_sample(one_hot.view(n, 1, h, w), g, mode, padding_mode, align_corners)
        grad[:, :, j] = (jac.nan_to_num(0.0, 0.0, 0.0) * grad_out).flatten(2).sum(2)
    return grad.view(n, c, h, w)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", ["sparse", "dense"])
def test_backward_of_both_zeros_paths_matches_pytorch(path, mode, align_corners, dtype, edge_grid):
    x = _features(3, 5, 4, 7, dtype)
    g = edge_grid(3, 4, 7, align_corners, dtype, nonfinite=False)[:, :-1, :-1].clamp(-50, 50)
    g[2, : g.shape[1] // 2] = g[2, : g.shape[1] // 2] * 0 + 5.0  # rows far outside: skipped
    grad_out = torch.randn(3, 5, *g.shape[1:3], dtype=dtype, generator=torch.Generator().manual_seed(2))
    expected = _grads(F.grid_sample, x, g, mode, "zeros", align_corners, grad_out)
    with pytest.MonkeyPatch.context() as mp:
        _force_path(mp, path)
        got = _grads(gs.grid_sample, x, g, mode, "zeros", align_corners, grad_out)
    # float32 input gradients sum many points (sums near 10): relative to their size
    tol = dict(rtol=0, atol=1e-10) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], expected[1], **tol)
    torch.testing.assert_close(got[2], expected[2], rtol=tol["rtol"], atol=10 * tol["atol"])


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", PADDING_MODES)
@pytest.mark.parametrize("mode", MODES)
def test_gather_is_one_autograd_node(mode, padding_mode, align_corners):
    x = _features(2, 3, 4, 5, torch.float64).requires_grad_()
    g = _smooth_grid(2, 3, 4, 4, 5, align_corners).requires_grad_()
    out = gs.grid_sample(x, g, mode, padding_mode, align_corners)
    names = set()
    todo = [out.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and type(node).__name__ not in names:
            names.add(type(node).__name__)
            todo += [nxt for nxt, _ in node.next_functions]
    assert "_GridSampleGatherBackward" in names
    assert "AddcmulBackward0" not in names  # the gather's multiply-adds are not recorded


@pytest.mark.parametrize("path", ["sparse", "dense"])
@pytest.mark.parametrize("mode", MODES)
def test_backward_on_worker_threads_matches_pytorch(path, mode, monkeypatch, edge_grid):
    # Two workers, 64-point blocks, one block per segment: each worker's own table gradient,
    # summed; whole-tile blocks and a partial last one.
    monkeypatch.setattr(blocks, "_PARALLEL_MIN_ELEMENTS", 0)
    monkeypatch.setattr(blocks, "_CHUNK_ELEMENTS", 1)
    monkeypatch.setattr(blocks, "_BLOCKS_PER_SEGMENT", 1)
    monkeypatch.setattr(threads, "worker_count", lambda: 2)
    x = _features(3, 4, 5, 6, torch.float64)
    g = edge_grid(3, 5, 6, False, torch.float64, nonfinite=False).clamp(-50, 50)
    assert g.shape[1] * g.shape[2] > 2 * 64
    g[1, :5] = 7.0
    _force_path(monkeypatch, path, tile=64)
    grad_out = torch.randn(3, 4, *g.shape[1:3], dtype=torch.float64)
    for padding_mode in (["zeros"] if path == "sparse" else PADDING_MODES):
        expected = _grads(F.grid_sample, x, g, mode, padding_mode, False, grad_out)
        got = _grads(gs.grid_sample, x, g, mode, padding_mode, False, grad_out)
        torch.testing.assert_close(got[1], expected[1], rtol=0, atol=1e-10)
        torch.testing.assert_close(got[2], expected[2], rtol=0, atol=1e-9)


@pytest.mark.parametrize("path", ["sparse", "dense"])
def test_backward_takes_any_output_gradient_layout(path, monkeypatch, edge_grid):
    # out.sum() hands back an expanded (stride 0) gradient; a transposed one is strided.
    x = _features(2, 3, 4, 6, torch.float32)
    g = edge_grid(2, 4, 6, False, torch.float32, nonfinite=False).clamp(-50, 50)
    _force_path(monkeypatch, path)
    h_out, w_out = g.shape[1:3]
    layouts = {
        "expanded": torch.full((1, 1, 1, 1), 0.5).expand(2, 3, h_out, w_out),
        "transposed": torch.randn(2, 3, w_out, h_out).transpose(2, 3),
        "channels_last": torch.randn(2, 3, h_out, w_out).contiguous(memory_format=torch.channels_last),
    }
    for name, grad_out in layouts.items():
        expected = _grads(F.grid_sample, x, g, "bilinear", "zeros", False, grad_out.contiguous())
        got = _grads(gs.grid_sample, x, g, "bilinear", "zeros", False, grad_out)
        torch.testing.assert_close(got[1], expected[1], rtol=0, atol=1e-5, msg=name)
        torch.testing.assert_close(got[2], expected[2], rtol=0, atol=1e-4, msg=name)


def test_backward_of_one_argument_at_a_time(edge_grid):
    x = _features(2, 3, 4, 5, torch.float64)
    g = edge_grid(2, 4, 5, True, torch.float64, nonfinite=False).clamp(-50, 50)
    for wrt in [(True, False), (False, True)]:
        for mode in MODES:
            expected = _grads(F.grid_sample, x, g, mode, "border", True, wrt=wrt)
            got = _grads(gs.grid_sample, x, g, mode, "border", True, wrt=wrt)
            for e, a in zip(expected[1:], got[1:]):
                assert (e is None) == (a is None)
                if e is not None:
                    torch.testing.assert_close(a, e, rtol=0, atol=1e-9)


def test_backward_with_a_channels_last_input(edge_grid):
    x = _features(2, 4, 5, 7, torch.float32).contiguous(memory_format=torch.channels_last)
    g = edge_grid(2, 5, 7, False, torch.float32, nonfinite=False).clamp(-50, 50).transpose(1, 2)
    for mode in MODES:
        expected = _grads(F.grid_sample, x, g, mode, "reflection", False)
        got = _grads(gs.grid_sample, x, g, mode, "reflection", False)
        torch.testing.assert_close(got[1], expected[1], rtol=1e-5, atol=1e-5)  # float32 sums
        torch.testing.assert_close(got[2], expected[2], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode,padding_mode", [(m, pad) for m in MODES for pad in PADDING_MODES
                                               if m != "bicubic" or pad == "zeros"])
def test_input_gradient_at_nan_and_inf_grid_points(mode, padding_mode, edge_grid):
    # NaN, +-inf and huge coordinates: the input's gradient is the sampler's transpose, the
    # same as the forward's (a NaN output point contributes nothing); the grid's gradient is
    # finite wherever the grid is. Not bicubic under border/reflection: there a NaN
    # coordinate has NaN cubic weights on taps the padding clips into the image, so the
    # true input gradient is NaN at those pixels (and PyTorch's backward crashes).
    x = _features(2, 3, 4, 5, torch.float64)
    g = edge_grid(2, 4, 5, False, torch.float64)
    grad_out = torch.randn(2, 3, *g.shape[1:3], dtype=torch.float64)
    for path in ("sparse", "dense"):
        with pytest.MonkeyPatch.context() as mp:
            _force_path(mp, path)
            out, grad_x, grad_g = _grads(gs.grid_sample, x, g, mode, padding_mode, False, grad_out)
        expected = _linear_map_grad_input(x, g, mode, padding_mode, False, grad_out)
        torch.testing.assert_close(grad_x, expected, rtol=0, atol=1e-10)
        finite = torch.isfinite(g).all(-1) & torch.isfinite(out).all(1)
        assert torch.isfinite(grad_g[finite]).all()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "n,h_out,w_out", [(0, 3, 4), (2, 0, 5), (2, 4, 0)], ids=["N=0", "H=0", "W=0"]
)
def test_backward_of_empty_batches(mode, n, h_out, w_out):
    x = _features(n, 3, 4, 5, torch.float64)
    g = torch.zeros(n, h_out, w_out, 2, dtype=torch.float64)
    expected = _grads(F.grid_sample, x, g, mode, "zeros", False)
    got = _grads(gs.grid_sample, x, g, mode, "zeros", False)
    for e, a in zip(expected, got):
        assert a.shape == e.shape and torch.equal(a, e)


@pytest.mark.parametrize("path", ["sparse", "dense"])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_gradcheck_through_the_gather_node(mode, path, monkeypatch):
    _force_path(monkeypatch, path, tile=2)
    x = _features(2, 2, 3, 4, torch.float64).requires_grad_()
    g = _smooth_grid(2, 2, 5, 3, 4, False).requires_grad_()
    with torch.no_grad():
        g[1, 0] += 6.0  # a far row: skipped points on the sparse path
    assert torch.autograd.gradcheck(lambda a, b: gs.grid_sample(a, b, mode, "zeros", False), (x, g))


@settings(max_examples=_examples(100), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=_sampling_case(max_size=5), mode=st.sampled_from(MODES), padding_mode=st.sampled_from(PADDING_MODES),
       tile=st.integers(1, 3), sparse=st.booleans(), seed=st.integers(0, 2**16))
def test_property_backward_matches_grid_sample(case, mode, padding_mode, tile, sparse, seed):
    # Random output gradients, blocks of 1-3-point tiles, either zeros path: both gradients
    # match F.grid_sample's (finite grids: PyTorch's backward is undefined at NaN/inf).
    x, g, align_corners = case
    x, g = x.double(), g.double().nan_to_num(0.5, 0.25, -0.25).clamp(-50, 50)
    grad_out = torch.randn(x.shape[0], x.shape[1], *g.shape[1:3], dtype=torch.float64,
                           generator=torch.Generator().manual_seed(seed))
    expected = _grads(F.grid_sample, x, g, mode, padding_mode, align_corners, grad_out)
    with pytest.MonkeyPatch.context() as mp:
        _force_path(mp, "sparse" if sparse else "dense", tile)
        got = _grads(gs.grid_sample, x, g, mode, padding_mode, align_corners, grad_out)
    torch.testing.assert_close(got[0], expected[0], rtol=0, atol=1e-10)
    torch.testing.assert_close(got[1], expected[1], rtol=0, atol=1e-10)
    torch.testing.assert_close(got[2], expected[2], rtol=0, atol=1e-9)
