"""The Calibration Doctor as a use case: one :class:`Doctor` per scene, each piece of evidence computed once.

A :class:`Doctor` holds a :class:`~bevviz.session.scene.Scene` (rig, images, LiDAR scan,
the calibration as stored) and answers every question the app's pages, ``bevviz check``
and the audit ask of it, with one typed method each:

* :meth:`Doctor.conventions`: the storage conventions ranked against the declared one;
* :meth:`Doctor.sanity`: the projection sanity of every camera;
* :meth:`Doctor.diagnose`: which camera is off (the LiDAR witness with a scan, the seams
  always), a :class:`bevviz.calibration.Diagnosis`;
* :meth:`Doctor.quick`: the seams' fast ranking only (live views); :meth:`Doctor.seams` the
  seam analysis behind it, :meth:`Doctor.versus_truth` the cameras against a known ground
  texture, :meth:`Doctor.thorough` each suspect rotated alone over every frame;
* :meth:`Doctor.perturbed`: the doctor of the same scene with cameras moved (what-if views);
  it shares the LiDAR evidence of every camera it did not move;
* :meth:`Doctor.refine`: one camera refined, reusing the diagnosis's LiDAR evidence;
  :meth:`Doctor.refine_seams` against its seams alone (over every frame);
* :meth:`Doctor.seam_offset`: a flagged camera's offset estimated from its seams;
* :meth:`Doctor.gross`: the gross-error screen (a camera turned, images swapped, a LiDAR
  metres off), run before the doctor's fine search; :meth:`Doctor.fixed_rig` the rig it
  corrects;
* :meth:`Doctor.check`: all of it as a :class:`~bevviz.session.report.CheckReport`.

Each result is computed on first use and kept: the LiDAR evidence of a scan and camera
is aligned once (by the diagnosis) and handed to :meth:`Doctor.refine`. The doctor calls
the public functions of :mod:`bevviz.calibration` only. Streamlit-free: the app caches one
doctor per scene (:mod:`appkit.session`), the command line makes one per check; both read
the same numbers off it.

Convention:
    Offsets are body-frame (FLU) degrees, the stored camera turned by this much away from
    where the evidence puts it. See docs/conventions.md.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence

import numpy as np

from bevviz.bev_grid import BEVGrid
from bevviz.calibration import (
    AXES,
    DEFAULT_LEVELS,
    FAST_LEVELS,
    INCONCLUSIVE,
    MISCALIBRATED,
    CameraEvidence,
    CameraFinding,
    DiagnoseSettings,
    Diagnosis,
    RefineHistory,
    RefineSettings,
    against_texture,
    agreement_of,
    analyze_seams,
    apply_perturbations,
    as_lidar_frames,
    camera_delta,
    diagnose,
    ignore_masks,
    lidar_evidence,
    rank_seams,
    refine_camera,
    refine_extrinsics,
    rotate_suspects,
    seam_grid,
    standout,
)
from bevviz.calibration.gross import LIDAR_SENSOR, GrossScreen, screen_gross_errors
from bevviz.camera import Rig
from bevviz.conventions import NUSCENES, Convention, ConventionScore, RawCamera, rank_conventions
from bevviz.errors import InputError
from bevviz.lidar import LidarScan, ground_height
from bevviz.session.ground import cameras_grounded, ground_note, shift_of
from bevviz.session.refinement import Refinement, SeamView, refinement_overlays
from bevviz.session.report import (
    CameraCheck,
    CameraSanity,
    CheckReport,
    CheckSettings,
    ConventionCheck,
    SensorFault,
    projection_sanity,
)
from bevviz.session.scene import Scene

__all__ = ["Doctor", "Refinement", "SeamView", "check_rig"]

#: Progress callback: ``(done, total, camera)``.
Progress = Callable[[int, int, str], None]


class Doctor:
    """The calibration questions of one scene, each answered once.

    Args:
        scene: The scene (rig, images, LiDAR, stored calibration).
        settings: What the checks run (:class:`~bevviz.session.report.CheckSettings`);
            ``settings.lidar`` False leaves the scan out of every witness.
        grid: Ground grid of the seams; default the library's (:func:`bevviz.calibration.seam_grid`).

    Attributes:
        scene: The scene.
        settings: The settings.
        grid: The seam grid (None: the library's default).
        frames: Other frames of the same rig (camera name -> image each, this scene's
            included) for :meth:`thorough` and :meth:`refine_seams`: seams hidden by objects
            in one frame may be clear in another. Default: the scene's images alone.
        evidence_store: Where LiDAR evidence is kept, per camera (its fingerprint) and
            bootstrap size; share one between doctors of the same images and scan
            (:meth:`perturbed` does) and each camera is aligned once.
        loaded: The rig as loaded, before any perturbation (default the scene's).
    """

    def __init__(self, scene: Scene, settings: CheckSettings | None = None, grid: BEVGrid | None = None,
                 frames: Sequence[Mapping[str, np.ndarray]] | None = None,
                 evidence_store: MutableMapping | None = None, loaded: Rig | None = None):
        self.scene = scene
        self.settings = CheckSettings() if settings is None else settings
        self.grid = grid
        more = [f.images for f in scene.complete_frames]
        self.frames = tuple(frames) if frames else ((scene.images, *more) if more else ())
        self.loaded = scene.rig if loaded is None else loaded
        self._store: MutableMapping = {} if evidence_store is None else evidence_store
        self._seams: SeamView | None = None
        self._truth: Diagnosis | None = None
        self._thorough: Diagnosis | None = None
        self._refined: dict[tuple, Refinement] = {}
        self._ranking: list[ConventionScore] | None = None
        self._sanity: dict[str, CameraSanity] | None = None
        self._ground: tuple[float | None] | None = None
        self._diagnosis: Diagnosis | None = None
        self._quick: Diagnosis | None = None
        self._offsets: dict[str, tuple[dict[str, float] | None, bool]] = {}
        self._gross: tuple[GrossScreen | None] | None = None

    # ----------------------------------------------------------------------------------
    # What the scene gives
    # ----------------------------------------------------------------------------------

    @property
    def rig(self) -> Rig:
        """The scene's rig."""
        return self.scene.rig

    @property
    def lidar(self) -> LidarScan | None:
        """The scan the witnesses use: the scene's, unless ``settings.lidar`` is off."""
        return self.scene.lidar if self.settings.lidar else None

    def _require_images(self) -> Mapping[str, np.ndarray]:
        self.scene.require_images("images")
        return self.scene.images

    def _witness_frames(self) -> tuple[Mapping[str, np.ndarray] | list, LidarScan | list | None]:
        """``(images, lidar)`` of every frame the witnesses add up: the scene's alone, or with
        its other frames (:attr:`Scene.more_frames`) that have every image and, with a scan,
        a scan of their own (without one: image sets of a JSON rig, which the seams average
        over)."""
        images = self._require_images()
        if self.lidar is None:
            seams = [f.images for f in self.scene.complete_frames if f.lidar is None]
            return ([images, *seams] if seams else images), None
        extra = [f for f in self.scene.complete_frames if f.lidar is not None]
        if not extra:
            return images, self.lidar
        return [images, *[f.images for f in extra]], [self.lidar, *[f.lidar for f in extra]]

    @property
    def n_frames(self) -> int:
        """How many frames the witnesses add up: the LiDAR's, or without a scan the seams'
        (1 without other frames)."""
        if not self.scene.has_all_images:
            return 1
        images, lidar = self._witness_frames()
        return len(images) if isinstance(images, list) else 1

    def _key(self, name: str) -> tuple:
        return (self.rig[name].fingerprint, self.settings.replicates, self.n_frames)

    # ----------------------------------------------------------------------------------
    # Conventions and sanity
    # ----------------------------------------------------------------------------------

    def ranking(self) -> list[ConventionScore]:
        """Every storage convention scored on the stored calibration, best first; with the
        images (seam consistency) when every camera has one."""
        if self._ranking is None:
            images = self.scene.images if self.scene.has_all_images else None
            self._ranking = rank_conventions(self.scene.stored, images or None, ground_z=self._ground_shift())
        return self._ranking

    def conventions(self) -> ConventionCheck:
        """The ranking against the convention the source declares."""
        ranked = self.ranking()
        best, stored = ranked[0], self.scene.convention
        ok = best.convention == stored or stored.label in best.ties
        return ConventionCheck(stored.label, best.label, ok, tuple((r.label, float(r.score)) for r in ranked),
                               tuple(best.evidence))

    def ground_z(self) -> float | None:
        """Ego z (metres) of the ground the scene's LiDAR sees (:func:`bevviz.lidar.ground_height`),
        or None without a scan or without a dominant ground plane."""
        if self._ground is None:
            self._ground = (None if self.lidar is None else ground_height(self.lidar),)
        return self._ground[0]

    def _ground_shift(self) -> float:
        """:func:`bevviz.session.ground.ground_shift` of the scene's scan (computed once), corrected by the move the
        gross-error screen found when it named the LiDAR (:meth:`gross`, when it has run)."""
        g = self._lidar_ground_shift()
        return 0.0 if g and cameras_grounded(self.rig, g) else g

    def _lidar_ground_shift(self) -> float:
        """:func:`bevviz.session.ground.ground_shift` of the scene's scan, corrected by the gross-error
        screen's LiDAR move."""
        g = self.ground_z()
        screen = self._gross[0] if self._gross else None
        if g is not None and screen is not None and screen.lidar_from_scan is not None:
            g += float(screen.lidar_from_scan[2, 3])  # the road where the cameras put it
        return shift_of(g)

    def ground_note(self) -> str:
        """:func:`bevviz.session.ground.ground_note` of the scene: a sentence when the LiDAR sees
        the ground more than ``GROUND_SHIFT_M`` from z = 0 (the physical checks then measure from
        there, or the LiDAR's height is the suspect), else ""."""
        return ground_note(self.rig, self._lidar_ground_shift(), self._ground_shift())

    def sanity(self) -> dict[str, CameraSanity]:
        """Camera name -> its projection sanity (:func:`~bevviz.session.report.projection_sanity`),
        from the ground the LiDAR sees when it is not the ego frame's z = 0 (:meth:`ground_note`)."""
        if self._sanity is None:
            self._sanity = projection_sanity(self.rig, self._ground_shift(), ground_seen=self.ground_z() is not None)
        return self._sanity

    def gross(self) -> GrossScreen | None:
        """The gross-error screen (:func:`bevviz.calibration.gross.screen_gross_errors`) of the scene's frames
        with every image and a scan (a drive's pooled; its ignore polygons), or None without (computed once).
        When it names the LiDAR (metres off the cameras), :meth:`sanity` measures heights from the road
        where the cameras put it, not where that LiDAR sees it."""
        if self._gross is None:
            ok = self.lidar is not None and self.scene.has_all_images
            more = [(f.images, f.lidar) for f in self.scene.complete_frames if f.lidar is not None]
            args = (self.rig, self.scene.images, self.lidar, more, dict(self.scene.ignore))
            self._gross = (screen_gross_errors(*args) if ok else None,)
            if self._gross[0] is not None and self._gross[0].lidar_from_scan is not None:
                self._sanity = None  # measured again from the corrected road
        return self._gross[0]

    def fixed_rig(self) -> Rig | None:
        """The rig with every camera the gross-error screen named corrected (a turn), or None
        when it corrects none (nothing found, or faults a rig cannot fix: swapped images, a
        LiDAR off)."""
        screen = self.gross()
        return None if screen is None else screen.fixed

    # ----------------------------------------------------------------------------------
    # The doctor's witnesses
    # ----------------------------------------------------------------------------------

    def diagnose(self, progress: Progress | None = None) -> Diagnosis:
        """Which camera is off: every camera's finding, worst first (computed once).

        With a LiDAR scan the LiDAR witness (each camera's own rotation offset with its
        bootstrap uncertainty) and the seams; without, the seams (``settings.thorough``:
        each suspect rotated alone).

        Args:
            progress: Optional ``callback(done, total, camera)``.

        Returns:
            :class:`bevviz.calibration.Diagnosis` (with ``seam_median`` and, with LiDAR, the
            rig ``consensus``).

        Raises:
            InputError: field ``images`` when a camera has no image.
        """
        if self._diagnosis is None:
            images, lidar = self._witness_frames()
            ignore = dict(self.scene.ignore)
            known = self._known_evidence() if self.lidar is not None else {}
            frames = as_lidar_frames(images, lidar, ignore_masks(self.rig, ignore)) if known else []
            # Evidence handed in is read as a scan with ego motion and intensities: only such a
            # scan may reuse it (else the reasons would differ from a diagnosis of the scan).
            evidence = None
            if frames and all(len(f.scan.exposure_from_keyframe) and f.ranks is not None for f in frames):
                # some cameras aligned already (another doctor of the same images and scan)
                missing = [n for n in self.rig.names if n not in known]
                if missing:
                    known.update(lidar_evidence(self.rig, None, frames, cameras=missing,
                                                replicates=self.settings.replicates, progress=progress,
                                                agreement=agreement_of(known), second_look=False))
                evidence = {n: known[n] for n in self.rig.names}
            settings = DiagnoseSettings(thorough=self.settings.thorough, replicates=self.settings.replicates)
            # the scan goes along with the evidence: the diagnosis makes the second looks it reads from it
            self._diagnosis = diagnose(self.rig, images, self.grid, lidar, settings=settings,
                                       evidence=evidence, ignore=ignore, progress=None if evidence else progress)
            for f in self._diagnosis:
                if f.evidence is not None:  # as made, not the look shown: a second look must stay second
                    self._store[self._key(f.camera)] = f.evidence
        return self._diagnosis

    def _known_evidence(self) -> dict[str, CameraEvidence]:
        keys = {n: self._key(n) for n in self.rig.names}
        return {n: self._store[k] for n, k in keys.items() if k in self._store}

    @property
    def diagnosed(self) -> Diagnosis | None:
        """The diagnosis when :meth:`diagnose` has run, else None (nothing is computed)."""
        return self._diagnosis

    @property
    def aligned_before(self) -> bool:
        """Whether a doctor sharing this one's evidence store aligned a camera with the LiDAR
        (e.g. before the rig was perturbed) while this one has not been diagnosed."""
        return self._diagnosis is None and bool(self._store)

    def perturbed(self, perturbations: Mapping[str, Mapping[str, float]]) -> Doctor:
        """The doctor of this scene with cameras moved (:func:`bevviz.calibration.apply_perturbations`).

        Returns:
            This doctor when nothing moves; else a new one sharing the evidence store (a
            camera that did not move is not aligned again) and ``loaded``.

        Raises:
            InputError: for a perturbation out of range or of an unknown camera.
        """
        rig = apply_perturbations(self.rig, perturbations)
        if rig.fingerprint == self.rig.fingerprint:
            return self
        return Doctor(dataclasses.replace(self.scene, rig=rig), self.settings, self.grid, self.frames, self._store,
                      self.loaded)

    def seams(self) -> SeamView:
        """The seams of the scene's images on the doctor's grid (with the ground-truth costs
        when the scene has a known ground texture). Computed once."""
        if self._seams is None:
            self._seams = SeamView.of(analyze_seams(self.rig, self._require_images(), self._grid(),
                                                    ground_truth=self.scene.ground_truth))
        return self._seams

    def _grid(self) -> BEVGrid:
        return seam_grid() if self.grid is None else self.grid

    def quick(self) -> Diagnosis:
        """The seams' fast ranking (each camera's better seam against the rig median), no
        refinement and no LiDAR: for live views. Computed once (from :meth:`seams`)."""
        if self._quick is None:
            self._require_images()
            self._quick = rank_seams(self.rig, [self.seams().analysis.without_ground_truth()])
        return self._quick

    def standout(self) -> CameraFinding | None:
        """The camera whose seams stand out of :meth:`quick` (None when none does)."""
        return standout(self.quick())

    def versus_truth(self) -> Diagnosis | None:
        """Each camera against the known ground texture, or None without one. Computed once."""
        if self._truth is None and self.seams().analysis.gt_cost:
            self._truth = against_texture(self.rig, self.seams().analysis)
        return self._truth

    def thorough(self, progress: Progress | None = None) -> Diagnosis:
        """The seam witness with each suspect rotated alone, over every frame (no LiDAR). Computed once."""
        if self._thorough is None:
            self._require_images()
            self._thorough = rotate_suspects(self.rig, list(self.frames) or [self.scene.images], self.grid,
                                             progress=progress)
        return self._thorough

    @property
    def thorough_done(self) -> Diagnosis | None:
        """:meth:`thorough`'s result when it has run, else None."""
        return self._thorough

    def evidence(self) -> dict:
        """Camera name -> the LiDAR evidence its verdict rests on (the second look where that
        decided), as the diagnosis aligned it (empty without LiDAR): what the page draws."""
        if self.lidar is None:
            return {}
        return {f.camera: f.lidar for f in self.diagnose() if f.lidar is not None}

    def refine(self, camera: str, progress: Callable[[int, int, float], None] | None = None
               ) -> tuple[Rig, RefineHistory]:
        """Refine one camera's extrinsics; the rest of the rig is held fixed.

        With LiDAR, the evidence the diagnosis aligned is reused (not aligned again).

        Args:
            camera: The camera's name.
            progress: Optional ``callback(step, total_steps, loss)``.

        Returns:
            ``(rig, history)`` as :func:`bevviz.calibration.refine_extrinsics`: the input
            rig unchanged when ``history.accepted`` is False.

        Raises:
            InputError: field ``camera`` for a name not in the rig, ``images`` for a missing image.
        """
        if camera not in self.rig.names:
            raise InputError(f"field 'camera': not a camera of the rig ({', '.join(self.rig.names)}) "
                             f"(got {camera!r})", "camera", camera)
        images, lidar = self._witness_frames()
        found = self.diagnose() if self.lidar is not None else []
        made = {f.camera: f.evidence for f in found if f.evidence is not None}
        evidence = made or None  # as made (first look with its second): judged again as the diagnosis did
        return refine_extrinsics(self.rig, images, self.grid, camera, lidar, evidence=evidence,
                                 progress=progress, ignore=dict(self.scene.ignore))

    def refine_lidar(self, camera: str, draw: bool = True) -> Refinement:
        """:meth:`refine` against the LiDAR, kept (:meth:`refined`), drawn on every frame it
        pooled (``.overlays``; not with ``draw`` False: the command line draws none)."""
        rig, hist = self.refine(camera)
        res = self._keep(("lidar", camera), camera, rig, hist, None)
        if not draw:
            return res
        images, lidar = self._witness_frames()
        ev = self._store.get(self._key(camera))  # the evidence the diagnosis made: which frames it pooled
        drawn = refinement_overlays(res, images, lidar, ignore_masks(self.rig, dict(self.scene.ignore)), ev)
        self._refined[("lidar", camera)] = res = dataclasses.replace(res, overlays=tuple(drawn))
        return res

    def refine_seams(self, camera: str, *, fast: bool = False, translation: bool = False,
                     progress: Callable[[int, int, float], None] | None = None) -> Refinement:
        """One camera refined against its seams alone over every frame, no LiDAR; kept.

        Args:
            camera: The camera's name.
            fast: The fast schedule (two coarse levels) instead of the accurate one.
            translation: Refine the translation too (seams constrain it weakly).
            progress: Optional ``callback(step, total_steps, loss)``.

        Raises:
            InputError: field ``camera`` for a name not in the rig.
        """
        if camera not in self.rig.names:
            raise InputError(f"field 'camera': not a camera of the rig ({', '.join(self.rig.names)}) "
                             f"(got {camera!r})", "camera", camera)
        self._require_images()
        settings = RefineSettings(levels=FAST_LEVELS if fast else DEFAULT_LEVELS, translation=translation)
        rig, hist = refine_extrinsics(self.rig, list(self.frames) or [self.scene.images], self._grid(), camera,
                                      settings=settings, progress=progress)
        after = SeamView.of(analyze_seams(rig, self.scene.images, self._grid()))
        return self._keep(("seams",), camera, rig, hist, after)

    def _keep(self, key: tuple, camera: str, rig: Rig, hist: RefineHistory, after: SeamView | None) -> Refinement:
        loaded = camera_delta(self.loaded[camera], rig[camera]).angle_deg if camera in self.loaded.names else 0.0
        self._refined[key] = out = Refinement(camera, self.rig, rig, hist, float(loaded), after)
        return out

    def refined(self, kind: str, camera: str | None = None) -> Refinement | None:
        """The last refinement kept: ``kind`` "seams" (any camera) or "lidar" (of ``camera``); None before one."""
        return self._refined.get(("lidar", camera) if kind == "lidar" else ("seams",))

    def seam_offset(self, camera: str) -> tuple[dict[str, float] | None, bool]:
        """A camera's offset from its seams alone: the camera refined alone, read as the
        rotation from where the seams put it to where it is stored.

        Returns:
            ``({"roll", "pitch", "yaw"} -> degrees, or None when it has no seam to refine
            against; whether the refinement passed its held-out check)``. Computed once
            per camera.
        """
        if camera not in self._offsets:
            try:
                refined, hist = refine_camera(self.rig, self._require_images(), self.grid, camera)
            except InputError:  # no seam to refine against
                self._offsets[camera] = (None, False)
            else:
                d = camera_delta(refined[camera], self.rig[camera])  # evidence -> stored
                self._offsets[camera] = ({"roll": d.roll_deg, "pitch": d.pitch_deg, "yaw": d.yaw_deg},
                                         bool(hist.accepted))
        return self._offsets[camera]

    # ----------------------------------------------------------------------------------
    # Everything, as one report
    # ----------------------------------------------------------------------------------

    def check(self, progress: Progress | None = None) -> CheckReport:
        """Conventions, projection sanity and the doctor as one :class:`CheckReport`.

        Without every camera's image the doctor does not run: every camera is
        inconclusive and a note says which images are missing (``bevviz check`` refuses
        such a scene before it gets here).

        Args:
            progress: Optional ``callback(done, total, camera)`` of the doctor's per-camera
                work (:meth:`diagnose`; each camera over all :attr:`n_frames` frames).
        """
        t0 = time.perf_counter()
        notes = [*self.scene.notes, *self.scene.warnings]  # image conversions (grey, 16-bit, CMYK, alpha) too
        conv = self.conventions()
        screen = self.gross()  # first: a LiDAR it names moves the road the sanity measures from
        faults = () if screen is None else tuple(SensorFault(e.sensor, e.kind, e.message, e.others, e.frames)
                                                 for e in screen.errors)
        if screen is not None:
            notes.extend(screen.notes)
        sanity = self.sanity()
        notes.extend(n for n in (self.ground_note(),) if n)
        scan = self.lidar
        n_points = 0 if scan is None else int(len(scan.points if isinstance(scan, LidarScan) else scan))
        if scan is not None and n_points == 0 and self.settings.lidar:
            notes.append("the LiDAR scan holds no points: the LiDAR witness has nothing to judge")
        cams: list[CameraCheck] = []
        median = float("nan")
        if not self.scene.has_all_images:
            missing = [n for n in self.rig.names if n not in self.scene.images]
            notes.append(f"the doctor needs every camera's image; missing: {', '.join(missing)}")
            for name in self.rig.names:
                cams.append(CameraCheck(name, INCONCLUSIVE, float("nan"), float("nan"),
                                        f"{name}: no doctor without images", {}, None, None, None, None, 0, 0,
                                        sanity[name], frames=0))
        else:
            found = self.diagnose(progress)
            median = float(found.seam_median)
            notes.extend(n for n in (found.lidar_doubt, found.timing) if n)
            for f in found:
                cams.append(self._camera_check(f, sanity[f.camera]))
            if any(f.sensor == LIDAR_SENSOR for f in faults):  # its witness convicts no camera
                cams = [dataclasses.replace(c, verdict=INCONCLUSIVE, reason=f"{c.reason} But the LiDAR it was measured "
                                            "against is named at fault, so it is not convicted.")
                        if c.verdict == MISCALIBRATED and c.witnesses.get("lidar") == MISCALIBRATED else c
                        for c in cams]
        return CheckReport(dict(self.scene.source), self.settings, tuple(cams), conv, n_points, tuple(notes),
                           time.perf_counter() - t0, median, faults)

    def _camera_check(self, f, sanity: CameraSanity) -> CameraCheck:
        offset, unc, src, checked = f.offset_deg, f.uncertainty_deg, None, None
        if offset is not None:
            src, checked = "lidar", True
        elif f.verdict == MISCALIBRATED and self.settings.estimate:
            offset, checked = self.seam_offset(f.camera)
            src = "seams" if offset is not None else None
        return CameraCheck(
            f.camera, f.verdict, float(f.score), float(f.quick_score), f.reason, dict(f.witnesses),
            None if offset is None else {a: float(offset[a]) for a in AXES},
            None if unc is None else {a: float(unc[a]) for a in AXES},
            src, checked, int(f.edge_points), len(f.seams), sanity,
            {(p.b if p.a == f.camera else p.a): float(p.cost) for p in f.seams},
            int(f.lidar.frames) if f.lidar is not None else self.n_frames)


def check_rig(rig: Rig, images: Mapping[str, np.ndarray], *, raw_cameras: Sequence[RawCamera] | None = None,
              convention: Convention = NUSCENES, lidar: LidarScan | np.ndarray | None = None,
              settings: CheckSettings | None = None, source: Mapping | None = None,
              notes: Sequence[str] = ()) -> CheckReport:
    """Check one rig given as parts: :meth:`Doctor.check` of a scene made of them.

    Args:
        rig: The rig (N_cam cameras).
        images: Camera name -> RGB uint8 image (H, W, 3). The doctor runs only when every
            camera has one (else every camera is inconclusive and a note says why).
        raw_cameras: The calibration as stored; default ``rig.to_raw(convention)``.
        convention: The convention the source declares it stores.
        lidar: Optional LiDAR scan (a :class:`bevviz.lidar.LidarScan` or points (N, 3|4)
            in the ego frame); used when ``settings.lidar``.
        settings: :class:`CheckSettings`; default ``CheckSettings()``.
        source: Where the rig came from (copied into the report).
        notes: Rig-level remarks to carry (e.g. why no LiDAR).

    Returns:
        :class:`CheckReport`.
    """
    scene = Scene(key="parts", label="rig", rig=rig, images=images,
                  raw_cameras=tuple(raw_cameras) if raw_cameras is not None else (), convention=convention,
                  lidar=lidar, notes=tuple(notes), source=dict(source or {}))
    return Doctor(scene, settings).check()

