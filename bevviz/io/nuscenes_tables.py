"""A nuScenes table set screened record by record, and bounded walks along its links.

The devkit indexes the tables in one pass and stops at the first bad record with a bare
``KeyError``; one dangling token refuses a whole dataset. :func:`screen_tables` runs before
that index (:func:`bevviz.io.nuscenes.open_dataset` calls it): every record is checked for
the keys, types and references bevviz and the devkit read, each problem becomes a
:class:`RecordProblem` (table, record token, field, value, what is wrong), records the
devkit's index cannot take are set aside, and each problem names the sample (and scene) it
concerns, so the audit reports it as an error row and checks everything else.

:func:`follow` (and :func:`walk`, which raises) follows a link field (``sample.next``,
``sample.prev``, ``sample_data.prev``) from a record: each record is visited once, so a
chain that loops back or runs into a token that is not in the table ends with a named
problem after at most as many steps as the table has records.

Convention:
    Tables as nuScenes stores them (lists of records, each with a string ``token``); links
    are tokens, ``""`` ends a chain. Timestamps are integer microseconds that fit int64.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from bevviz.checks import field_error

__all__ = ["INT64_MAX", "RecordProblem", "Screened", "follow", "screen_tables", "walk"]

#: Largest timestamp (or any integer column) the audit's Parquet rows hold.
INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class RecordProblem:
    """One bad record of a table.

    Attributes:
        table: Table name, e.g. ``"sample_data"``.
        token: The record's token (``"#<index>"`` when it has none).
        field: The offending field, e.g. ``"calibrated_sensor_token"``.
        value: Its value (None when missing).
        problem: What is wrong, in words.
        sample: Token of the sample it concerns, or None.
        scene: Token of the scene it concerns, or None.
    """

    table: str
    token: str
    field: str
    value: object
    problem: str
    sample: str | None = None
    scene: str | None = None

    @property
    def key(self) -> str:
        """Identity of the problem, ``table/token/field`` (the audit's resume key for its row)."""
        return f"{self.table}/{self.token}/{self.field}"

    def error(self) -> ValueError:
        """The named error: ``field 'sample.next': sample record 'ab': <problem> (got <value>)``."""
        return field_error(f"{self.table}.{self.field}", self.value,
                           f"{self.table} record {self.token!r}: {self.problem}")

    def __str__(self) -> str:
        return str(self.error())


@dataclass
class Screened:
    """The result of :func:`screen_tables`.

    Attributes:
        tables: Table name -> the records the devkit can index (bad ones set aside).
        problems: Every :class:`RecordProblem` found, table by table (the sample and scene
            it concerns filled in where the references lead to one).
        blocked: Sample token -> the problem that keeps it from being checked (a bad field
            of the sample, of one of its key-frame sample_data, or of the
            calibrated_sensor, sensor or ego_pose those point to).
    """

    tables: dict[str, list]
    problems: list[RecordProblem] = field(default_factory=list)
    blocked: dict[str, RecordProblem] = field(default_factory=dict)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def _vector(n: int) -> Callable[[object], str | None]:
    def check(v: object) -> str | None:
        ok = isinstance(v, list) and len(v) == n and all(_is_number(x) for x in v)
        return None if ok else f"must be a list of {n} finite numbers"
    return check


def _intrinsic(v: object) -> str | None:
    if v == []:  # non-camera sensors store an empty list
        return None
    ok = isinstance(v, list) and len(v) == 3 and all(isinstance(r, list) and len(r) == 3 and all(map(_is_number, r))
                                                     for r in v)
    return None if ok else "must be a 3 x 3 list of finite numbers (or [] for a sensor that is not a camera)"


def _string(v: object) -> str | None:
    return None if isinstance(v, str) else "must be a string"


def _name(v: object) -> str | None:  # a number is read as its text (SceneInfo.name)
    return None if isinstance(v, str) or _is_int(v) else "must be a string"


def _timestamp(v: object) -> str | None:
    return None if _is_int(v) and 0 <= v <= INT64_MAX else f"must be a whole number of microseconds in [0, {INT64_MAX}]"


def _count(v: object) -> str | None:
    return None if _is_int(v) and 0 <= v <= INT64_MAX else "must be a whole number >= 0"


def _size(v: object) -> str | None:
    return None if v is None or (_is_int(v) and 0 <= v <= INT64_MAX) else "must be a whole number of pixels >= 0"


def _flag(v: object) -> str | None:
    return None if isinstance(v, bool) else "must be true or false"


def _link(v: object) -> str | None:
    return None if isinstance(v, str) else 'must be a token string ("" ends the chain)'


#: Per table: field -> value check (None: fine) of the fields bevviz or the devkit reads;
#: a field marked optional is checked when present.
FIELDS: dict[str, dict[str, Callable[[object], str | None]]] = {
    "scene": {"name": _name, "nbr_samples": _count},
    "sample": {"timestamp": _timestamp, "next": _link, "prev": _link},
    "sample_data": {"filename": _string, "is_key_frame": _flag, "timestamp": _timestamp, "next": _link,
                    "prev": _link},
    "calibrated_sensor": {"translation": _vector(3), "rotation": _vector(4), "camera_intrinsic": _intrinsic},
    "sensor": {"channel": _string, "modality": _string},
    "ego_pose": {"translation": _vector(3), "rotation": _vector(4)},
    "category": {"name": _string},
}
OPTIONAL = {"sample_data": {"width": _size, "height": _size}}
#: Per table: reference field -> the table it points into. Tables are screened in this
#: order, so that what a record points to is screened before it.
REFERENCES: dict[str, dict[str, str]] = {
    "sensor": {},
    "calibrated_sensor": {"sensor_token": "sensor"},
    "ego_pose": {},
    "scene": {"first_sample_token": "sample"},
    "sample": {"scene_token": "scene"},
    "sample_data": {"sample_token": "sample", "calibrated_sensor_token": "calibrated_sensor",
                    "ego_pose_token": "ego_pose"},
    "category": {},
    "instance": {"category_token": "category"},
    "sample_annotation": {"sample_token": "sample", "instance_token": "instance"},
}
#: Fields the devkit's index reads: a record with a problem in one is set aside (the
#: devkit would stop at it), and so is everything that points to a record set aside.
INDEXED = {"calibrated_sensor": ("sensor_token",), "sensor": ("channel", "modality"),
           "sample_data": ("calibrated_sensor_token", "sample_token", "is_key_frame"),
           "category": ("name",), "instance": ("category_token",),
           "sample_annotation": ("sample_token", "instance_token")}
#: Link fields: a walk along them reports their problems (a sample is not blocked by them).
LINKS = {"next", "prev", "first_sample_token"}


def _records(name: str, table: object, problems: list[RecordProblem]) -> list[dict]:
    """The records of one table that have a token of their own (first of each token)."""
    if not isinstance(table, list):
        raise field_error(f"{name}.json", type(table).__name__, "must hold a list of records")
    kept, seen = [], set()
    for i, rec in enumerate(table):
        token = rec.get("token") if isinstance(rec, dict) else None
        if not isinstance(token, str) or not token:
            problems.append(RecordProblem(name, f"#{i}", "token", token if isinstance(rec, dict) else rec,
                                          "a record must be an object with a non-empty string token"))
        elif token in seen:
            problems.append(RecordProblem(name, token, "token", token, f"a second record with this token (#{i})"))
        else:
            seen.add(token)
            kept.append(rec)
    return kept


def _field_problems(name: str, rec: dict, index: Mapping[str, Mapping[str, dict]],
                    aside: Mapping[str, set]) -> list[tuple[str, object, str]]:
    """(field, value, problem) of one record: its checked fields and its references."""
    found = []
    for f, check in FIELDS.get(name, {}).items():
        if f not in rec:
            found.append((f, None, "missing"))
        elif (why := check(rec[f])) is not None:
            found.append((f, rec[f], why))
    for f, check in OPTIONAL.get(name, {}).items():
        if f in rec and (why := check(rec[f])) is not None:
            found.append((f, rec[f], why))
    for f, target in REFERENCES.get(name, {}).items():
        v = rec.get(f)
        if f not in rec:
            found.append((f, None, "missing"))
        elif f in LINKS and v == "":  # an empty chain (a scene without samples)
            continue
        elif not isinstance(v, str) or v not in index.get(target, {}):
            found.append((f, v, f"no such record in the {target} table"))
        elif v in aside.get(target, ()):
            found.append((f, v, f"the {target} record it points to is set aside (its own problem is reported)"))
    return found


def screen_tables(tables: Mapping[str, object]) -> Screened:
    """Check every record of a nuScenes table set; set aside those the devkit cannot index.

    Args:
        tables: Table name -> the table as loaded from its JSON (a list of records).

    Returns:
        :class:`Screened`: the tables to index, every problem (with the sample and scene it
        concerns where the references lead to one), and the samples they keep from being
        checked.

    Raises:
        ValueError: naming the table when a table is not a list of records at all.
    """
    problems: list[RecordProblem] = []
    out = {name: _records(name, table, problems) for name, table in tables.items()}
    index = {name: {r["token"]: r for r in recs} for name, recs in out.items()}
    aside: dict[str, set] = {}
    first: dict[tuple[str, str], RecordProblem] = {}  # (table, token) -> its first non-link problem
    for name in [*REFERENCES, *(t for t in out if t not in REFERENCES)]:
        for rec in out.get(name, []):
            for f, v, why in _field_problems(name, rec, index, aside):
                p = RecordProblem(name, rec["token"], f, v, why)
                problems.append(p)
                if f not in LINKS:
                    first.setdefault((name, rec["token"]), p)
                if f in INDEXED.get(name, ()):
                    aside.setdefault(name, set()).add(rec["token"])
    problems.extend(_map_links(out, aside))
    out = {name: [r for r in recs if r["token"] not in aside.get(name, ())] for name, recs in out.items()}
    blocked = _blocked(index, first)
    return Screened(out, [_attributed(p, index) for p in problems], blocked)


def _map_links(out: Mapping[str, list], aside: dict[str, set]) -> list[RecordProblem]:
    """The devkit links every log to a map: a map without a list of log tokens, and a log no
    map lists, are set aside (reported; the samples are still checked)."""
    listed, problems = set(), []
    for rec in out.get("map", []):
        logs = rec.get("log_tokens")
        if not isinstance(logs, list) or not all(isinstance(t, str) for t in logs):
            problems.append(RecordProblem("map", rec["token"], "log_tokens", logs, "must be a list of log tokens"))
            aside.setdefault("map", set()).add(rec["token"])
        else:
            listed.update(logs)
    if len(aside.get("map", ())) < len(out.get("map", [])):  # with no map left, the devkit refuses anyway
        for rec in out.get("log", []):
            if rec["token"] not in listed:
                problems.append(RecordProblem("log", rec["token"], "token", rec["token"], "no map lists this log"))
                aside.setdefault("log", set()).add(rec["token"])
    return problems


def _blocked(index: Mapping[str, Mapping[str, dict]], first: Mapping[tuple[str, str], RecordProblem]
             ) -> dict[str, RecordProblem]:
    """Sample token -> the problem that keeps it from being checked."""
    blocked = {token: p for (table, token), p in first.items() if table == "sample"}
    cs_index = index.get("calibrated_sensor", {})
    for sd in index.get("sample_data", {}).values():
        sample = sd.get("sample_token")
        if sd.get("is_key_frame") is not True or not isinstance(sample, str) or sample not in index.get("sample", {}):
            continue
        cs = cs_index.get(sd.get("calibrated_sensor_token")) if isinstance(sd.get("calibrated_sensor_token"),
                                                                            str) else None
        causes = (("sample_data", sd["token"]), ("calibrated_sensor", sd.get("calibrated_sensor_token")),
                  ("sensor", cs.get("sensor_token") if cs else None), ("ego_pose", sd.get("ego_pose_token")))
        cause = next((first[c] for c in causes if isinstance(c[1], str) and c in first), None)
        if cause is not None:
            blocked.setdefault(sample, cause)
    return blocked


def _attributed(p: RecordProblem, index: Mapping[str, Mapping[str, dict]]) -> RecordProblem:
    """``p`` with the sample and scene it concerns, where its record's references lead to one."""
    rec = index.get(p.table, {}).get(p.token) or {}
    sample = scene = None
    if p.table == "sample":
        sample = p.token
    elif p.table == "scene":
        scene = p.token
    elif p.table in ("sample_data", "sample_annotation") and isinstance(rec.get("sample_token"), str):
        sample = rec["sample_token"]
    if sample is not None and sample not in index.get("sample", {}):
        sample = None
    if sample is not None:
        s_scene = index["sample"][sample].get("scene_token")
        scene = s_scene if isinstance(s_scene, str) and s_scene in index.get("scene", {}) else None
    return RecordProblem(p.table, p.token, p.field, p.value, p.problem, sample, scene)


def follow(get: Callable[[str, str], dict], table: str, first: object, link: str, limit: int,
           start: tuple[str, str, str], stop: int | None = None) -> tuple[list[dict], RecordProblem | None]:
    """The records along ``link`` from ``first``, each at most once, and what ended the chain badly.

    Args:
        get: ``get(table, token) -> record`` (the devkit's ``nusc.get``; raises KeyError
            for a token not in the table).
        table: The table, e.g. ``"sample"``.
        first: The first token (``""`` or None: an empty chain; a record without the link
            field ends the chain too, the table screen reports it).
        link: The link field, e.g. ``"next"``.
        limit: Most records the chain may hold (the table's size: a longer one loops).
        start: ``(table, token, field)`` of the record and field ``first`` came from, e.g.
            ``("scene", "<token>", "first_sample_token")``.
        stop: Stop after this many records (None: follow to the end).

    Returns:
        ``(records, problem)``: the records in chain order up to the first bad link, and a
        :class:`RecordProblem` naming the record holding it, the field and the value (a
        token that is not a string or not in the table, a loop back to a record passed,
        a chain longer than ``limit``), or None when the chain ended with ``""``.
    """
    seen: dict[str, int] = {}
    records: list[dict] = []
    holder, token = start, first
    while token != "" and token is not None and (stop is None or len(records) < stop):  # "" (or no link) ends it
        bad = None
        if not isinstance(token, str):
            bad = "must be a token string"
        elif token in seen:
            bad = f"links back to the {table} record {len(seen) - seen[token]} steps before it: the chain loops"
        elif len(seen) >= limit:
            bad = f"the chain is longer than the {limit} records the {table} table holds"
        else:
            try:
                rec = get(table, token)
            except (KeyError, TypeError):
                bad = f"no such record in the {table} table"
        if bad is not None:
            return records, RecordProblem(holder[0], holder[1], holder[2], token, bad)
        seen[token] = len(seen)
        records.append(rec)
        holder, token = (table, token, link), rec.get(link)
    return records, None


def walk(get: Callable[[str, str], dict], table: str, first: object, link: str, limit: int,
         start: tuple[str, str, str], stop: int | None = None) -> list[dict]:
    """:func:`follow`, raising the problem's named error (field ``<table>.<field>``, the
    record's token and the value) instead of returning it."""
    records, problem = follow(get, table, first, link, limit, start, stop)
    if problem is not None:
        raise problem.error()
    return records
