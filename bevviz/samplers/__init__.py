"""Samplers: ways of reading per-camera features at projected BEV points, and their registry.

- :mod:`~bevviz.samplers.reference`: the ``F.grid_sample`` oracle and the pixel <->
  normalised helpers;
- :mod:`~bevviz.samplers.gather_scatter`: ``grid_sample`` rebuilt from index gathers and
  scatter-adds (drop-in, NPU-friendly);
- :mod:`~bevviz.samplers.deformable`: deformable-conv-style K-tap sampling (floor and
  bilinear rounding);
- :mod:`~bevviz.samplers.lut`: a precomputed lookup table (one sparse product per frame).

The registry below is the one list of samplers: :func:`bevviz.pipeline.bev_features` and
the exporter accept :data:`SAMPLERS`; the pages show and the bench times
:data:`BEV_VARIANTS`. This module imports no sampler, so reading it is cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BEV_VARIANTS", "REFERENCE", "SAMPLERS", "SamplerVariant"]

#: Every sampler :func:`bevviz.pipeline.bev_features` runs and the exporter exports.
SAMPLERS = ("grid_sample", "gather_scatter", "deformable", "lut")


@dataclass(frozen=True)
class SamplerVariant:
    """One way of sampling BEV features, as the pages show it and the bench times it.

    Attributes:
        key: The bench's name for it.
        label: The pages' name for it.
        sampler: One of :data:`SAMPLERS`.
        rounding: For ``"deformable"``: ``"bilinear"`` or ``"floor"``; else None.
        table: Whether it samples through a prebuilt lookup table (``lut``).
    """

    key: str
    label: str
    sampler: str
    rounding: str | None = None
    table: bool = False

    def options(self, kernel_size: int = 1, lut: object = None) -> dict:
        """The keyword arguments :func:`bevviz.pipeline.bev_features` takes for this variant
        besides ``sampler``.

        Args:
            kernel_size: Taps per side of the deformable variants.
            lut: A prebuilt :class:`bevviz.samplers.lut.BEVLookupTable` for a table variant
                (None: the pipeline builds and caches one).

        Returns:
            ``{"deformable": {...}}``, ``{"lut": table}`` or ``{}``.
        """
        if self.rounding is not None:
            return {"deformable": {"kernel_size": kernel_size, "rounding": self.rounding}}
        if self.table and lut is not None:
            return {"lut": lut}
        return {}


#: The BEV feature variants compared side by side, the reference first.
BEV_VARIANTS = (
    SamplerVariant("reference", "GridSample (reference)", "grid_sample"),
    SamplerVariant("gather_scatter", "gather-scatter", "gather_scatter"),
    SamplerVariant("deformable_bilinear", "deformable (bilinear)", "deformable", "bilinear"),
    SamplerVariant("deformable_floor", "deformable (floor)", "deformable", "floor"),
    SamplerVariant("lut_pipeline", "LUT", "lut", table=True),
)
#: The variant every other one is compared with.
REFERENCE = BEV_VARIANTS[0]
