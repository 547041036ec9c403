"""Walk a nuScenes-format dataset's sample table: where a sample sits and which samples surround it.

The loaders of :mod:`bevviz.io.nuscenes` and of the session read a sample's scene and index
(:func:`sample_meta`), its neighbours for a several-frame check (:func:`neighbour_samples`) and
the sample to read when none is named (:func:`first_sample`) from here. Every ``prev``/``next``
chain is followed bounded (:func:`bevviz.io.nuscenes_tables.walk`). ``nusc`` is a handle from
:func:`bevviz.io.nuscenes.open_dataset`; these names are also importable from
:mod:`bevviz.io.nuscenes`.
"""

from __future__ import annotations

from pathlib import Path

from bevviz.checks import field_error
from bevviz.io.nuscenes_tables import walk


def sample_record(nusc, sample_token: str, field_name: str = "sample_token") -> dict:
    """The sample record of ``sample_token``.

    Raises:
        InputError: naming ``field_name`` and the token when the dataset has no such sample.
    """
    try:
        return nusc.get("sample", sample_token)
    except (KeyError, TypeError):
        raise field_error(field_name, sample_token, "no such sample in the dataset") from None


def sample_position(nusc, sample_token: str) -> int:
    """How many samples come before ``sample_token`` in its scene (following ``prev``, bounded).

    Args:
        nusc: Handle from :func:`bevviz.io.nuscenes.open_dataset`.
        sample_token: Sample token.

    Returns:
        The 0-based index of the sample in its scene.

    Raises:
        InputError: naming ``sample_token`` (unknown) or ``sample.prev`` (a dangling token or
            a loop, found within as many steps as the sample table holds) and its value.
    """
    s = sample_record(nusc, sample_token)
    return len(walk(nusc.get, "sample", s.get("prev"), "prev", len(nusc.sample), ("sample", sample_token, "prev")))


def sample_meta(nusc, sample_token: str, field_name: str = "sample") -> dict:
    """Where a sample sits: its scene's name and token, its index in the scene, its time.

    Args:
        nusc: Handle from :func:`bevviz.io.nuscenes.open_dataset`.
        sample_token: Sample token.
        field_name: What the caller calls the token in its errors (``"--sample"``).

    Returns:
        ``{"scene", "scene_token", "sample", "sample_index", "timestamp"}`` (timestamp in
        microseconds).

    Raises:
        InputError: naming ``field_name`` for an unknown token, or ``sample.prev`` for a
            link that loops or leads nowhere (:func:`sample_position`).
    """
    s = sample_record(nusc, sample_token, field_name)
    scene = nusc.get("scene", s["scene_token"])
    return {"scene": scene["name"], "scene_token": scene["token"], "sample": sample_token,
            "sample_index": sample_position(nusc, sample_token), "timestamp": int(s["timestamp"])}


def neighbour_samples(nusc, sample_token: str, count: int) -> list[str]:
    """Up to ``count - 1`` samples of ``sample_token``'s scene around it: the following ones,
    then, at the scene's end, the preceding ones (nearest first).

    Raises:
        InputError: naming ``sample.next`` / ``sample.prev`` for a link that loops or leads nowhere.
    """
    want = count - 1
    if want <= 0:
        return []
    s = nusc.get("sample", sample_token)
    after = walk(nusc.get, "sample", s.get("next"), "next", len(nusc.sample), ("sample", sample_token, "next"),
                 stop=want)
    before = walk(nusc.get, "sample", s.get("prev"), "prev", len(nusc.sample), ("sample", sample_token, "prev"),
                  stop=want - len(after)) if len(after) < want else []
    return [r["token"] for r in after] + [r["token"] for r in before]


def first_sample(nusc, field_name: str, value: object) -> str:
    """The first sample of the first scene: what a loader reads when given no sample token.

    Raises:
        InputError: naming ``field_name`` and ``value`` (the dataset) when it has no scenes.
    """
    if not nusc.scene:
        raise field_error(field_name, value, "the dataset has no scenes")
    return nusc.scene[0]["first_sample_token"]


def is_dataroot(path: Path) -> bool:
    """Whether ``path`` is a folder holding ``<version>/sample.json``."""
    return path.is_dir() and any((p / "sample.json").is_file() for p in path.iterdir() if p.is_dir())
