"""Frames that disagree: which frame of a drive the LiDAR evidence of the others contradicts.

Several frames of one rig are pooled (:class:`~bevviz.calibration.lidar.alignment.EdgeAlignment`
over all of them) because one frame is often too little evidence. A frame whose scan or
images do not belong with the others (a sweep taken while the car turned fast and out of
sync, a scan turned in its sensor's frame, another frame's images) is then not more evidence
but bias: it pulls the pooled optimum toward its own. This module finds such a frame so the
doctor can set it aside *with a reason* instead of averaging it in.

Per camera and frame ``k`` (:func:`frame_gaps`): the frame's own optimum (a search on its
edge points alone) against the optimum of all the other frames together (leave one out),
scored on frame ``k`` and counted in robust z of frame ``k``'s own score landscape. A frame
*disagrees* for that camera when the two optima lie more than ``SET_ASIDE_DEG`` apart and the
frame's own beats the others' by ``SET_ASIDE_GAP_Z`` or more: the others' answer does not
fit it. One frame alone is often multimodal (its own optimum jumps), so a single camera
decides nothing: a frame is set aside for the whole rig (:func:`frames_to_set_aside`) when
it disagrees for at least half of the cameras with enough edge points and for more cameras
than any other frame, and only with at least ``MIN_FRAMES`` frames (with two, which one is
wrong cannot be told).

What the rules measured (``python scripts/measure_frame_agreement.py``, docs/calibration.md,
"Frames that disagree"): on the clean TRI drive no camera's frame disagrees (the largest
gap 1.1 z); with its second sweep turned 1 or 2 deg about the vertical that frame disagrees
for 4 and 5 of the 6 cameras (the others for at most 3).

Convention:
    Offsets and optima are body-frame (FLU) hypotheses ``(roll, pitch, yaw)`` in degrees as
    in :mod:`~bevviz.calibration.lidar.alignment`; frames are numbered from 0 in the order
    given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bevviz.calibration.lidar.alignment import MIN_VERDICT_POINTS, EdgeAlignment

__all__ = ["MIN_FRAMES", "SET_ASIDE_DEG", "SET_ASIDE_GAP_Z", "FrameAgreement", "frame_gaps", "frames_to_set_aside"]

#: Fewest frames among which one may be set aside.
MIN_FRAMES = 3
#: Least distance (degrees, largest axis) between a frame's own optimum and the other
#: frames' for it to disagree: the clean TRI drive's single frames jump up to 3.7 deg in
#: flat landscapes, so the distance alone says little; with the gap below it decides.
SET_ASIDE_DEG = 1.0
#: Least gain (robust z of the frame's own landscape, finest scale) of the frame's own
#: optimum over the other frames' on its own points: clean TRI frames at most 1.08 where
#: the optima lie 1 deg or more apart; a sweep turned 1-2 deg 1.5-3.5 for most cameras.
SET_ASIDE_GAP_Z = 1.5


@dataclass(frozen=True)
class FrameAgreement:
    """Which frames of a pooled set the rig's cameras find at odds with the others.

    Attributes:
        set_aside: Frame indices to leave out (at most one), ascending.
        votes: Per frame, the cameras for which it disagrees, (F,).
        voters: Cameras with enough edge points in every frame to vote.
        reason: Why the frame is set aside ("" when none is).
    """

    set_aside: tuple[int, ...] = ()
    votes: tuple[int, ...] = ()
    voters: int = 0
    reason: str = ""


def frame_gaps(al: EdgeAlignment) -> tuple[np.ndarray, np.ndarray]:
    """Per frame of one camera's alignment, how far its own optimum lies from the other
    frames' and how much better it fits the frame.

    Args:
        al: The camera's alignment over F >= 2 frames.

    Returns:
        ``(distance_deg (F,), gap_z (F,))``: the largest axis difference between frame
        ``k``'s own optimum and the leave-``k``-out optimum, and the score gain of the former
        over the latter on frame ``k``'s points (finest scale) in robust z of frame ``k``'s
        coarse landscape; NaN for a frame without edge points.
    """
    n_frames = len(al.scales)
    dist, gap = np.full(n_frames, np.nan), np.full(n_frames, np.nan)
    counts = np.bincount(al.frame, minlength=n_frames)
    for k in range(n_frames):
        others = [j for j in range(n_frames) if j != k and counts[j]]
        if not counts[k] or not others:
            continue
        own_al = al.only([k])
        found, landscape, _ = own_al.search()
        own = found[0][0]
        theirs = al.only(others).search()[0][0][0]
        spread = 1.4826 * float(np.median(np.abs(landscape - np.median(landscape))))
        last = own_al.levels - 1
        dist[k] = float(np.max(np.abs(own - theirs)))
        gap[k] = (own_al.score(own, last) - own_al.score(theirs, last)) / max(spread, 1e-9)
    return dist, gap


def frames_to_set_aside(alignments: Mapping[str, EdgeAlignment],
                        numbers: Sequence[int] | None = None, given: int | None = None) -> FrameAgreement:
    """The frame (if any) the rig's cameras find at odds with the others (module docstring).

    Args:
        alignments: Camera name -> its alignment over the same F frames.
        numbers: The F frames' numbers (from 1) among the frames the user gave, for the
            reason and :attr:`FrameAgreement.set_aside` (default 1..F): the frames aligned
            may be fewer than those given (:mod:`~bevviz.calibration.lidar.repeats`).
        given: How many frames the user gave (default F).

    Returns:
        :class:`FrameAgreement`; nothing set aside with fewer than ``MIN_FRAMES`` frames or
        fewer than two voting cameras.
    """
    n_frames = max((len(al.scales) for al in alignments.values()), default=0)
    votes = np.zeros(n_frames, dtype=np.int64)
    voters = 0
    if n_frames < MIN_FRAMES:
        return FrameAgreement(votes=tuple(int(v) for v in votes))
    per_frame_needed = MIN_VERDICT_POINTS / n_frames
    for al in alignments.values():
        counts = np.bincount(al.frame, minlength=n_frames)
        if len(al.scales) != n_frames or counts.min() < per_frame_needed:
            continue
        voters += 1
        dist, gap = frame_gaps(al)
        votes += (dist > SET_ASIDE_DEG) & (gap >= SET_ASIDE_GAP_Z)
    ranked = np.argsort(-votes, kind="stable")
    top = int(ranked[0])
    runner_up = int(votes[ranked[1]])
    if voters < 2 or 2 * votes[top] < voters or votes[top] <= runner_up:
        return FrameAgreement(votes=tuple(int(v) for v in votes), voters=voters)
    number = top + 1 if numbers is None else int(numbers[top])
    reason = (f"frame {number} of {n_frames if given is None else given} set aside: for {votes[top]} of {voters} "
              "cameras its own optimum lies "
              f"more than {SET_ASIDE_DEG:g} deg from the other frames' and fits it by {SET_ASIDE_GAP_Z:g} robust z "
              "or more (its scan or images do not belong with the others: a fast turn with an unsynchronised "
              "sweep, another frame's images)")
    return FrameAgreement((number - 1,), tuple(int(v) for v in votes), voters, reason)
