"""What a bootstrap pins down of a camera's offset: its well-known *directions*, not just axes.

A camera's rotation offset is known well along some directions and poorly along others.
The poorly known directions are seldom the roll, pitch or yaw axis itself: a side camera
whose LiDAR edges crowd one side of the image slides along a valley of roll and pitch
together (its bootstrap spreads 1.5 deg on both axes and 0.1 deg across the valley), so
asking "which *axes* are known to 0.7 deg?" finds none there, although the offset across
the valley is known to a tenth of a degree. The principal directions of the bootstrap
replicates' spread say what is known; :func:`pinned_offset` then asks how small the
camera's offset can be given only what is known: the smallest turn
(:func:`~bevviz.rotations.offset_angle_deg`) that agrees with the offset's components along
the pinned directions (the unpinned part is free), which is the length of those components
(the directions are orthonormal). That is never more than the offset itself, and equals it
where every direction is pinned.

Convention:
    Offsets are body-frame (FLU) rotations (roll, pitch, yaw) in degrees, as
    :class:`~bevviz.calibration.lidar.evidence.CameraEvidence`. See docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bevviz.calibration.lidar.alignment import AXES
from bevviz.checks import check_shape
from bevviz.rotations import offset_angle_deg

__all__ = ["PinnedOffset", "direction_words", "pinned_offset"]

#: A direction within this cosine of an axis is named by the axis alone.
AXIS_COSINE = 0.95


@dataclass(frozen=True)
class PinnedOffset:
    """What the bootstrap pins down of an offset.

    Attributes:
        least_deg: Per replicate, the smallest turn (degrees) that agrees with its
            components along the pinned directions, (B,); zeros when none is pinned.
        directions: The pinned principal directions as columns, (3, K), K in 0..3, each a
            unit vector in (roll, pitch, yaw).
        spreads_deg: The bootstrap spread along each of them, (K,) degrees.
        free: The other principal directions as columns, (3, 3 - K).
        free_spreads_deg: The spread along each of those, (3 - K,) degrees.
    """

    least_deg: np.ndarray
    directions: np.ndarray
    spreads_deg: np.ndarray
    free: np.ndarray
    free_spreads_deg: np.ndarray

    def words(self) -> str:
        """What is pinned down, in words: the one direction, or all but the one free
        direction, with the spread, e.g. ``"all but 0.71 roll + 0.71 pitch (spread 2.1 deg)"``."""
        k = self.directions.shape[1]
        if k == 3:
            return f"all three axes, to {float(self.spreads_deg.max()):.2f} deg"
        if k == 2:
            return (f"all but {direction_words(self.free[:, 0])} (spread {float(self.free_spreads_deg[0]):.1f} "
                    f"deg), to {float(self.spreads_deg.max()):.2f} deg")
        if k == 1:
            return f"only {direction_words(self.directions[:, 0])}, to {float(self.spreads_deg[0]):.2f} deg"
        return "no direction"


def pinned_offset(replicates_deg: np.ndarray, max_sd_deg: float) -> PinnedOffset:
    """The offset as far as the bootstrap pins it down (see the module docstring).

    Args:
        replicates_deg: Bootstrap replicates of a camera's offset, (B, 3) degrees.
        max_sd_deg: Largest spread (degrees) of a principal direction that counts as pinned.

    Returns:
        :class:`PinnedOffset`. With fewer than two replicates nothing is pinned.

    Convention:
        (roll, pitch, yaw) body-frame degrees; ``least_deg`` is a turn's angle as
        :func:`~bevviz.rotations.offset_angle_deg` (the tolerance the caller compares it with).
    """
    res = np.asarray(replicates_deg, dtype=np.float64)
    check_shape(res, (None, 3), "replicates_deg")
    if len(res) < 2 or not np.all(np.isfinite(res)):
        return PinnedOffset(np.zeros(len(res)), np.zeros((3, 0)), np.zeros(0), np.eye(3), np.full(3, np.inf))
    var, vecs = np.linalg.eigh(np.cov(res.T))
    sd = np.sqrt(np.maximum(var, 0.0))
    pin = sd <= max_sd_deg
    k = int(pin.sum())
    P = vecs[:, pin]
    order = np.argsort(np.argmax(np.abs(P), axis=0), kind="stable")  # roll-most first
    P, spreads = P[:, order], sd[pin][order]
    free, free_sd = vecs[:, ~pin], sd[~pin]
    if k == 0:
        return PinnedOffset(np.zeros(len(res)), P, spreads, free, free_sd)
    comp = res @ P  # (B, K): the components along the pinned directions
    # the smallest turn with those components: the free part set to zero
    return PinnedOffset(offset_angle_deg(comp @ P.T), P, spreads, free, free_sd)


def direction_words(u: np.ndarray) -> str:
    """A unit direction in (roll, pitch, yaw) in words: ``"yaw"``, or ``"0.71 roll - 0.70 pitch"``.

    Args:
        u: The direction, (3,).
    """
    u = np.asarray(u, dtype=np.float64)
    check_shape(u, (3,), "direction")
    u = u if u[int(np.argmax(np.abs(u)))] > 0 else -u
    top = int(np.argmax(np.abs(u)))
    if abs(u[top]) >= AXIS_COSINE:
        return AXES[top]
    terms = [(c, a) for c, a in zip(u, AXES) if abs(c) >= 0.05]
    text = f"{terms[0][0]:.2f} {terms[0][1]}"
    for c, a in terms[1:]:
        text += f" {'+' if c >= 0 else '-'} {abs(c):.2f} {a}"
    return text
