"""The exportable form of each sampler: an ``nn.Module`` plus example inputs from the rig.

Every sampler is wrapped so its graph inputs are plain tensors:

======================  ==============================================  =====================
sampler                 inputs                                          output
======================  ==============================================  =====================
``grid_sample``         features (N, C, H_f, W_f), grid (N, Z*H_bev,    (N, C, Z*H_bev, W_bev)
                        W_bev, 2)
``gather_scatter``      the same (the drop-in ``grid_sample``)          (N, C, Z*H_bev, W_bev)
``deformable``          features, grid, offsets (N, Z*H_bev, W_bev,     (N, C, Z*H_bev, W_bev)
                        K, 2); floor rounding (the NPU form)
``lut``                 features (N, C, H_f, W_f); the table (indices,  (C, H_bev, W_bev)
                        weights) is stored in the model
======================  ==============================================  =====================

The grid is the rig's projection of the BEV grid's points (:func:`bevviz.aggregation.bev_geometry`),
normalised for the chosen ``align_corners`` with
:func:`bevviz.samplers.reference.pixel_to_normalized`; the features are the caller's
(e.g. the app's current feature maps) or seeded N(0, 1) of the requested size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from bevviz.aggregation import bev_geometry
from bevviz.bev_grid import BEVGrid
from bevviz.camera import Rig
from bevviz.checks import check_choice, check_shape, field_error, positive_int
from bevviz.errors import InputError
from bevviz.samplers import SAMPLERS, gather_scatter, reference
from bevviz.samplers import lut as lut_mod
from bevviz.samplers.deformable import deformable_sample
from bevviz.samplers.reference import MODES, PADDING_MODES, pixel_to_normalized

EXPORTERS = ("dynamo", "torchscript")
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16}
#: Smallest opset the exporters are asked for (GridSample needs 16; lower ones are still
#: accepted so the failure can be shown).
MIN_OPSET, MAX_OPSET = 9, 23


@dataclass(frozen=True)
class ExportOptions:
    """How to export a sampler (every setting but which sampler; see :class:`ExportSettings`).

    Attributes:
        mode: Interpolation for grid_sample / gather_scatter: bilinear, nearest, bicubic.
            The deformable floor variant gathers one pixel per tap and the lookup table
            bakes bilinear weights; for them only ``"bilinear"`` is accepted.
        padding_mode: zeros, border or reflection (grid_sample / gather_scatter); the
            deformable and lookup-table samplers pad with zeros only.
        align_corners: Normalisation of the grid (grid_sample / gather_scatter); the others
            follow the pipeline's ``align_corners=False``.
        channels: Feature channels C (ignored when features are given).
        feature_size: Feature map (H_f, W_f) (ignored when features are given).
        dtype: Feature dtype name: float32 (default), float64 or float16.
        opset: Requested ONNX opset.
        exporter: ``"dynamo"`` (torch.export based, torch 2.13's default) or
            ``"torchscript"`` (legacy tracer, deprecated).
        dynamic: Ask for dynamic batch and feature H/W axes where the sampler allows it.
        keep_int32: dynamo only: translate ``index_select`` / ``index_add`` with bevviz's
            int32-keeping translations (see :mod:`bevviz.export.exporter`).
        kernel_size: Deformable taps per side (K = k * k).
        offset_scale: Std of the deformable sampler's seeded random offsets (feature px).
        seed: Seed of random features and offsets.
    """

    mode: str = "bilinear"
    padding_mode: str = "zeros"
    align_corners: bool = False
    channels: int = 8
    feature_size: tuple[int, int] = (18, 32)
    dtype: str = "float32"
    opset: int = 18
    exporter: str = "dynamo"
    dynamic: bool = True
    keep_int32: bool = True
    kernel_size: int = 3
    offset_scale: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice(self.mode, MODES, "mode")
        check_choice(self.padding_mode, PADDING_MODES, "padding_mode")
        if not isinstance(self.align_corners, bool):
            raise field_error("align_corners", self.align_corners, "must be a bool")
        positive_int(self.channels, "channels")
        if len(tuple(self.feature_size)) != 2:
            raise field_error("feature_size", self.feature_size, "must be (H_f, W_f)")
        for v in self.feature_size:
            positive_int(v, "feature_size")
        object.__setattr__(self, "feature_size", tuple(int(v) for v in self.feature_size))
        check_choice(self.dtype, DTYPES, "dtype")
        if isinstance(self.opset, bool) or not isinstance(self.opset, int) or not MIN_OPSET <= self.opset <= MAX_OPSET:
            raise field_error("opset", self.opset, f"must be an int in [{MIN_OPSET}, {MAX_OPSET}]")
        check_choice(self.exporter, EXPORTERS, "exporter")
        positive_int(self.kernel_size, "kernel_size")
        if not (float(self.offset_scale) >= 0):
            raise field_error("offset_scale", self.offset_scale, "must be >= 0")


@dataclass(frozen=True)
class ExportSettings(ExportOptions):
    """What to export and how: the sampler and its :class:`ExportOptions` (build it by keyword).

    Attributes:
        sampler: ``"grid_sample"`` (reference), ``"gather_scatter"``, ``"deformable"``
            (floor rounding) or ``"lut"``.
    """

    sampler: str = "gather_scatter"

    def __post_init__(self) -> None:
        check_choice(self.sampler, SAMPLERS, "sampler")
        super().__post_init__()
        if self.sampler in ("deformable", "lut"):
            if self.mode != "bilinear":
                raise field_error("mode", self.mode, f"the {self.sampler} sampler supports 'bilinear' only")
            if self.padding_mode != "zeros":
                raise field_error("padding_mode", self.padding_mode,
                                  f"the {self.sampler} sampler pads with 'zeros' only")
            if self.align_corners:
                raise field_error("align_corners", self.align_corners,
                                  f"the {self.sampler} sampler uses the pipeline's align_corners=False")

    @property
    def torch_dtype(self) -> torch.dtype:
        """The torch dtype of :attr:`dtype`."""
        return DTYPES[self.dtype]

    def facts(self) -> dict[str, Any]:
        """The settings as rule facts (see :data:`bevviz.export.rules.FIELDS`)."""
        return {
            "sampler": self.sampler, "mode": self.mode, "padding_mode": self.padding_mode,
            "align_corners": self.align_corners, "channels": int(self.channels), "dtype": self.dtype,
            "opset": int(self.opset), "exporter": self.exporter,
            "feature_height": self.feature_size[0], "feature_width": self.feature_size[1],
        }


@dataclass
class ExportSpec:
    """A module ready for ``torch.onnx.export``.

    Attributes:
        module: The wrapped sampler (eval mode).
        inputs: Example inputs, in ``input_names`` order.
        input_names: Graph input names.
        output_names: Graph output names.
        dynamic: Input name -> {axis: symbol} to request as dynamic.
        notes: What the wrapper fixes or ignores, in words.
    """

    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic: dict[str, dict[int, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class ReferenceSampler(torch.nn.Module):
    """``F.grid_sample`` through :func:`bevviz.samplers.reference.grid_sample`."""

    def __init__(self, mode: str, padding_mode: str, align_corners: bool) -> None:
        super().__init__()
        self.mode, self.padding_mode, self.align_corners = mode, padding_mode, align_corners

    def forward(self, features: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        """features (N, C, H_f, W_f), grid (N, H_out, W_out, 2) -> (N, C, H_out, W_out)."""
        return reference.grid_sample(features, grid, self.mode, self.padding_mode, self.align_corners)


class GatherScatterSampler(ReferenceSampler):
    """The drop-in :func:`bevviz.samplers.gather_scatter.grid_sample` (no GridSample)."""

    def forward(self, features: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        """features (N, C, H_f, W_f), grid (N, H_out, W_out, 2) -> (N, C, H_out, W_out)."""
        return gather_scatter.grid_sample(features, grid, self.mode, self.padding_mode, self.align_corners)


class DeformableFloorSampler(torch.nn.Module):
    """:func:`bevviz.samplers.deformable.deformable_sample` with ``rounding="floor"``."""

    def __init__(self, kernel_size: int) -> None:
        super().__init__()
        self.kernel_size = int(kernel_size)

    def forward(self, features: torch.Tensor, grid: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """features (N, C, H_f, W_f), grid (N, *P, 2), offsets (N, *P, K, 2) -> (N, C, *P)."""
        return deformable_sample(features, grid, offsets, None, self.kernel_size, 1.0, rounding="floor")


class LookupTableSampler(torch.nn.Module):
    """A prebuilt BEV lookup table applied to features: (N, C, H_f, W_f) -> (C, H_bev, W_bev)."""

    def __init__(self, table: Any) -> None:
        super().__init__()
        self.table = table

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """features (N_cam, C, H_f, W_f) -> BEV features (C, H_bev, W_bev).

        Uses the table's ``"gather"`` method (ELL indices + weights, one weighted row
        gather): the NPU form. The default ``"sparse"`` method (``torch.sparse.mm``) has no
        ONNX export.
        """
        return self.table.apply(features, method="gather")


def default_bev_grid() -> BEVGrid:
    """A small BEV grid for export: 32 x 32 cells of 3.2 m over +-51.2 m, 2 pillar points."""
    return BEVGrid((-51.2, 51.2), (-51.2, 51.2), (-1.0, 1.0), 3.2)


def coarsen_grid(grid: BEVGrid, factor: int, z_values: tuple[float, ...] | None = None) -> BEVGrid:
    """The same BEV extent with ``factor`` times larger cells (to keep an export small).

    Args:
        grid: The app's BEV grid.
        factor: Cell size multiplier (1 keeps the grid).
        z_values: Pillar heights to use instead of the grid's.

    Returns:
        A BEVGrid of (H_bev / factor) x (W_bev / factor) cells.

    Raises:
        InputError: naming ``factor`` when the extent is not a whole number of larger cells.
    """
    f = positive_int(factor, "factor")
    try:
        return BEVGrid(grid.x_range, grid.y_range, grid.z_values if z_values is None else tuple(z_values),
                       grid.resolution * f)
    except InputError as exc:
        raise field_error("factor", f, f"the grid extent is not a whole number of {f}x cells ({exc})") from None


def coarsen_factors(grid: BEVGrid, max_cells: int = 400) -> tuple[list[int], int]:
    """Cell-size factors that tile the grid's extent exactly, and a default for export.

    Args:
        grid: The app's BEV grid (H_bev x W_bev cells).
        max_cells: The default is the smallest factor giving at most this many cells.

    Returns:
        (factors, default): every f dividing both H_bev and W_bev (ascending), and the
        default factor (the largest one when none is small enough).
    """
    H, W = grid.shape
    factors = [f for f in range(1, min(H, W) + 1) if H % f == 0 and W % f == 0]
    small = [f for f in factors if (H // f) * (W // f) <= max_cells]
    return factors, (small[0] if small else factors[-1])


def sampling_grid(rig: Rig, bev_grid: BEVGrid, align_corners: bool = False,
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The rig's sampling grid for the BEV points, as ``grid_sample`` reads it.

    Args:
        rig: The rig (N_cam cameras).
        bev_grid: The BEV grid (Z points per pillar, H_bev x W_bev cells).
        align_corners: Normalisation to use.
        dtype: Output dtype.

    Returns:
        Normalised (x, y), shape (N_cam, Z * H_bev, W_bev, 2).

    Convention:
        Pixels from :func:`bevviz.aggregation.bev_geometry` (calibrated image size), normalised
        per camera by :func:`bevviz.samplers.reference.pixel_to_normalized`.
    """
    geom = bev_geometry(rig, bev_grid)
    n, z, h, w, _ = geom.uv.shape
    per_cam = [pixel_to_normalized(geom.uv[i], tuple(int(s) for s in geom.image_size[i]), align_corners)
               for i in range(n)]
    return torch.stack(per_cam).reshape(n, z * h, w, 2).to(dtype).contiguous()


def example_features(settings: ExportSettings, n_cam: int) -> torch.Tensor:
    """Seeded N(0, 1) features, shape (n_cam, C, H_f, W_f), ``settings.dtype``."""
    gen = torch.Generator().manual_seed(int(settings.seed))
    H, W = settings.feature_size
    x = torch.randn(n_cam, int(settings.channels), H, W, generator=gen, dtype=torch.float64)
    return x.to(settings.torch_dtype)


def build_spec(settings: ExportSettings, rig: Rig, bev_grid: BEVGrid,
               features: torch.Tensor | None = None) -> ExportSpec:
    """Wrap ``settings.sampler`` for export with inputs from the rig, grid and features.

    Args:
        settings: Sampler and export settings.
        rig: The rig (N_cam cameras).
        bev_grid: The BEV grid.
        features: Feature maps, shape (N_cam, C, H_f, W_f), or None for seeded random ones
            of ``settings.channels`` x ``settings.feature_size``.

    Returns:
        An :class:`ExportSpec`.

    Raises:
        ValueError: naming the field (features shape / dtype, settings) that is wrong.
    """
    n_cam = len(rig)
    if features is None:
        features = example_features(settings, n_cam)
    else:
        if not isinstance(features, torch.Tensor):
            raise field_error("features", type(features).__name__, "must be a torch.Tensor (N_cam, C, H_f, W_f)")
        check_shape(features, (n_cam, None, None, None), "features")
        features = features.detach().to(settings.torch_dtype).contiguous()
    dyn_feat = {0: "N", 2: "H_f", 3: "W_f"} if settings.dynamic else {}
    s = settings
    if s.sampler in ("grid_sample", "gather_scatter"):
        cls = ReferenceSampler if s.sampler == "grid_sample" else GatherScatterSampler
        grid = sampling_grid(rig, bev_grid, s.align_corners, features.dtype)
        dyn = {"features": dyn_feat, "grid": {0: "N", 1: "H_out", 2: "W_out"}} if s.dynamic else {}
        return ExportSpec(cls(s.mode, s.padding_mode, s.align_corners).eval(), (features, grid),
                          ("features", "grid"), ("sampled",), dyn)
    if s.sampler == "deformable":
        grid = sampling_grid(rig, bev_grid, False, features.dtype)
        K = int(s.kernel_size) ** 2
        gen = torch.Generator().manual_seed(int(s.seed) + 1)
        offsets = (torch.randn(*grid.shape[:3], K, 2, generator=gen, dtype=torch.float64)
                   * float(s.offset_scale)).to(features.dtype)
        dyn = {"features": dyn_feat, "grid": {0: "N", 1: "H_out", 2: "W_out"},
               "offsets": {0: "N", 1: "H_out", 2: "W_out"}} if s.dynamic else {}
        return ExportSpec(DeformableFloorSampler(s.kernel_size).eval(), (features, grid, offsets),
                          ("features", "grid", "offsets"), ("sampled",), dyn,
                          notes=["deformable: floor rounding (align_corners=True index formula, one "
                                 "pixel per tap), mean over K taps, seeded random offsets as a graph input"])
    # lookup table: geometry baked in for this rig, grid and feature size
    H_f, W_f = features.shape[2], features.shape[3]
    table = lut_mod.build_lut(rig, bev_grid, (H_f, W_f), dtype=features.dtype, method="gather")
    idx, _ = table.ell  # build the ELL layout now (stored in the graph as initializers)
    dyn = {"features": {1: "C"}} if s.dynamic else {}
    return ExportSpec(LookupTableSampler(table).eval(), (features,), ("features",), ("bev",), dyn,
                      notes=[f"lut: ELL table {tuple(idx.shape)} ({str(idx.dtype).replace('torch.', '')} indices) "
                             "built for this rig, BEV grid and feature size; only C may vary"])
