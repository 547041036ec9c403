"""The ``bevviz`` command (also ``python -m bevviz``): headless checks, the dataset audit, the app.

``bevviz check SOURCE`` checks one rig and exits 0 / 1 / 2; ``bevviz audit DATAROOT`` checks
every sample of a nuScenes-format dataset into Parquet (locally, or on Ray); ``bevviz app``
starts the Streamlit app of the installed package. Built on click. A check loads its source
and asks the doctor through :mod:`bevviz.session`, the road the app takes too. Bad input (an
:class:`bevviz.errors.InputError`, a usage error, a file that cannot be read or written) is
one line on stderr and exit status 2, never a traceback; any other exception is a bug in
bevviz and says so, with where to report it (exit status 3). :func:`main` is the console
script's entry point.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

import click
from tqdm.auto import tqdm

from bevviz.audit import (
    ENGINES,
    AuditOptions,
    CheckReport,
    CheckSettings,
    check_html,
    degraded_samples,
    flagged_rows,
    run_audit,
)
from bevviz.audit.store import MANIFEST, PARTS
from bevviz.errors import InputError, bug_message
from bevviz.io.atomic import atomic_write_bytes
from bevviz.io.outputs import Reads, refuse_input_as_output, writable_file
from bevviz.npu_cli import npu
from bevviz.session import DEFAULT_FRAMES, MAX_FRAMES, Doctor, Scene, embedded_path, load_scene, write_fixed_rig
from bevviz.session.fixes import corrected_rig, corrections, to_correct
from bevviz.session.loaders import IMAGE_EXTENSIONS, is_frame_folder

__all__ = ["EXIT_BUG", "EXIT_FLAGGED", "EXIT_OK", "EXIT_USAGE", "app_script", "cli", "main"]

EXIT_OK, EXIT_FLAGGED, EXIT_USAGE, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
PROG = "bevviz"
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
#: Most scene x camera lines the audit's summary prints (the rest are in summary.json).
SUMMARY_LINES = 60
#: What a frame folder holds besides its images (:mod:`bevviz.io.frame_folder`).
FRAME_FILES = ("rig.json", "lidar_ego.npy", "lidar_ring.npy", "exposure.json", "ignore.json")
#: What a nuScenes dataroot holds beside its folders that a check reads (the embedded
#: dataset's record of its miscalibrated camera).
DATAROOT_FILES = ("miscalibration.json",)
#: What ``bevviz audit`` writes into ``--out`` besides the Parquet parts.
AUDIT_FILES = (MANIFEST, "summary.json", "report.html")


def _error(message: str) -> None:
    """One line on stderr: ``bevviz: error: <message>``."""
    click.echo(f"{PROG}: error: {' '.join(str(message).split())}", err=True)


def _settings(lidar: bool, thorough: bool, estimate: bool, sweeps: int) -> CheckSettings:
    return CheckSettings(lidar=lidar, sweeps=sweeps, thorough=thorough, estimate=estimate)


def _doctor_options(fn):
    """The options every check shares (they form :class:`~bevviz.audit.CheckSettings`)."""
    options = [
        click.option("--lidar/--no-lidar", default=True, show_default=True,
                     help="Use the sample's LIDAR_TOP sweep as the doctor's second witness when it has one "
                          "(about 3 s per 6-camera sample on 2 cores)."),
        click.option("--sweeps", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
                     help="LiDAR sweeps to accumulate (1 = the keyframe sweep)."),
        click.option("--thorough", is_flag=True,
                     help="Without LiDAR: test each suspect by letting it rotate alone (about 3 s) instead of "
                          "ranking by seam costs only."),
        click.option("--estimate/--no-estimate", default=True, show_default=True,
                     help="Estimate the offset of a camera the seams flag by refining it alone (2-4 s each)."),
    ]
    for opt in reversed(options):
        fn = opt(fn)
    return fn


@click.group(context_settings=CONTEXT)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Headless geometry checks of multi-camera BEV rigs, and a whole-dataset calibration audit.

    \b
    COMMANDS
      check SOURCE     check one rig: conventions, projection sanity, the Calibration Doctor
      audit DATAROOT   check every sample of a nuScenes-format dataset into Parquet
      app              start the interactive app (Streamlit) on the embedded sample

    \b
    EXIT STATUS
      0  nothing flagged (what cannot be judged is a note, not a flag)
      1  a named fault of a named sensor: a gross error (a camera turned, images swapped, a
         LiDAR off), a camera miscalibrated or failing a sanity check (with --strict: or
         inconclusive); for audit, also a sample that could not be checked
      2  bad input or usage; one line on stderr names the field and the value
      3  a bug in bevviz (not in the input): one line says where to report it
    130  interrupted

    \b
    EXAMPLES
      bevviz check real-nuscenes --json check.json --html check.html
      bevviz check rig.json --images ./images
      bevviz audit /data/nuscenes --version v1.0-trainval --out audit/ --engine ray --workers 8

    Run 'bevviz COMMAND --help' for a command's options. docs/audit.md in the repository
    describes the JSON and Parquet schemas.
    """
    ctx.ensure_object(dict)


def _print_check(report: CheckReport, strict: bool) -> None:
    src = report.source
    where = " · ".join(str(src[k]) for k in ("path", "version", "scene", "sample") if src.get(k) is not None)
    lidar = f"LiDAR: {report.lidar_points:,} points" if report.lidar_points else "no LiDAR"
    if src.get("frames"):
        lidar += f", {src['frames']} frame{'s' if src['frames'] != 1 else ''}"
    click.echo(f"bevviz check: {where}  ({lidar}, {report.runtime_s:.1f} s)")
    for fault in report.faults:
        click.echo(f"FAULT: {fault.message}" + (f" ({fault.frames} frames)" if fault.frames > 1 else ""))
    head = (f"{'camera':<17} {'verdict':<13} {'score':>7} {'frames':>6}  {'roll':>12} {'pitch':>12} {'yaw':>12}  "
            f"{'witnesses':<38} sanity")
    click.echo(head)
    click.echo("-" * len(head))
    for c in report.cameras:
        off = c.offset_deg or {}
        unc = c.uncertainty_deg or {}

        def axis(a: str, off=off, unc=unc) -> str:
            if a not in off:
                return "-"
            return f"{off[a]:+.2f}" + (f"±{unc[a]:.2f}" if a in unc else "")

        wit = ", ".join(f"{k} {v}" for k, v in c.witnesses.items())
        score = f"{c.score:7.3f}" if c.score == c.score else "      -"
        click.echo(f"{c.camera:<17} {c.verdict:<13} {score} {c.frames:>6}  {axis('roll'):>12} {axis('pitch'):>12} "
                   f"{axis('yaw'):>12}  {wit:<38} {'; '.join(c.sanity.problems) or 'ok'}")
    conv = report.conventions
    click.echo(f"conventions: stored {conv.stored}; best ranked {conv.best} ({'ok' if conv.ok else 'MISMATCH'}, "
               f"score {conv.ranking[0][1]:.3f})")
    if report.seam_median == report.seam_median:
        click.echo(f"median seam cost: {report.seam_median:.3f}")
    for note in report.notes:
        click.echo(f"note: {note}")
    flagged = report.flagged(strict)
    unsure = report.unjudged(strict)
    tail = f" ({len(unsure)} of {len(report.cameras)} cameras inconclusive: not judged)" if unsure else ""
    click.echo(f"flagged: {', '.join(flagged) if flagged else 'none'}{tail}")


@cli.command(context_settings=CONTEXT)
@click.argument("sources", metavar="SOURCE [FRAME_FOLDER ...]", nargs=-1, required=True)
@click.option("--images", metavar="DIR", multiple=True,
              help="JSON rig: folder of its images (default: the JSON file's folder). Each camera's image is "
                   "the path the JSON names under DIR, else that file name in DIR, else <camera name>.jpg "
                   "(.jpeg, .png, .bmp, .tif, .tiff) in DIR. Repeat it for several image sets of the rig "
                   "(moments of a drive, every camera in each, the first set's sizes): the seams average "
                   "over them.")
@click.option("--scan", "scans", metavar="FILE", multiple=True,
              help="JSON rig: a LiDAR point cloud in the ego frame (nuScenes .bin, or .npy N x 3 or 4), one per "
                   "image set in the order of --images. It carries no ego motion, so on a rig of several "
                   "cameras the LiDAR witness stays inconclusive (a frame folder's exposure.json gives it).")
@click.option("--version", "version", default="v1.0-mini", show_default=True, metavar="NAME",
              help="nuScenes: the table folder under the dataroot.")
@click.option("--sample", metavar="TOKEN", help="nuScenes: the sample token (default: the first sample).")
@click.option("--json", "json_path", metavar="PATH",
              help="Write the report as JSON (schema: docs/audit.md); '-': to stdout, instead of the table.")
@click.option("--html", "html_path", metavar="PATH", help="Write a self-contained HTML page with the figures.")
@click.option("--strict", is_flag=True, help="Exit 1 for an inconclusive camera too.")
@click.option("--write-fixed", "fixed_path", metavar="PATH",
              help="Write the corrected rig as a rig JSON; never over an input. Where the gross-error screen "
                   "names a fault, every camera it names corrected (a camera turned 90 or 180 deg, a position a "
                   "metre or more off, a focal length 10-20 % off); else every camera the LiDAR calls "
                   "miscalibrated turned by its checked correction (a CORRECTION line each says whether it was "
                   "applied, only proposed, or declined, and why). Nothing is written when nothing is to correct.")
@click.option("--apply-proposals", is_flag=True,
              help="With --write-fixed: apply the corrections that passed every check but were only proposed "
                   "(the LiDAR places the rig's other cameras further from their calibration than a correction "
                   "should land; the CORRECTION line says how far).")
@click.option("--frames", type=click.IntRange(min=1, max=MAX_FRAMES), default=None, metavar="N",
              help=f"nuScenes: add up the LiDAR evidence of N frames: the sample and the N-1 samples that follow "
                   f"it in its scene (the preceding ones at the scene's end). Default: {DEFAULT_FRAMES}, or as many "
                   "as the scene holds; the report says how many were used. One frame may well be "
                   "'inconclusive'; several decide more often. --frames 1: the sample alone.")
@_doctor_options
@click.pass_context
def check(ctx: click.Context, sources: tuple[str, ...], images: tuple[str, ...], scans: tuple[str, ...],
          version: str, sample: str | None,
          json_path: str | None, html_path: str | None, strict: bool, fixed_path: str | None,
          apply_proposals: bool, frames: int | None,
          lidar: bool, sweeps: int, thorough: bool, estimate: bool) -> int:
    """Check one rig: storage conventions, projection sanity and the Calibration Doctor.

    \b
    SOURCE is one of
      a JSON rig file      (bevviz rig format, see the README), images from --images DIR
                           or the JSON file's folder (see --images for the lookup order)
      a frame folder       rig.json + its images + lidar_ego.npy (N x 3 or 4: x, y, z in the
                           ego frame, intensity in any scale), optional exposure.json,
                           ignore.json (docs/api.md): the doctor with the LiDAR
      a nuScenes dataroot  (a folder holding <version>/sample.json); --version, --sample
      a drive              a folder whose subfolders are frame folders of one rig (t0/,
                           t1/, ...): judged together, in name order
      an embedded sample   rig | nuscenes | real-nuscenes | real-tri | real-tri-drive |
                           real-kitti (a path of that name that exists is checked instead)
    Several frame folders of one rig (the same cameras, calibration and ignore polygons:
    consecutive frames of a drive) are checked together: the LiDAR witness adds their
    evidence up, as --frames N does for a nuScenes dataroot.

    A check that cannot run the doctor (a camera without its image) exits 2 and names
    the cameras and what was looked for.

    The doctor uses the LiDAR sweep when the sample has one (nuScenes), and the seams
    between neighbouring cameras always. The table lists each camera's verdict
    (miscalibrated / inconclusive / ok), the doctor's score, the frames behind it, its
    estimated offset per axis in degrees (body frame: roll about the optical axis, pitch positive looking down, yaw
    positive turning left; +- one standard deviation with LiDAR), the witnesses and the
    sanity problems.

    \b
    With a LiDAR a gross-error screen runs first: a camera turned 90 or 180 deg about its
    optical axis, two cameras' images swapped or one image under two names, a LiDAR a metre or
    more off the cameras, one camera's position a metre or more off or its focal length 10-20 %
    off are named (FAULT lines) with the sensor at fault; several frames (a drive, --frames N)
    are screened together, and a FAULT line found on several says how many.

    \b
    EXIT STATUS
      0 nothing flagged, or only what cannot be judged (no ground shared with another
        camera, a rig in a sensor's frame without a LiDAR to show the road: notes)
      1 a named fault of a named sensor: a gross error, a camera miscalibrated or failing a
        sanity check (--strict: or inconclusive)
      2 bad input
    """
    settings = _settings(lidar, thorough, estimate, sweeps)
    if ctx.obj.get("parse_only"):
        return EXIT_OK
    scene = load_scene(sources[0], images=images, version=version, sample=sample, lidar=lidar, sweeps=sweeps,
                       frames=frames, more=sources[1:], scans=scans)
    scene.require_images("--images" if Path(scene.source.get("path", "")).is_file() else "SOURCE")  # JSON rig?
    reads = check_reads(sources, images, scene, scans)
    to_stdout = json_path == "-"
    for field, path in (("--json", None if to_stdout else json_path), ("--html", html_path),
                        ("--write-fixed", fixed_path)):
        if path:  # refused before the check runs: nothing is computed for an output that cannot be written
            refuse_input_as_output(field, writable_file(field, path), reads)
    if json_path and html_path and not to_stdout and Path(json_path).resolve() == Path(html_path).resolve():
        raise InputError(f"field '--html': {html_path!r} is the --json file too; write them apart",
                         "--html", html_path)
    doctor = Doctor(scene, settings)
    frames = doctor.n_frames if scene.has_all_images else 1
    with _progress_bar(frames * len(doctor.rig), f"doctor ({frames} frame{'s' if frames != 1 else ''} x "
                       f"{len(doctor.rig)} cameras)", "frame-camera") as progress:
        report = doctor.check(progress)
    say = functools.partial(click.echo, err=to_stdout)  # stdout holds the JSON alone with --json -
    if not to_stdout:
        _print_check(report, strict)
    tried = {}
    if not fixed_path and to_correct(doctor):
        say("hint: --write-fixed PATH refines the cameras the LiDAR calls miscalibrated and writes the "
            "corrections that pass their checks")
    if fixed_path:
        with _progress_bar(len(to_correct(doctor)), "corrections", "camera") as progress:
            tried = corrections(doctor, progress)
        for camera, res in tried.items():
            say(f"CORRECTION: {camera}: {res.history.check}")
        fixed = corrected_rig(doctor, apply_proposals)
        proposed = [n for n, res in tried.items() if res.history.proposal is not None]
        if proposed and not apply_proposals:
            say(f"--write-fixed: {', '.join(proposed)}: proposed only; --apply-proposals writes "
                f"{'it' if len(proposed) == 1 else 'them'} too")
        if fixed is None:
            say(f"--write-fixed: nothing to correct in the rig; {fixed_path} not written")
        else:
            say(f"fixed rig written to {write_fixed_rig(fixed, fixed_path, reads)}")
    if json_path:
        out = report.to_dict(strict)
        if fixed_path:  # what --write-fixed tried beyond the gross fixes
            out["corrections"] = [res.to_dict() for res in tried.values()]
        doc = json.dumps(out, indent=2, allow_nan=False)  # strict JSON: no NaN or Infinity
        if to_stdout:
            click.echo(doc)
        else:
            atomic_write_bytes(Path(json_path), (doc + "\n").encode())
    if html_path:
        atomic_write_bytes(Path(html_path), check_html(report, scene.images, strict).encode())
    return report.exit_code(strict)


@contextlib.contextmanager
def _progress_bar(total: int, desc: str, unit: str):
    """A progress bar (rate, ETA) of ``total`` steps on stderr when it is a terminal (nothing
    otherwise); yields the ``callback(done, total, camera)`` to hand the doctor, whose own
    count of steps is scaled to ``total``."""
    bar = tqdm(total=total, unit=unit, disable=None, leave=False, desc=desc)

    def progress(done: int, steps: int, camera: str) -> None:
        if steps:
            bar.update(round(bar.total * done / steps) - bar.n)
        if camera:
            bar.set_postfix_str(camera, refresh=False)

    try:
        yield progress
    finally:
        bar.close()


def check_reads(sources: Sequence[str], images: Sequence[str], scene: Scene, scans: Sequence[str] = ()) -> Reads:
    """What ``bevviz check SOURCE ...`` reads, for the output-path rule
    (:func:`bevviz.io.outputs.refuse_input_as_output`).

    Args:
        sources: The SOURCE arguments as given (paths or embedded sample names).
        images: The ``--images DIR`` folders given (none: the JSON file's folder).
        scene: The loaded scene (its image files, relative to where they were found).
        scans: The ``--scan FILE`` point clouds given (read too).

    Returns:
        A JSON rig: the file, and its ``--images`` folder whole, or (images beside the JSON)
        every image file there and the files it names. A frame folder: its files
        (:data:`FRAME_FILES`), its ``images/`` folder and the files its rig names. A
        nuScenes dataroot: every folder in it (tables, samples, sweeps, maps) and
        :data:`DATAROOT_FILES`; a report beside them (``DATAROOT/check.json``) is not read.
    """
    files: list[Path] = [Path(s) for s in scans]
    folders: list[Path] = []
    for name in sources:
        path = embedded_path(name) or Path(name)
        if path.is_file():  # a JSON rig
            files.append(path)
            where = Path(images[0]) if images else path.parent
            if images:
                folders += [Path(d) for d in images]
            else:
                files += [p for p in where.iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS]
        elif is_frame_folder(path):
            where = path
            files += [path / f for f in FRAME_FILES]
            folders.append(path / "images")
        elif path.is_dir():  # a nuScenes dataroot: its tables, samples, sweeps and maps, and its notes
            where = path
            folders += [d for d in path.iterdir() if d.is_dir()]
            files += [path / f for f in DATAROOT_FILES]
        else:
            where = path
        files += [where / f for f in scene.image_files.values()]
    return Reads.of(files, folders)


def _scenes(value: tuple[str, ...]) -> list[str] | None:
    names = [n.strip() for v in value for n in v.split(",") if n.strip()]
    return names if value else None  # --scenes "," names no scene: run_audit refuses it (exit 2)


@cli.command(context_settings=CONTEXT)
@click.argument("dataroot", metavar="DATAROOT")
@click.option("--version", "version", default="v1.0-mini", show_default=True, metavar="NAME",
              help="The table folder under DATAROOT.")
@click.option("--scenes", multiple=True, metavar="NAMES",
              help="Audit only these scenes (comma-separated; repeatable). Default: every scene.")
@click.option("--out", default="bevviz-audit", show_default=True, metavar="DIR",
              help="Output folder: manifest.json, parts/*.parquet, summary.json, report.html.")
@click.option("--resume", is_flag=True, help="Continue the audit in --out (same arguments), skipping what is done.")
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True,
              help="local: this process, one sample after another. ray: Ray actors (ray.init(), or --address).")
@click.option("--address", metavar="ADDR", help="Ray: address of a running cluster (default: start Ray locally).")
@click.option("--workers", type=click.IntRange(min=1), metavar="N", help="Ray: worker actors (default 2).")
@click.option("--flush-every", type=click.IntRange(min=1), default=16, show_default=True, metavar="N",
              help="Samples per Parquet part file (a killed run redoes at most this many).")
@click.option("--strict", is_flag=True, help="Exit 1 for an inconclusive camera too.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bar with rate and ETA.")
@_doctor_options
@click.pass_context
def audit(ctx: click.Context, dataroot: str, version: str, scenes: tuple[str, ...], out: str, resume: bool,
          engine: str, address: str | None, workers: int | None, flush_every: int, strict: bool, progress: bool,
          lidar: bool, sweeps: int, thorough: bool, estimate: bool) -> int:
    """Check every sample of a nuScenes-format dataset; one Parquet row per sample x camera.

    Each sample is checked as 'bevviz check' would (a pure function of the dataroot,
    version, sample token and settings) and its rows go to --out/parts/ in atomic part
    files: a run killed at any point loses nothing with --resume, and writes nothing
    twice. A sample that cannot be checked becomes one row with its error; the run goes
    on. The run ends with a summary (verdict counts per scene x camera, summary.json) and
    report.html (offsets along each scene's timeline: a drifting camera's line leaves
    zero).

    \b
    ENGINES
      local  the default: this process (the devkit index is opened once)
      ray    the same function on Ray actors, each opening the index once; ray.init()
             starts Ray on this machine with --workers CPUs, or joins --address. Every
             node needs the dataroot at the same path. A worker that dies has its
             sample retried (twice); a sample that kills every attempt becomes an error row.

    \b
    EXIT STATUS
      0 nothing flagged; 1 a camera flagged or a sample failed; 2 bad input
    """
    if address and engine != "ray":
        raise click.UsageError("--address applies to --engine ray only")
    if workers not in (None, 1) and engine != "ray":
        raise click.UsageError("--workers applies to --engine ray only (the local engine is one process)")
    settings = _settings(lidar, thorough, estimate, sweeps)
    if ctx.obj.get("parse_only"):
        return EXIT_OK
    reads = Reads.of(folders=[dataroot])
    refuse_input_as_output("--out", out, reads, folder=True)
    for name in (PARTS, *AUDIT_FILES):  # a dataroot named like what the audit writes into --out
        refuse_input_as_output("--out", Path(out) / name, reads)
    run = run_audit(dataroot, out, scenes=_scenes(scenes), settings=settings, resume=resume, progress=progress,
                    options=AuditOptions(version=version, engine=engine, address=address, workers=workers,
                                         flush_every=flush_every))
    rows = run.rows.to_pylist()
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("miscalibrated", "inconclusive", "ok", "error")}
    rate = f", {run.samples_per_second:.2f} samples/s" if run.checked else ""
    click.echo(f"bevviz audit: {run.planned} samples ({run.checked} checked now{rate}), {len(rows)} rows: "
               + ", ".join(f"{n} {v}" for v, n in counts.items()))
    # Every scene x camera of a small audit; of a large one, those with something flagged.
    shown = run.summary if len(run.summary) <= SUMMARY_LINES else \
        [s for s in run.summary if s["miscalibrated"] or s["error"] or (strict and s["inconclusive"])]
    if shown:
        click.echo(f"{'scene':<14} {'camera':<17} {'samples':>7} {'miscal':>6} {'inconc':>6} {'ok':>4} {'error':>5}  "
                   "first flagged")
        for s in shown[:SUMMARY_LINES]:
            click.echo(f"{s['scene']:<14} {s['camera']:<17} {s['samples']:>7} {s['miscalibrated']:>6} "
                       f"{s['inconclusive']:>6} {s['ok']:>4} {s['error']:>5}  "
                       f"{'' if s['first_flagged'] is None else 'sample ' + str(s['first_flagged'])}")
        if len(shown) > SUMMARY_LINES:
            click.echo(f"... and {len(shown) - SUMMARY_LINES} more (summary.json)")
    for note in run.notes:
        click.echo(f"note: {note}")
    degraded = degraded_samples(run.rows)
    if degraded:  # judged on less evidence than asked for: said once, with the first sample's reason
        token, why = next(iter(degraded.items()))
        click.echo(f"note: {len(degraded)} of {run.planned} samples were checked on less evidence than the settings "
                   f"ask for (Parquet column 'degraded'); sample {token}: {why}")
    click.echo(f"written: {Path(out) / 'parts'}, {Path(out) / 'summary.json'}, {run.report}")
    return EXIT_FLAGGED if flagged_rows(run.rows, strict) else EXIT_OK


def app_script() -> Path:
    """The Streamlit script of the app: ``app.py`` of the installed package (shipped inside
    ``appkit/streamlit_app/`` with ``pages/`` and ``.streamlit/config.toml``), or of the
    source checkout (beside ``appkit/``). Found without importing the app.

    Raises:
        InputError: field ``app`` when neither is there (an installation without the app).
    """
    spec = importlib.util.find_spec("appkit")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("field 'app': the app (package appkit) is not installed (got None)", "app", None)
    package = Path(list(spec.submodule_search_locations)[0])
    for script in (package / "streamlit_app" / "app.py", package.parent / "app.py"):
        if script.is_file() and (script.parent / "pages").is_dir():
            return script
    raise InputError(f"field 'app': no app.py with pages/ in {package} or beside it (got {package})", "app", package)


def _config_flags(script: Path) -> list[str]:
    """The app's ``.streamlit/config.toml`` (beside its script) as ``--section.key=value``
    flags: Streamlit reads that file from the working folder only, and the app must look the
    same started from any folder."""
    path = script.parent / ".streamlit" / "config.toml"
    if not path.is_file():
        return []
    flags = []
    for section, values in tomllib.loads(path.read_text()).items():
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            flags.append(f"--{section}.{key}={text}")
    return flags


@cli.command(context_settings=CONTEXT)
@click.option("--port", type=click.IntRange(1, 65535), default=8501, show_default=True, metavar="PORT",
              help="Port of the app's web server.")
@click.option("--address", "server_address", metavar="ADDR", help="Address to listen on (default: Streamlit's).")
@click.pass_context
def app(ctx: click.Context, port: int, server_address: str | None) -> int:
    """Start the interactive app (Streamlit) on the embedded sample; open the URL it prints.

    Works from any folder: the app, its pages and its settings come with the package.
    Stop it with Ctrl-C; SIGTERM and SIGHUP (a service manager, a container's stop) are
    passed on to the server, which never outlives this command.
    """
    if ctx.obj.get("parse_only"):
        return EXIT_OK
    script = app_script()
    cmd = [sys.executable, "-m", "streamlit", "run", str(script), *_config_flags(script), f"--server.port={port}"]
    if server_address:
        cmd.append(f"--server.address={server_address}")
    return serve(cmd, script.parent)


#: Signals ``bevviz app`` passes on to its server: a service manager's or container's stop
#: (SIGTERM), Ctrl-C (SIGINT), a closed terminal (SIGHUP).
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Seconds the server gets to stop after the signal before it is killed.
STOP_GRACE_S = 10.0


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the kernel sends the child SIGTERM when its parent dies, even by SIGKILL."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def serve(cmd: Sequence[str], cwd: str | os.PathLike) -> int:
    """Run the server ``cmd`` as a child that never outlives this process.

    SIGTERM, SIGINT and SIGHUP sent to this process are passed on to the server, which
    stops as it would by itself; whatever way this process ends (a signal, an exception),
    a server still running is stopped (SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`).
    On Linux the server also gets SIGTERM from the kernel if this process is killed
    outright (SIGKILL), so no server is left holding the port.

    Args:
        cmd: The server's command line.
        cwd: Its working folder.

    Returns:
        The server's exit status; ``128 + N`` when signal N ended it.
    """
    proc = subprocess.Popen(cmd, cwd=cwd, preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    previous = {s: signal.signal(s, lambda signum, _frame: proc.send_signal(signum)) for s in FORWARDED_SIGNALS}
    try:
        code = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return 128 - code if code < 0 else code


cli.add_command(npu)


def main(argv: Sequence[str] | None = None, *, parse_only: bool = False) -> int:
    """Run the ``bevviz`` command line; returns the exit status.

    Args:
        argv: Arguments without the program name (default ``sys.argv[1:]``).
        parse_only: Parse and validate the arguments, run nothing (0 for a valid command
            line, 2 for a bad one, as a real run would).

    Returns:
        0 (nothing flagged, or help shown), 1 (flagged), 2 (bad input or usage; one line on
        stderr), 3 (a bug in bevviz; one line saying so and where to report it), 130
        (interrupted).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        _error(f"missing command ({', '.join(cli.commands)}); see '{PROG} --help'")
        return EXIT_USAGE
    try:
        rv = cli.main(args=args, prog_name=PROG, standalone_mode=False, obj={"parse_only": parse_only})
    except click.UsageError as e:
        hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
        _error(e.format_message() + hint)
        return EXIT_USAGE
    except click.ClickException as e:
        _error(e.format_message())
        return EXIT_USAGE
    except InputError as e:  # the library's named errors: field and value
        _error(str(e))
        return EXIT_USAGE
    except OSError as e:  # a file that cannot be written or read
        _error(f"{e.strerror or e}: {e.filename}" if e.filename else str(e))
        return EXIT_USAGE
    except (click.Abort, KeyboardInterrupt):
        _error("interrupted")
        return EXIT_INTERRUPTED
    except Exception as e:  # anything else is a bug in bevviz, never the user's fault
        _error(bug_message(e))
        return EXIT_BUG
    return int(rv or 0)
