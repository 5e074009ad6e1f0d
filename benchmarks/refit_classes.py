"""Refit some kernel classes of the shipped profiles, leaving every other class as it is.

Every kernel class is fitted on its own rows (:func:`mlacalc.timemodel.fit.fit_profile`), so a
change to one class's formula needs only that class refitted, in every profile that holds it,
on the same tables the profile was fitted on (its ``fitted_on`` devices and its engine). This
script does that and writes the classes (pooled, per device and their residuals) into the
profile files in place, merges the tables they were fitted on into ``fitted_on`` (a table the
profile had not listed is added) and restates the device figure notes (``"B200:
link_latency_s = ..."``) from the current catalogue; the rest of each file is unchanged.

    python benchmarks/refit_classes.py --classes 'attention_decode:*' [--profiles NAME,...]
        [--stage] [--dry-run] [--drop-unfitted] [--record-only] [--rescore]

``--classes``: comma-separated class keys or shell patterns (``moe:*``, ``gemm:fp8_block``).
``--profiles``: shipped profile names (default: every shipped profile). ``--stage``: also put,
for each profile, the committed file (``git show HEAD:``) with only these classes replaced into
git's index, so a commit takes these classes and no one else's uncommitted change to the file.
A class the profile's tables time only inside composite rows (vLLM's MLA) is refitted on
those rows' residuals, as ``mlacalc calibrate`` does; a class of a variant only composite rows
time (``observations.RESIDUAL_VARIANTS``: MiniMax-M3's block-sparse cores) the same way, its
kind's other classes kept, and put into a profile that lacks it with the note saying so. A
matching class no row of the tables times any more keeps its old values, or with
``--drop-unfitted`` is removed (a mapping that now runs those rows as another class: the
profile then looks the kernel up as any unfitted one).
``--record-only`` fits nothing: it gathers the same rows and writes only ``fitted_on`` and the
device figure notes (a record that an earlier refit left behind).
``--rescore`` fits nothing either: each class keeps its values (pooled and per device) and only
its ``residuals`` are scored anew on the rows it is fitted on, by the fit's own scoring (a class
whose parameters were fitted one at a time by hand, whose residuals are the earlier fit's).
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROFILES = ROOT / "mlacalc" / "data" / "profiles"
MEASURED = ROOT / "mlacalc" / "data" / "measured"


def _matches(key: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


def _residual_variant(key: str) -> bool:
    """A class of a kernel variant only composite rows time (MiniMax-M3's block-sparse cores)."""
    from mlacalc.measured.observations import RESIDUAL_VARIANTS

    return key.count(":") >= 2 and key.rsplit(":", 1)[1] in RESIDUAL_VARIANTS


def _noted(note: str) -> list[str]:
    """The classes a residual fit's note lists (the keys hold colons: the list ends at the
    note's own ": fitted on")."""
    return [k.strip() for k in note.split(": fitted on", 1)[0].split(",")]


def _variant_note(note: str) -> bool:
    """Whether ``note`` is the residual fit's note (:data:`RESIDUAL_NOTE`) of variant classes."""
    if not note.endswith(RESIDUAL_NOTE):
        return False
    return all(_residual_variant(k) for k in _noted(note))


#: the profile note naming classes fitted on composite rows' residuals (``mlacalc calibrate``'s)
RESIDUAL_NOTE = (
    "fitted on the residuals of composite rows (a row's time less this profile's prediction "
    "of its other kernels, where at least 25% of the row): no single-kernel table times "
    "these classes"
)


def _systems_of(devices: list[str]) -> list[Path]:
    from mlacalc.measured.tables import SYSTEM_DEVICES

    out = []
    for device in devices:
        found = [s for s, d in SYSTEM_DEVICES.items() if d == device and (MEASURED / s).is_dir()]
        if not found:
            raise SystemExit(f"refit_classes: no shipped measured set for device {device}")
        out.append(MEASURED / found[0])
    return out


def refit(
    name: str,
    patterns: list[str],
    use_scipy: bool = True,
    record_only: bool = False,
    start_current: bool = False,
    rescore: bool = False,
) -> dict:
    """The classes of profile ``name`` matching ``patterns``, refitted: a dict with ``classes``,
    ``devices`` and ``residuals`` holding only those classes, and ``fitted_on``, the record
    (:func:`mlacalc.timemodel.fit.fitted_record`) of the rows they were fitted on. With
    ``record_only`` nothing is fitted: only ``fitted_on`` is filled, from the same rows. With
    ``rescore`` nothing is fitted either: each class keeps the profile's values and its
    residuals are scored on the same rows (:func:`mlacalc.timemodel.fit.fit_profile`'s
    ``held``)."""
    from mlacalc.measured.calibrate import _mapped_of
    from mlacalc.measured.observations import (
        RESIDUAL_VARIANTS,
        observations_of,
        residual_observations,
    )
    from mlacalc.timemodel.engine_profiles import with_stand_ins
    from mlacalc.timemodel.fit import fit_profile, fitted_record
    from mlacalc.timemodel.observation_checks import usable_observations
    from mlacalc.timemodel.profile import DEFAULT_PROFILE, load_profile
    from mlacalc.timemodel.terms import class_key

    prof = load_profile(name)
    devices = [f["device"] for f in prof.fitted_on]
    paths = [str(p) for p in _systems_of(devices)]
    every = observations_of(paths, engine=prof.engine)
    obs = [
        o
        for o in every
        if _matches(class_key(o.batch.kind, o.batch.dtype, o.batch.variant), patterns)
    ]
    # (device, table) pairs where a class of the profile these patterns leave is fitted too
    shared = {
        (o.device, o.table)
        for o in every
        if not _matches(key := class_key(o.batch.kind, o.batch.dtype, o.batch.variant), patterns)
        and key in prof.classes
    }
    if record_only:  # the record of the profile's classes: rows of no class it holds are not
        obs = [
            o
            for o in obs
            if class_key(o.batch.kind, o.batch.dtype, o.batch.variant) in prof.classes
        ]
    fitted = {}
    # --start-current: each class's fit also starts from the profile's current values
    starts = dict(prof.classes) if start_current else None
    held = prof if rescore else None
    if obs:
        obs, _ = usable_observations(obs)
        if not record_only:
            fitted = fit_profile(
                obs, name=name, use_scipy=use_scipy, engine=prof.engine, starts=starts, held=held
            ).to_dict()
    direct = {class_key(o.batch.kind, o.batch.dtype, o.batch.variant) for o in obs}
    # classes the profile fitted on composite rows' residuals (its notes say which: vLLM's MLA)
    # are refitted the same way, their direct rows (if any now) pooled with the residuals
    noted = set()
    for note in prof.notes:
        if "fitted on the residuals of composite rows" in note:
            # "mla_decode:bf16, mla_prefill:bf16:FLASHMLA: fitted on the residuals ...": the
            # keys hold colons themselves, so the list ends at the note's own ": fitted"
            listed = note.split(": fitted on the residuals", 1)[0]
            noted |= {k.strip() for k in listed.split(",")}
    composite = sorted(k for k in prof.classes if _matches(k, patterns) and k in noted)
    composite += sorted(
        k for k in prof.classes if _matches(k, patterns) and k not in noted and k not in direct
    )
    # a variant only composite rows time (RESIDUAL_VARIANTS) is open on its own, its kind's
    # other classes kept, whether or not the profile holds it yet
    open_variants = any(p.endswith(tuple(f":{v}" for v in RESIDUAL_VARIANTS)) for p in patterns)
    used = obs
    if composite or open_variants:
        kinds = {k.split(":", 1)[0] for k in composite if not _residual_variant(k)}
        keep = {
            k: v
            for k, v in prof.classes.items()
            if k.split(":", 1)[0] not in kinds and k not in composite
        }
        base = dataclasses.replace(
            prof,
            classes=keep,
            devices={d: {k: v for k, v in t.items() if k in keep} for d, t in prof.devices.items()},
        )
        predictor = with_stand_ins(base, load_profile(DEFAULT_PROFILE))
        robs = [
            o for o in obs if class_key(o.batch.kind, o.batch.dtype, o.batch.variant) in composite
        ]
        for m in _mapped_of(paths, prof.engine):
            robs += residual_observations(m, predictor, set(keep))
            parts = {class_key(p.batch.kind, p.batch.dtype, p.batch.variant) for p in m.parts}
            if any(k in noted and k in prof.classes and not _matches(k, patterns) for k in parts):
                shared.add((m.table.device, m.table.table))
        robs = [
            o
            for o in robs
            if (key := class_key(o.batch.kind, o.batch.dtype, o.batch.variant)) in composite
            or (_residual_variant(key) and _matches(key, patterns))
        ]
        if robs:
            robs, _ = usable_observations(robs)
            done = {class_key(o.batch.kind, o.batch.dtype, o.batch.variant) for o in robs}
            keyed = [(class_key(o.batch.kind, o.batch.dtype, o.batch.variant), o) for o in obs]
            used = [o for k, o in keyed if k not in done] + robs
        if robs and not record_only:
            extra = fit_profile(
                robs, name=name, use_scipy=use_scipy, engine=prof.engine, starts=starts, held=held
            )
            extra_d = extra.to_dict()
            if not fitted:
                fitted = {"classes": {}, "devices": {}, "residuals": {}}
            for part in ("devices", "residuals"):
                for d in fitted[part]:
                    fitted[part][d] = {
                        k: v for k, v in fitted[part][d].items() if k not in extra_d["classes"]
                    }
            fitted["classes"].update(extra_d["classes"])
            fresh = sorted(k for k in extra_d["classes"] if _residual_variant(k))
            if fresh:
                fitted["note"] = f"{', '.join(fresh)}: {RESIDUAL_NOTE}"
            for part in ("devices", "residuals"):
                for d, t in extra_d[part].items():
                    fitted[part].setdefault(d, {}).update(t)
    return {
        "note": fitted.get("note", ""),
        "classes": fitted.get("classes", {}),
        "devices": fitted.get("devices", {}),
        "residuals": fitted.get("residuals", {}),
        "fitted_on": fitted_record(used),
        "shared": {d: sorted(t for e, t in shared if e == d) for d in {e for e, _ in shared}},
        "found": sorted({class_key(o.batch.kind, o.batch.dtype, o.batch.variant) for o in used}),
    }


def merged_record(
    old: list[dict],
    new: list[dict],
    every_class: bool = False,
    own: frozenset = frozenset(),
    shares: dict | None = None,
) -> list[dict]:
    """A profile's ``fitted_on`` with a refit's put in. ``tables`` counts, per table, the rows
    the profile's classes were fitted on, summed over its classes; a refit of some classes
    counts only theirs. So a table the record lacks is added with the refit's count (no other
    class was fitted on it); a table both hold keeps the larger count (the record's covers
    every class, the refit's only its own, unless the mapping now gives these classes alone
    more rows than the whole record held); where the refit covered ``every_class`` of the
    profile, its count replaces the record's, as it does on a device of ``own`` (where these
    classes alone were fitted on the refit's tables: :func:`own_devices`). Where ``shares``
    gives, for a device, each refit table's rows of these classes before the refit
    (:func:`old_shares`), the table's count is the record's less those plus the refit's: the
    other classes' rows kept, these classes' recounted. Sources are the union of both."""
    out = [
        {"device": e["device"], "tables": dict(e["tables"]), "sources": list(e["sources"])}
        for e in old
    ]
    by_device = {e["device"]: e for e in out}
    for e in new:
        mine = by_device.get(e["device"])
        if mine is None:
            mine = {"device": e["device"], "tables": {}, "sources": []}
            out.append(mine)
            by_device[e["device"]] = mine
        before = (shares or {}).get(e["device"])
        for table, rows in e["tables"].items():
            had = mine["tables"].get(table)
            alone = every_class or e["device"] in own
            if had is not None and not alone and before is not None:
                mine["tables"][table] = had - before.get(table, 0) + rows
            else:
                mine["tables"][table] = rows if had is None or alone else max(had, rows)
        mine["sources"] = sorted(set(mine["sources"]) | set(e["sources"]))
    return out


def own_devices(data: dict, new: dict, patterns: list[str]) -> frozenset:
    """The devices of profile ``data`` whose record of the refit's tables counts the rows of the
    classes matching ``patterns`` and no other class's (their residual rows sum to the record's
    count of those tables: composite module tables only these classes are fitted on), so the
    refit's counts replace the record's there."""
    out = set()
    for e in new.get("fitted_on", []):
        mine = next((f for f in data["fitted_on"] if f["device"] == e["device"]), None)
        residuals = data.get("residuals", {}).get(e["device"], {})
        rows = sum(r.get("rows", 0) for k, r in residuals.items() if _matches(k, patterns))
        if mine and rows and rows == sum(mine["tables"].get(t, 0) for t in e["tables"]):
            out.add(e["device"])
    return frozenset(out)


def old_shares(data: dict, new: dict, patterns: list[str]) -> dict:
    """Per device of ``new`` (:func:`refit`'s), each refit table's rows of the classes matching
    ``patterns`` in profile ``data``'s record, where the record pins them: a table no other
    class of the profile is fitted on (``new["shared"]`` lacks it) holds only theirs, and one
    shared table holds the rest of their rows (their residual rows less the other tables'). A
    device whose refit tables share more than one table with other classes, or whose shares do
    not add up, is left out (its counts then merge as :func:`merged_record` says without)."""
    out = {}
    for e in new.get("fitted_on", []):
        device = e["device"]
        mine = next((f for f in data["fitted_on"] if f["device"] == device), None)
        if mine is None:
            continue
        residuals = data.get("residuals", {}).get(device, {})
        rows = sum(r.get("rows", 0) for k, r in residuals.items() if _matches(k, patterns))
        had = {t: mine["tables"][t] for t in e["tables"] if t in mine["tables"]}
        shared = [t for t in had if t in new.get("shared", {}).get(device, ())]
        if len(shared) > 1:
            continue
        share = {t: n for t, n in had.items() if t not in shared}
        rest = rows - sum(share.values())
        if shared:
            share[shared[0]] = rest
        elif rest != 0:
            continue  # the classes' rows were counted on tables the refit no longer finds
        if all(0 <= share[t] <= had[t] for t in share):
            out[device] = share
    return out


def refreshed_notes(notes: list[str], devices: list[str]) -> list[str]:
    """``notes`` with each device's figure notes (``"<device>: <figure> = ..."``, written by
    :func:`mlacalc.timemodel.fit.fallback_notes` at fit time) replaced by the current ones: a
    figure the catalogue now gives is no longer noted, a changed assumption is restated. The
    current notes take the place of the device's first old one (else go first)."""
    from mlacalc.timemodel.device import DeviceFigures
    from mlacalc.timemodel.fit import fallback_notes

    figures = [f.name for f in dataclasses.fields(DeviceFigures)]
    out = list(notes)
    for device in devices:
        stale = tuple(f"{device}: {figure} = " for figure in figures)
        at = next((i for i, n in enumerate(out) if n.startswith(stale)), 0)
        head = [n for n in out[:at] if not n.startswith(stale)]
        tail = [n for n in out[at:] if not n.startswith(stale)]
        out = head + fallback_notes(device) + tail
    return out


def merged(text: str, new: dict, patterns: list[str]) -> str:
    """A profile file's text with the classes of ``new`` put in (a class matching ``patterns``
    that the refit no longer finds keeps its old values, :func:`main` names it; where
    ``new["drop"]`` is true such classes are removed), its ``fitted_on`` merged in
    (:func:`merged_record`) and the device figure notes made current (:func:`refreshed_notes`).
    Where ``new["record_only"]`` is true, the classes are left as they are; where
    ``new["rescore"]`` is, only the classes' ``residuals`` are put in (the values, the record
    and the notes as they are)."""
    data = json.loads(text)
    if new.get("rescore"):
        for device, table in data.get("residuals", {}).items():
            fresh = {k: v for k, v in new["residuals"].get(device, {}).items() if k in table}
            data["residuals"][device] = {k: fresh.get(k, v) for k, v in table.items()}
        return json.dumps(data, indent=1, sort_keys=False) + "\n"
    every = all(_matches(k, patterns) for k in data["classes"])
    own = new.get("own", own_devices(data, new, patterns))
    # (a record-only pass mends a record the residuals have outrun: theirs cannot pin it)
    shares = {} if new.get("record_only") else new.get("shares", old_shares(data, new, patterns))
    data["fitted_on"] = merged_record(
        data["fitted_on"], new.get("fitted_on", []), every, own, shares
    )
    data["notes"] = refreshed_notes(data["notes"], [e["device"] for e in data["fitted_on"]])
    # the residual fit's note of variant classes: one note, in place of the earlier ones
    earlier = [n for n in data["notes"] if _variant_note(n)] if new.get("note") else []
    if new.get("note"):
        data["notes"] = [n for n in data["notes"] if n not in earlier]
    if new.get("record_only"):
        return json.dumps(data, indent=1, sort_keys=False) + "\n"
    drop = set()
    if new.get("drop"):
        drop = {k for k in data["classes"] if _matches(k, patterns) and k not in new["classes"]}

    def replace(table: dict, fresh: dict) -> dict:
        # a class keeps its place in the file; a new one goes at the end
        out = {k: fresh.get(k, v) for k, v in table.items() if k not in drop}
        out.update({k: v for k, v in fresh.items() if k not in out})
        return out

    data["classes"] = replace(data["classes"], new["classes"])
    for part in ("devices", "residuals"):
        for device, table in data.get(part, {}).items():
            data[part][device] = replace(table, new[part].get(device, {}))
    if new.get("note"):  # the refitted classes', and those of the earlier notes still held
        kept = {k for n in earlier for k in _noted(n) if k in data["classes"]}
        keys = sorted(kept | set(_noted(new["note"])))
        data["notes"].append(f"{', '.join(keys)}: {RESIDUAL_NOTE}")
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


def stand_in_classes(notes: list[str]) -> set[str]:
    """The classes ``notes`` mark as stand-ins (``"stand-in: <key> from ..."``, written by
    :mod:`mlacalc.timemodel.engine_profiles`): another profile's class lent where the profile's
    own tables time none. A refit would replace it with a fit of whatever rows map to it."""
    from mlacalc.timemodel.engine_profiles import STAND_IN_NOTE

    return {
        n[len(STAND_IN_NOTE) :].split(" from ", 1)[0].strip()
        for n in notes
        if n.startswith(STAND_IN_NOTE) and " from " in n
    }


def without_classes(new: dict, keys: set[str]) -> dict:
    """``new`` (:func:`refit`'s) without the classes ``keys``, pooled, per device and their
    residuals."""
    out = dict(new)
    out["classes"] = {k: v for k, v in new["classes"].items() if k not in keys}
    for part in ("devices", "residuals"):
        out[part] = {d: {k: v for k, v in t.items() if k not in keys} for d, t in new[part].items()}
    return out


def _head_text(path: Path) -> str | None:
    """The committed text of ``path`` (None where it is not committed)."""
    rel = path.relative_to(ROOT).as_posix()
    out = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def _stage(path: Path, new: dict, patterns: list[str]) -> None:
    rel = path.relative_to(ROOT).as_posix()
    head = subprocess.run(
        ["git", "show", f"HEAD:{rel}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=ROOT,
        input=merged(head, new, patterns),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run(
        ["git", "update-index", "--cacheinfo", f"100644,{blob},{rel}"], cwd=ROOT, check=True
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", required=True, help="class keys or patterns, comma-separated")
    ap.add_argument("--profiles", default="", help="profile names, comma-separated (default all)")
    ap.add_argument("--stage", action="store_true", help="stage HEAD's files + these classes")
    ap.add_argument("--dry-run", action="store_true", help="print the refits, write nothing")
    ap.add_argument(
        "--record-only",
        action="store_true",
        help="fit nothing: merge only the tables these classes are fitted on into fitted_on "
        "and make the device figure notes current",
    )
    ap.add_argument(
        "--start-current",
        action="store_true",
        help="start each class's fit from the profile's current values too (besides the "
        "defaults and the middle of the ranges): the best of the three is kept",
    )
    ap.add_argument(
        "--rescore",
        action="store_true",
        help="fit nothing: score the classes' current values on the rows they are fitted on "
        "and write their residuals (a class whose parameters were set one at a time)",
    )
    ap.add_argument(
        "--drop-unfitted",
        action="store_true",
        help="remove matching classes that no row times any more (default: keep old values)",
    )
    args = ap.parse_args(argv)
    from mlacalc.timemodel.profile import load_profile, shipped_profiles

    patterns = [p.strip() for p in args.classes.split(",") if p.strip()]
    names = [p.strip() for p in args.profiles.split(",") if p.strip()] or shipped_profiles()
    for name in names:
        path = PROFILES / f"{name}.json"
        if not path.is_file():
            print(f"refit_classes: no shipped profile {name!r}", file=sys.stderr)
            return 2
        t0 = time.time()
        new = refit(
            name,
            patterns,
            record_only=args.record_only,
            start_current=args.start_current,
            rescore=args.rescore,
        )
        lent = stand_in_classes(load_profile(name).notes) & set(new["classes"])
        if lent:  # a stand-in stays what it was lent as: its notes say where it came from
            print(f"  kept (stand-ins, not refitted): {sorted(lent)}")
            new = without_classes(new, lent)
        new["record_only"] = args.record_only
        new["rescore"] = args.rescore
        keys = sorted(new["classes"])
        if args.record_only:
            print(f"{name}: rows of {new['found']} gathered in {time.time() - t0:.0f} s")
        else:
            print(
                f"{name}: {len(keys)} class(es) {'rescored' if args.rescore else 'refitted'} "
                f"in {time.time() - t0:.0f} s: {keys}"
            )
        for e in new["fitted_on"]:
            print(f"  {e['device']} fitted on: {e['tables']}")
        for device, table in new["residuals"].items():
            for k in keys:
                r = table.get(k)
                if r:
                    print(
                        f"  {device} {k}: rows {r['rows']}, median "
                        f"{r['median_abs_error']:.1%}, p90 {r['p90_abs_error']:.1%}"
                    )
        old = load_profile(name)
        for device, table in new["residuals"].items() if args.rescore else ():
            had = old.residuals.get(device, {})
            moved = {k: (had[k]["rows"], r["rows"]) for k, r in table.items() if k in had}
            moved = {k: v for k, v in moved.items() if v[0] != v[1]}
            if moved:  # fitted_on is left as it is: its per-table counts are the user's to mend
                print(f"  {device} rows scored differ from the record's (before, now): {moved}")
        kept = sorted(k for k in old.classes if _matches(k, patterns) and k not in new["found"])
        new["drop"] = args.drop_unfitted
        if kept and args.drop_unfitted:
            print(f"  removed (no rows found): {kept}")
        elif kept:
            print(f"  not refitted (no rows found; old values kept): {kept}")
        if args.dry_run or not (keys or (args.record_only and new["fitted_on"])):
            continue
        head = _head_text(path)
        if head is not None:  # judged on the committed file, whose record matches its classes
            new["own"] = own_devices(json.loads(head), new, patterns)
            if not args.record_only:
                new["shares"] = old_shares(json.loads(head), new, patterns)
        path.write_text(merged(path.read_text(encoding="utf-8"), new, patterns), encoding="utf-8")
        if args.stage:
            _stage(path, new, patterns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
