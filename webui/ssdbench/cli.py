"""The ssdbench command: a thin layer over the engine. Errors are one line, never a traceback."""

import argparse
import functools
import json
import os
import shutil
import signal
import sqlite3
import sys
import time

from . import __version__
from .appliance import access, console, logs, unattended
from .drives import discovery
from .errors import SsdbenchError
from .human import clock, figure, printable, run_name, size
from .lab import access as lab_access
from .lab import audit as lab_audit
from .lab import cluster as lab_cluster
from .lab import index as lab_index
from .lab import receive as lab_receive
from .lab import schema as lab_schema
from .results import bundle, document, offline_report, repeatability, store, upload, usbexport
from .run import handoff, host_cost, plan, queue, repeat, runner, space, workload
from .suites import locked, user_traces
from .system import clock as wall_clock
from .system import settings, tls

DEFAULT_DATA_DIR = "/var/lib/ssdbench"
EXIT_ERROR = 2


def data_dir(args):
    return args.data_dir or os.environ.get("SSDBENCH_DATA") or DEFAULT_DATA_DIR


def out_json(data):
    json.dump(data, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


def cmd_drives(args):
    found = discovery.discover(named=args.devices, allow_usb=args.allow_usb)
    if args.json:
        return out_json(found)
    if not found:
        print("no SATA or NVMe drives found")
    for d in found:
        verdict = "ELIGIBLE" if d["eligible"] else "not eligible"
        link = (d["link"] or {}).get("generation") or (d["link"] or {}).get("speed") or "-"
        print(
            printable(
                f"{d['path']:<14} {d['transport']:<6} {d.get('model') or '-'} (serial {d.get('serial') or '-'}, "
                f"fw {d.get('firmware') or '-'}) {size(d['capacity_bytes'])}, link {link}"
            )
        )
        print(f"{'':<14} {verdict}: {d['reason']}; confirm with --confirm {d['confirm_id']}")
        for note in d["notes"]:
            print(f"{'':<14} note: {note}")


def suite_steps(s):
    """Each step with its fio parameters as the suite declares them (spans before resolution)."""
    out = []
    for step in s.steps:
        entry = {
            "id": step["id"],
            "kind": step["kind"],
            "title": step["title"],
            "cooldown": step["cooldown"],
            "jobs": plan.declared_jobs(step),
        }
        if step.get("note"):
            entry["note"] = step["note"]
        out.append(entry)
    return out


def cmd_suites(args):
    if args.action == "list":
        rows = [locked.summary(locked.load(n)) for n in locked.names()]
        if args.json:
            return out_json(rows)
        for r in rows:
            print(f"{r['name']:<10} v{r['version']}  {r['steps']:>3} steps  {r['sha256'][:16]}  {r['title']}")
        return None
    s = workload.verified(locked.load(args.name))
    data = {
        **locked.summary(s),
        "workload_sha256": s.workload_sha256,
        "fio_global": s.data.get("fio", {}),
        "steps": suite_steps(s),
    }
    if args.json:
        return out_json(data)
    print(f"{s.name} v{s.data['version']}: {s.data['title']}\nsha256 {s.sha256}\nworkload sha256 {s.workload_sha256}")
    t = data["repeat"]
    print(
        f"repeat sets flag a headline figure whose CoV is above {t['cov_percent']}% "
        f"({t['qd1_latency_cov_percent']}% for a latency at QD1)"
    )
    print(
        f"a step that idles first idles {locked.idle_seconds(s.data)} s, whatever the drive's temperature, as does "
        "each run of a repeat set after the first"
    )
    for step in data["steps"]:
        idle = "idles first" if step["cooldown"] else "no idle"
        print(f"  {step['id']:<24} {step['kind']:<6} {idle:<11} {step['title']}")
        for job in step["jobs"]:
            params = " ".join(
                f"{k}={job[k]}" for k in ("rw", "bs", "iodepth", "numjobs", "runtime", "data") if job.get(k) is not None
            )
            print(f"  {'':<24} {'':<6} {'':<11}   {job['name']}: {params}")
    return None


def cmd_plan(args):
    s = locked.load(args.suite)
    steps = plan.compile_plan(s, args.capacity, args.logical_block)
    total = plan.estimate_seconds(steps) + host_cost.seconds(steps, handoff.native())
    room = space.needed_bytes(steps)
    if args.json:
        return out_json(
            {
                "suite": s.name,
                "sha256": s.sha256,
                "capacity_bytes": args.capacity,
                "logical_block_bytes": args.logical_block,
                "estimate_s": total,
                "room_needed_bytes": room,
                "steps": [st.to_dict() for st in steps],
            }
        )
    for st in steps:
        print(f"{st.index + 1:>3}. {st.id:<22} {clock(st.estimate_s)}  {st.title}")
        for note in plan.adaptation_notes(st.adapted):
            print(f"{'':<5}{'':<22} adapted to {args.logical_block} B logical blocks: {note}")
    print(f"estimated total: {clock(total)} on a {size(args.capacity)} drive")
    print(f"room for its results: {size(room)} free in the data folder")
    return None


# On a pipe or a log file (the runner service's log, CI), a line redrawn once a second would be thousands
# of lines: there, a line when a step starts and at most one progress line every LOG_PROGRESS_S.
LOG_PROGRESS_S = 10


def progress_printer(suite, stream):
    """The on_progress of a run in the foreground: one line redrawn on a terminal, a readable log elsewhere."""
    on_terminal = stream.isatty()
    last = {"at": 0.0, "step": None}

    def show(idx, count, percent, eta, iops, bw):
        now = time.monotonic()
        new_step = idx != last["step"]
        if now - last["at"] < (1.0 if on_terminal else LOG_PROGRESS_S) and not new_step:
            return
        last["at"], last["step"] = now, idx
        step = f"step {min(idx + 1, count)}/{count} {suite.steps[idx]['id'] if idx < count else 'done'}"
        rate = f"{iops:,.0f} IOPS {bw / 1e6:,.1f} MB/s" if iops is not None else ""
        line = f"{step:<36} {percent:5.1f}%  ETA {clock(eta)}  {rate}"
        if on_terminal:
            print(f"\r{line:<80}", end="", file=stream, flush=True)
        else:
            print(line.rstrip(), file=stream, flush=True)

    return show


def cmd_run(args):
    if args.trace:
        s = user_traces.suite(data_dir(args), args.trace)
    else:
        s = locked.load(args.suite, path=args.suite_file, allow_non_standard=args.non_standard)
    s = workload.verified(s, allow_non_standard=args.non_standard)
    run_id, state, error = runner.run_in_foreground(
        data_dir(args),
        s,
        args.drive,
        args.confirm,
        destroy_data=args.destroy_data,
        allow_usb=args.allow_usb,
        on_progress=progress_printer(s, sys.stderr),
        resume=args.resume,
    )
    if sys.stderr.isatty():
        print(file=sys.stderr)  # past the redrawn line
    print(f"run {run_id}: {state}" + (f": {error}" if error else ""))
    return 0 if state == "done" else 1


def cmd_repeat(args):
    s = locked.load(args.suite, path=args.suite_file, allow_non_standard=args.non_standard)
    s = workload.verified(s, allow_non_standard=args.non_standard)
    show_progress = progress_printer(s, sys.stderr)

    def on_run(position, run_id):
        if sys.stderr.isatty():
            print(file=sys.stderr)  # past the redrawn line
        print(f"run {position} of {args.times}: run {run_id}", file=sys.stderr, flush=True)

    repeat_id, state, error = repeat.run_in_foreground(
        data_dir(args),
        s,
        args.times,
        args.drive,
        args.confirm,
        destroy_data=args.destroy_data,
        allow_usb=args.allow_usb,
        on_progress=show_progress,
        on_run=on_run,
    )
    if sys.stderr.isatty():
        print(file=sys.stderr)
    summary = repeatability.summary(store.connect(data_dir(args)), repeat_id)
    if args.json:
        out_json(summary)
    else:
        print_summary(summary)
    return 0 if state == "done" else 1


def print_summary(summary):
    """A repeat set's summary as a table: a line per headline figure, FLAG where its CoV passes its threshold."""
    t = summary["thresholds"]
    runs = ", ".join(f"{r['id']} {r['state']}" for r in summary["runs"])
    print(
        printable(
            f"repeat set {summary['id']}: {summary['state']}, suite {summary['suite']} ({summary['suite_hash'][:16]}), "
            f"drive {summary['drive']['path']} {summary['drive'].get('model') or ''}"
        )
    )
    if summary["error"]:
        print(f"error: {summary['error']}")
    print(f"runs ({len(summary['runs'])} of {summary['times']}): {runs or 'none'}")
    print(
        f"counted: the {len(summary['counted'])} runs that ended done; a figure is flagged when its CoV is above "
        f"{t['cov_percent']}% ({t['qd1_latency_cov_percent']}% for a latency at QD1)"
    )
    print(f"{'figure':<44} {'unit':<6} {'n':>2} {'mean':>12} {'stdev':>12} {'CoV %':>7} {'min':>12} {'max':>12}")
    for f in summary["figures"]:
        cov = "–" if f["cov_percent"] is None else f"{f['cov_percent']:.2f}"
        values = [f"{figure(f[k]):>12}" for k in ("mean", "stdev")] + [f"{cov:>7}"]
        values += [f"{figure(f[k]):>12}" for k in ("min", "max")]
        flag = f"  FLAG (above {f['threshold_percent']}%)" if f["flagged"] else ""
        print(printable(f"{f['key']:<44} {f['unit']:<6} {f['n']:>2} {' '.join(values)}{flag}"))
    print(f"{summary['flagged']} of {len(summary['figures'])} headline figures flagged")


def listed_at(row):
    """When a listed run or repeat set was made, to the minute, in UTC (the listing adds the Z)."""
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(row["created_at"]))


def cmd_repeats(args):
    db = store.connect(data_dir(args))
    if args.set is not None:
        summary = repeatability.summary(db, args.set)
        if summary is None:
            raise SsdbenchError(f"no repeat set {args.set}")
        if args.json:
            return out_json(summary)
        return print_summary(summary)
    rows = store.list_repeats(db)
    if args.json:
        return out_json(rows)
    for r in rows:
        when = listed_at(r)
        print(
            printable(
                f"{r['id']:>4}  {when}Z  {r['state']:<11} {r['suite']:<9} x{r['times']:<3} {r['runs']} runs  "
                f"{r['path']} {r['model'] or ''} {r['serial'] or ''}"
            )
        )


def trace_line(e):
    s = e["stats"]
    return printable(
        f"{e['name']:<20} {e['format']:<18} {s['reads']:>9,} reads {s['writes']:>9,} writes  "
        f"{size(s['bytes_read'])} read, {size(s['bytes_written'])} written, {s['segments']} segments, "
        f"footprint {size(s['footprint_bytes'])}, sha256 {e['sha256'][:16]}  (from {e['source']})"
    )


def cmd_trace(args):
    if args.action == "list":
        found, problems = user_traces.entries(data_dir(args))
        for problem in problems:
            print(f"ssdbench: {problem}", file=sys.stderr)
        if args.json:
            return out_json(found)
        if not found:
            print("no imported traces; import one with `ssdbench trace import FILE --format FORMAT`")
        for e in found:
            print(trace_line(e))
        return None
    e = user_traces.import_file(data_dir(args), args.file, args.format, name=args.name, qd=args.qd)
    if args.json:
        return out_json(e)
    print(trace_line(e))
    print(f"play it with: ssdbench run --trace {e['name']} --drive DEV --confirm ID (a non-standard run)")
    return None


def cmd_runs(args):
    rows = store.list_runs(store.connect(data_dir(args)))
    if args.json:
        return out_json(rows)
    for r in rows:
        when = listed_at(r)
        print(
            printable(
                f"{r['id']:>4}  {when}Z  {r['state']:<11} {r['suite']:<9} {r['path']} "
                f"{r['model'] or ''} {r['serial'] or ''}" + ("" if r["standard"] else "  [non-standard]")
            )
        )
    return None


def cmd_show(args):
    run = store.get_run(store.connect(data_dir(args)), args.run)
    if run is None:
        raise SsdbenchError(f"no run {args.run}")
    if args.json:
        return out_json(run)
    print(
        printable(
            f"run {run['id']}: {run['state']}, suite {run['suite']} ({run['suite_hash'][:16]}), "
            f"drive {run['drive']['path']} {run['drive'].get('model') or ''}"
        )
    )
    if run["error"]:
        print(f"error: {run['error']}")
    for step in run["steps"]:
        print(
            f"  {step['idx'] + 1:>2}. {step['key']:<20} {step['state']}"
            + (f": {step['error']}" if step["error"] else "")
        )
        for m in step["metrics"]:
            if m["name"].split(".")[-1] in ("iops", "bw", "lat_mean", "lat_max"):
                print(f"        {m['name']:<22} {m['value']:>16,.1f} {m['unit']}")
    return None


def cmd_cancel(args):
    print(f"asked {runner.cancel(data_dir(args))} to stop")


def cmd_delete(args):
    """A run gone with its folder, as History's Delete: only with --yes, else it says which run would go."""
    db = store.connect(data_dir(args))
    run = store.get_run(db, args.run)
    if run is None:
        raise SsdbenchError(f"no run {args.run}")
    if not args.yes:
        print(printable(f"would delete {run_name(run)}, and its folder: nothing deleted"))
        print(f"to delete it: ssdbench delete {args.run} --yes", file=sys.stderr)
        return EXIT_ERROR
    store.delete_run(db, data_dir(args), args.run)  # refused (RunBusy) while it runs or is being exported
    print(printable(f"deleted {run_name(run)}, and its folder"))
    return 0


def cmd_web(args):
    try:
        from waitress import serve

        from .web import SERVER_LIMITS, create_app
    except ImportError as exc:
        raise SsdbenchError(
            f"the web UI needs flask and waitress ({exc}); install them with pip install 'ssdbench[web]'"
        ) from exc
    app = create_app(
        {
            "SSDBENCH_DATA_DIR": data_dir(args),
            "SSDBENCH_EXTRA_DRIVES": args.drives,
            "SSDBENCH_EXTRA_STICKS": args.sticks,
            "SSDBENCH_ALLOW_USB": args.allow_usb,
        }
    )
    print(f"ssdbench web: http://{args.host}:{args.port}/ (the login PIN: ssdbench pin)", file=sys.stderr, flush=True)
    serve(app, host=args.host, port=args.port, **SERVER_LIMITS)


def cmd_runner(args):
    hooks, when_idle = [], None
    if args.auto_export:
        hooks.append(functools.partial(usbexport.export_ended_run, beside=logs.beside_bundles))
    if args.upload_to:
        lab = upload.Queue(args.upload_to, upload.token(), args.insecure, cafile=args.lab_ca)
        hooks.append(lab.after_run)
        when_idle = lab.drain

    def after_run(db, data_dir, run_id, log):
        for hook in hooks:
            hook(db, data_dir, run_id, log)

    queue.serve(data_dir(args), after_run=after_run if hooks else None, when_idle=when_idle)


def cmd_upload(args):
    upload.lab_url(args.to, args.insecure)
    secret = upload.token(args.token, args.token_file)
    failed = 0
    for path in args.bundles:
        try:
            answer = upload.send_retrying(
                path,
                args.to,
                secret,
                args.attempts,
                args.insecure,
                log=lambda text: print(text, file=sys.stderr, flush=True),
                cafile=args.lab_ca,
            )
        except SsdbenchError as exc:
            print(f"FAILED {path}: {exc}", file=sys.stderr)
            failed += 1
            continue
        runs = ", ".join(map(str, answer["runs"]))
        done = "stored" if answer["stored"] else "already in the lab"
        print(f"{path}: {done} as lab run {runs} (sha256 {answer['sha256']})")
    return EXIT_ERROR if failed else 0


def lab_connect(args, current=True):
    conn = lab_schema.connect(lab_schema.url(args.db))
    if current:
        lab_schema.check_current(conn)
    return conn


def cmd_lab(args):
    try:
        return LAB_ACTIONS[args.action](args)
    except lab_schema.database_error() as exc:
        if isinstance(exc, SsdbenchError):
            raise
        raise SsdbenchError(f"the lab's database failed: {str(exc).strip().splitlines()[0]}") from exc


def lab_migrate(args):
    conn = lab_connect(args, current=False)
    applied = lab_schema.migrate(conn)
    version = lab_schema.version(conn)
    if applied:
        audited(conn, "migrate", f"schema versions {', '.join(map(str, applied))}")
    print(
        f"applied {', '.join(map(str, applied))}: schema version {version}"
        if applied
        else f"schema version {version}, current",
        flush=True,
    )
    if args.store:
        return fill_cards(conn, args.store)
    if conn.execute("SELECT 1 FROM runs WHERE card IS NULL LIMIT 1").fetchone():
        print("some runs have no card yet: ssdbench lab migrate --store DIR makes them", file=sys.stderr)
    return 0


def fill_cards(conn, store_dir):
    """The cards an upgrade made or emptied, from the store, in committed batches while the servers serve; each run
    that cannot have one named, and the exit status 2 for it."""
    filled, skipped = lab_index.fill_cards(conn, store_dir, lambda said: print(said, file=sys.stderr, flush=True))
    if filled:
        print(f"{filled} runs got their cards")
    for run_id, why in skipped:
        print(f"run {run_id}: no card, {why}: it shows as being indexed; restore its bundle, migrate again")
    return EXIT_ERROR if skipped else 0


def lab_serve(args):
    try:
        from .web import create_app, lab_server
    except ImportError as exc:
        raise SsdbenchError(
            f"the lab needs flask, gunicorn and psycopg ({exc}); install them with pip install 'ssdbench[lab]'"
        ) from exc
    behind_proxy = getattr(args, "behind_proxy", None)
    if not behind_proxy and not upload.loopback(args.host):
        # Its own deadlines bound what one client costs it, but the proxy is what sets a connection limit per
        # client, terminates TLS and buffers what the network sends: docs/lab.md, In production.
        raise SsdbenchError(
            f"--host {args.host}: a lab listens on the network only behind a reverse proxy (docs/lab.md, In "
            "production): listen on 127.0.0.1 for the proxy and add --behind-proxy ITS_ADDRESS"
        )
    try:
        behind = lab_server.proxies(behind_proxy) if behind_proxy else []
    except ValueError as exc:
        raise SsdbenchError(f"--behind-proxy {exc}") from exc
    os.makedirs(args.store, exist_ok=True)
    app = create_app(
        {
            "SSDBENCH_LAB_DB": lab_schema.url(args.db),
            "SSDBENCH_LAB_STORE": args.store,
            # unset: web.READ_BYTES, the one default
            "SSDBENCH_LAB_READ_BYTES": int(args.read_mib * (1 << 20)) if args.read_mib else None,
        }
    )
    print(
        f"ssdbench lab: http://{args.host}:{args.port}/ (log in as a user of `ssdbench lab user add`)",
        file=sys.stderr,
        flush=True,
    )
    lab_server.serve(app, args.host, args.port, args.access_log, behind)


def lab_local(args):
    """A whole lab on this machine: its own PostgreSQL in the folder (made on first use), migrated, a first user,
    then the server, until Ctrl-C, which stops the PostgreSQL too."""
    pg = lab_cluster.Cluster(args.folder)
    pg.start()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a kill stops the PostgreSQL too, as Ctrl-C does
    try:
        args.db = pg.create("lab")
        lab_schema.migrate(lab_connect(args, current=False))
        conn = lab_connect(args)
        args.store = os.path.join(args.folder, "store")
        fill_cards(conn, args.store)
        if not lab_access.list_users(conn):
            print(f"user admin, password {lab_access.add_user(conn, 'admin')}", flush=True)
        print(f"database {args.db}", flush=True)
        lab_serve(args)
    finally:
        pg.stop()


def lab_runs(args):
    rows = lab_index.list_runs(lab_connect(args))  # streamed: a lab of a million runs is never held whole
    if args.json:
        sys.stdout.write("[")
        for n, row in enumerate(rows):
            sys.stdout.write(("," if n else "") + "\n" + json.dumps(row, indent=1, ensure_ascii=False))
        sys.stdout.write("\n]\n")
        return None
    for r in rows:
        print(
            printable(
                f"{r['id']:>5}  {listed_at(r)}Z  {r['state']:<11} {r['suite']:<9} {r['model'] or '-'} "
                f"{r['serial'] or '-'}  from {r['appliance']} ({r['host']}, run {r['source_id']})"
                + ("" if r["standard"] else "  [non-standard]")
            )
        )
    return None


def audited(conn, action, subject, outcome="done"):
    """An operator's command that changed the lab, in its audit log."""
    lab_audit.record(conn, lab_audit.operator(), action, outcome, subject)


def lab_token(args):
    conn = lab_connect(args)
    if args.verb == "add":
        token = lab_access.add_token(conn, args.name)
        audited(conn, "token add", args.name)
        print(token)
    elif args.verb == "revoke":
        lab_access.revoke_token(conn, args.name)
        audited(conn, "token revoke", args.name)
        print(f"{args.name}: token revoked; its uploads are refused from now on")
    elif args.verb in ("trust", "distrust"):
        models = lab_index.trust(conn, args.name, args.verb == "trust")
        audited(conn, f"token {args.verb}", args.name)
        shown = "shows" if args.verb == "trust" else "no longer shows"
        print(f"{args.name}: the bench {shown} its runs; {len(models)} models picked again; History lists them all")
    else:
        for t in lab_access.list_tokens(conn):
            state = f"revoked {when_utc(t['revoked_at'])}" if t["revoked_at"] else "valid"
            trust = "trusted" if t["trusted"] else "untrusted"
            line = f"{t['name']:<24} {state:<28} {trust:<9} since {when_utc(t['created_at'])}, {t['bundles']} bundles"
            print(printable(line))


def lab_user(args):
    conn = lab_connect(args)
    if args.verb == "add":
        password = lab_access.add_user(conn, args.name)
        audited(conn, "user add", args.name)
        print(password)
    elif args.verb == "remove":
        lab_access.remove_user(conn, args.name)
        audited(conn, "user remove", args.name)
        print(f"{args.name}: removed; their sessions have ended")
    else:
        for u in lab_access.list_users(conn):
            print(printable(f"{u['name']:<24} since {when_utc(u['created_at'])}"))


def lab_sweep(args):
    conn = lab_connect(args)
    seen, stray = lab_receive.sweep_store(conn, args.store, args.quarantine)
    for sha256 in stray:
        print(sha256)
    done = f"moved to {os.path.join(args.store, 'quarantine')}" if args.quarantine else "left as they are"
    if args.quarantine:
        audited(conn, "sweep --quarantine", f"{len(stray)} files moved aside")
    print(f"{seen} bundle files in {args.store}: {len(stray)} without their row in the database, {done}")
    if stray and not args.quarantine:
        print("after a restore of the database, `ssdbench lab reindex` gives them their rows back", file=sys.stderr)


def lab_reindex(args):
    conn = lab_connect(args)
    made, refused = lab_receive.reindex(conn, args.store, args.appliance)
    audited(conn, "reindex", f"{len(made)} runs indexed as sent by {args.appliance}", f"{len(refused)} files refused")
    for sha256, why in refused:
        print(printable(f"{sha256}: not indexed: {why}"), file=sys.stderr)
    print(f"indexed {len(made)} runs" + (f" (lab runs {', '.join(map(str, made))})" if made else ""))
    return EXIT_ERROR if refused else 0


def lab_remove(args):
    """A run gone from the lab with its bundle (and the bundle's other runs: a bundle is kept whole, as its hashes
    cover it); its models' bench rows picked again from the runs left. Only with --yes."""
    conn = lab_connect(args)
    held = lab_index.bundle_holding(conn, args.run)
    if held is None:
        raise SsdbenchError(f"no run {args.run} in the lab")
    sha256, runs = held
    if not args.yes:
        print(f"would remove bundle {sha256}, with lab runs {', '.join(map(str, runs))}: nothing removed")
        print(f"to remove them: ssdbench lab remove {args.run} --yes", file=sys.stderr)
        return EXIT_ERROR
    removed = lab_receive.remove(conn, args.store, sha256)
    subject = f"bundle {sha256}, runs {', '.join(map(str, removed))}"
    audited(conn, "remove", subject)
    print(f"removed {subject}")
    return 0


def lab_audit_log(args):
    rows = lab_audit.entries(lab_connect(args), args.limit)
    if args.json:
        return out_json(rows)
    for r in rows:
        where = f" from {r['address']}" if r["address"] else ""
        about = f" {r['subject']}" if r["subject"] else ""
        print(printable(f"{when_utc(r['at'])} {r['actor']}{where}: {r['action']}{about}: {r['outcome']}"))
    return None


def when_utc(seconds):
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(seconds)) + "Z"


LAB_ACTIONS = {
    "migrate": lab_migrate,
    "serve": lab_serve,
    "local": lab_local,
    "runs": lab_runs,
    "sweep": lab_sweep,
    "reindex": lab_reindex,
    "token": lab_token,
    "user": lab_user,
    "remove": lab_remove,
    "audit": lab_audit_log,
}


def cmd_bundle(args):
    if (args.run is None) == (args.repeat is None):
        raise SsdbenchError("name a run, or a repeat set with --repeat")
    out_dir = args.output or "."
    db = store.connect(data_dir(args))
    if args.repeat is not None:
        print(bundle.write_repeat(db, data_dir(args), args.repeat, out_dir))
    else:
        print(bundle.write(db, data_dir(args), args.run, out_dir))


def cmd_verify(args):
    failed = 0
    for path in args.bundles:
        try:
            m = bundle.verify(path)
        except bundle.BundleError as exc:
            print(f"FAILED {exc}", file=sys.stderr)
            failed += 1
            continue
        held = m.get("repeat")
        what = (
            f"repeat set {held['id']} ({held['state']}, runs {', '.join(str(r['id']) for r in held['runs'])})"
            if held
            else f"run {m['run']['id']} ({m['run']['state']})"
        )
        print(
            f"OK {path}: {len(m['files'])} files match their sha256; suite {m['suite']['name']} "
            f"{m['suite']['sha256']}, {what}"
        )
    return EXIT_ERROR if failed else 0


def cmd_compare(args):
    """compare.html from bundles (or runs of the data folder, by id): the first is the current run. A repeat
    set's bundle stands as its last run that ended done, its bars carrying the set's spread."""
    docs, sets = [], []
    db = None
    for item in args.runs:
        if item.isascii() and item.isdigit():
            db = db or store.connect(data_dir(args))
            doc = document.run_document(db, int(item))
            if doc is None:
                raise SsdbenchError(f"no run {item} in {data_dir(args)}")
            held = store.get_repeat(db, doc["repeat"]["id"]) if doc.get("repeat") else None
            members = [store.get_run(db, r["id"]) for r in held["runs"]] if held else []
            docs.append(doc)
            sets.append([m for m in members if m["state"] == "done"] or None)
            continue
        found, repeat = bundle.documents(item)
        done = [d for d in found if d["state"] == "done"]
        docs.append(done[-1] if repeat and done else found[-1])
        sets.append(done if repeat and done else None)
    if len(docs) < 2:
        raise SsdbenchError("name at least two bundles (or runs) to compare")
    with open(args.output, "wb") as f:
        f.write(offline_report.render_compare(docs, sets))
    print(args.output)


def cmd_import(args):
    db = store.connect(data_dir(args))
    for path in args.bundles:
        made = bundle.import_bundle(db, data_dir(args), path)
        if "repeat" in made:
            origin = store.get_repeat(db, made["repeat"])["origin"]
            runs = ", ".join(map(str, made["runs"]))
            print(f"{path}: imported as repeat set {made['repeat']} with runs {runs} ({origin})")
        else:
            print(f"{path}: imported as run {made['run']} ({store.get_run(db, made['run'])['origin']})")


def cmd_export(args):
    if args.list:
        found = usbexport.sticks(named=[args.to] if args.to else ())
        if not found:
            print("no USB stick with a FAT32 or exFAT file system", file=sys.stderr)
        for s in found:
            print(
                f"{s['device']:<16} {s['fstype']:<6} {s['label'] or '':<12} {size(s['size'] or 0):>10} "
                f"{s['model'] or ''}" + ("  (the appliance's own stick)" if s["boot"] else "")
            )
        return None
    if not (args.all or args.run):
        raise SsdbenchError("name a run, or --all")
    stick = usbexport.find(args.to)
    db = store.connect(data_dir(args))
    run_ids = usbexport.ended_runs(db) if args.all else [args.run]
    done = usbexport.export(
        db,
        data_dir(args),
        run_ids,
        stick,
        on_progress=lambda run_id, path: print(f"run {run_id}: writing {path}", flush=True),
        beside=logs.beside_bundles,
    )
    for item in done:
        print(f"run {item['run']}: {item['file']} ({size(item['bytes'])}), {item['state']}")
    print(usbexport.when_to_pull(stick))
    return None


def cmd_pin(args):
    print(access.new_pin(data_dir(args)) if args.new else access.pin(data_dir(args)))


def cmd_status(args):
    if args.watch is not None and args.watch <= 0:
        raise SsdbenchError("--watch takes a number of seconds above 0")
    console.show(data_dir(args), port=args.port, watch=args.watch)


def cmd_auto(args):
    ended = unattended.run_all(data_dir(args), args.suite, say=lambda text: print(f"ssdbench auto: {text}", flush=True))
    return 0 if all(state == "done" for _, state in ended) else 1


def cmd_logs(args):
    logs.keep(data_dir(args))


def cmd_diagnostics(args):
    if args.stick:
        stick = usbexport.find(args.to)
        with usbexport.mounted(stick) as point:
            path = logs.diagnostics(data_dir(args), point)
        print(f"{os.path.basename(path)} written to {stick['device']}; {usbexport.when_to_pull(stick)}")
        return
    print(logs.diagnostics(data_dir(args), args.output or "."))


def cmd_settings(args):
    env, errors, ca, said = settings.read(os.path.join(settings.STICK_COPY, settings.CONF_NAME))
    settings.write(env, errors)
    print(f"settings: {said}")
    if ca:
        shutil.copyfile(ca, tls.LAB_CA_FILE)
        print(f"The lab's CA certificate: {os.path.basename(ca)} on SSDBENCH")
    for error in errors:
        print(f"settings: ERROR: {error}")


def cmd_clock(args):
    if args.action == "floor":
        record = wall_clock.floor()
    else:
        record = wall_clock.sync(args.servers, lab=wall_clock.lab_from_settings, cafile=tls.LAB_CA_FILE)
    print(f"clock: {wall_clock.said(record)}", flush=True)


def size_arg(text):
    """A size on the command line; a bad one is argparse's one-line usage error, not a traceback."""
    try:
        return locked.parse_size(text)
    except SsdbenchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def logical_block_arg(text):
    block = size_arg(text)
    if block < plan.SECTOR or block > plan.ALIGN or block & (block - 1):
        raise argparse.ArgumentTypeError(f"a logical block is a power of two from {plan.SECTOR} B to 1 MiB, not {text}")
    return block


def parser():
    p = argparse.ArgumentParser(prog="ssdbench", description="SSD test appliance: locked fio suites.")
    p.add_argument("--version", action="version", version=f"ssdbench {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name, func, help_text, data=False, as_json=False):
        c = sub.add_parser(name, help=help_text)
        c.set_defaults(func=func)
        if data:
            c.add_argument("--data-dir", help=f"results directory (default $SSDBENCH_DATA or {DEFAULT_DATA_DIR})")
        if as_json:
            c.add_argument("--json", action="store_true", help="print JSON")
        return c

    c = add("drives", cmd_drives, "list drives and whether each may be tested", as_json=True)
    c.add_argument("devices", nargs="*", metavar="DEV", help="describe only these (loop devices must be named)")
    c.add_argument("--allow-usb", action="store_true", help="treat USB-attached drives as targets")

    c = add("suites", cmd_suites, "list or show the locked suites")
    ss = c.add_subparsers(dest="action", required=True)
    ls = ss.add_parser("list")
    ls.add_argument("--json", action="store_true")
    sh = ss.add_parser("show")
    sh.add_argument("name")
    sh.add_argument("--json", action="store_true")

    c = add("plan", cmd_plan, "print a suite's steps, estimated time and room for results on a capacity", as_json=True)
    c.add_argument("--suite", required=True)
    c.add_argument("--capacity", required=True, type=size_arg, help="drive size, e.g. 1000204886016 or 512GiB")
    c.add_argument(
        "--logical-block",
        type=logical_block_arg,
        default=plan.SECTOR,
        metavar="BYTES",
        help=f"the drive's logical block (default {plan.SECTOR}; 4096 for a 4Kn drive)",
    )

    c = add("run", cmd_run, "run a suite on a drive (destroys its data)", data=True)
    c.add_argument("--suite", help="a locked suite by name")
    c.add_argument("--suite-file", help="a suite file; refused unless its hash is locked, or --non-standard")
    c.add_argument("--drive", required=True, help="the device, e.g. /dev/nvme0n1")
    c.add_argument("--confirm", required=True, metavar="ID", help="the drive's serial (or kernel name if it has none)")
    c.add_argument("--destroy-data", action="store_true", help="confirm that existing partitions/file systems go")
    c.add_argument("--allow-usb", action="store_true", help="allow a USB-attached drive")
    c.add_argument("--non-standard", action="store_true", help="run a suite whose hash is not locked")
    c.add_argument("--trace", metavar="NAME", help="play a trace imported with `ssdbench trace import` (non-standard)")
    c.add_argument(
        "--resume",
        type=int,
        metavar="RUN",
        help="resume run RUN, cut off by a crash or power loss, on its drive with its suite: from its last purge "
        "before the step that was cut",
    )

    c = add("trace", cmd_trace, "import a tester's own trace to play, or list the imported ones")
    ts = c.add_subparsers(dest="action", required=True)
    ti = ts.add_parser("import", help="turn a trace file into a playable trace, kept in the data directory")
    ti.add_argument("file")
    ti.add_argument(
        "--format",
        required=True,
        choices=sorted(user_traces.FORMATS),
        help="blktrace: blkparse's text output; fio-iolog: a fio iolog v2 or v3; csv: an MSR-Cambridge CSV",
    )
    ti.add_argument("--name", help="what to call it (default: from the file's name)")
    ti.add_argument("--qd", type=int, default=1, help="the queue depth to play a fio iolog at (it records none)")
    tl = ts.add_parser("list", help="the imported traces")
    for action in (ti, tl):
        action.add_argument("--data-dir", help=f"results directory (default $SSDBENCH_DATA or {DEFAULT_DATA_DIR})")
        action.add_argument("--json", action="store_true", help="print JSON")

    c = add("repeat", cmd_repeat, "run a suite N times on a drive and measure how far its figures repeat", data=True)
    c.add_argument("--suite", help="a locked suite by name")
    c.add_argument("--suite-file", help="a suite file; refused unless its hash is locked, or --non-standard")
    c.add_argument("--times", required=True, type=int, metavar="N", help=f"how many runs: 2 to {repeat.MAX_TIMES}")
    c.add_argument("--drive", required=True, help="the device, e.g. /dev/nvme0n1")
    c.add_argument("--confirm", required=True, metavar="ID", help="the drive's serial (or kernel name if it has none)")
    c.add_argument("--destroy-data", action="store_true", help="confirm that existing partitions/file systems go")
    c.add_argument("--allow-usb", action="store_true", help="allow a USB-attached drive")
    c.add_argument("--non-standard", action="store_true", help="run a suite whose hash is not locked")
    c.add_argument("--json", action="store_true", help="print the summary as JSON")
    c = add("repeats", cmd_repeats, "list repeat sets, or show one's summary", data=True, as_json=True)
    c.add_argument("set", type=int, nargs="?", metavar="SET", help="the repeat set to show")

    add("runs", cmd_runs, "list runs", data=True, as_json=True)
    c = add("show", cmd_show, "show one run with its metrics", data=True, as_json=True)
    c.add_argument("run", type=int)
    add("cancel", cmd_cancel, "stop the active run", data=True)
    c = add("delete", cmd_delete, "delete an ended run and its folder (with --yes; else say which run goes)", data=True)
    c.add_argument("run", type=int)
    c.add_argument("--yes", action="store_true", help="delete it")

    c = add("web", cmd_web, "serve the web UI; it queues runs for `ssdbench runner`", data=True)
    c.add_argument("--host", default="127.0.0.1", help="address to listen on; 0.0.0.0 for every interface")
    c.add_argument("--port", type=int, default=8080)
    c.add_argument(
        "--drive",
        dest="drives",
        action="append",
        default=[],
        metavar="DEV",
        help="also list this device (loop devices are listed only when named); repeatable",
    )
    c.add_argument(
        "--stick",
        dest="sticks",
        action="append",
        default=[],
        metavar="DEV",
        help="also offer this FAT32 or exFAT file system for export, whatever its transport; repeatable",
    )
    c.add_argument("--allow-usb", action="store_true", help="treat USB-attached drives as targets")
    c = add("runner", cmd_runner, "the runner service: execute the queued runs, one at a time", data=True)
    c.add_argument("--auto-export", action="store_true", help="export each run that ends to the USB stick found")
    c.add_argument(
        "--upload-to",
        metavar="URL",
        help="queue each run that ends for the lab at URL and send it, its token from $SSDBENCH_TOKEN",
    )
    insecure = "allow an http:// URL that is not this machine's: the token then crosses the network in clear"
    c.add_argument("--insecure", action="store_true", help=insecure)
    lab_ca = "the lab's own CA certificate (PEM), trusted beside the system's"
    c.add_argument("--lab-ca", metavar="FILE", help=lab_ca)
    c = add("upload", cmd_upload, "send result bundles to a lab; exit 2 if one is not confirmed")
    c.add_argument("bundles", nargs="+", metavar="BUNDLE")
    c.add_argument("--to", required=True, metavar="URL", help="the lab, e.g. https://lab.example:8443/")
    token = c.add_mutually_exclusive_group()
    token.add_argument(
        "--token-file", metavar="FILE", help=f"a file holding this appliance's token (or ${upload.TOKEN_VAR})"
    )
    token.add_argument("--token", help="the token itself: any user of this machine may read a command line")
    c.add_argument("--insecure", action="store_true", help=insecure)
    c.add_argument("--attempts", type=int, default=3, metavar="N", help="tries per bundle while the lab is unreachable")
    c.add_argument("--lab-ca", metavar="FILE", help=lab_ca)
    add_lab(sub)
    c = add("bundle", cmd_bundle, "write a run's or a repeat set's result bundle (.zip)", data=True)
    c.add_argument("run", type=int, nargs="?")
    c.add_argument("--repeat", type=int, metavar="SET", help="the repeat set's bundle: its runs and its summary")
    c.add_argument("-o", "--output", metavar="DIR", help="folder to write it in (default: here)")
    c = add("verify", cmd_verify, "check every hash in result bundles; exit 2 on any problem")
    c.add_argument("bundles", nargs="+", metavar="BUNDLE")
    c = add("compare", cmd_compare, "write compare.html: ranked bars of bundles (or run ids), offline", data=True)
    c.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="a bundle (.zip), or a run's id in the data folder; the first is the current run",
    )
    c.add_argument("-o", "--output", required=True, metavar="FILE", help="the page to write, e.g. compare.html")
    c = add("import", cmd_import, "bring bundles from another testbed in, to compare them", data=True)
    c.add_argument("bundles", nargs="+", metavar="BUNDLE")
    c = add("export", cmd_export, "write result bundles to a USB stick (FAT32 or exFAT), then unmount it", data=True)
    c.add_argument("run", type=int, nargs="?")
    c.add_argument("--all", action="store_true", help="every run that has ended (skips those already there)")
    c.add_argument("--to", metavar="DEVICE", help="the stick's file system, e.g. /dev/sdb1 (default: the one found)")
    c.add_argument("--list", action="store_true", help="list the sticks found, and write nothing")
    c = add("pin", cmd_pin, "print the web UI's login PIN (made on first use)", data=True)
    c.add_argument("--new", action="store_true", help="make a new PIN: every web session ends")
    c = add("status", cmd_status, "the appliance's status screen: address, PIN, drives, the current run", data=True)
    c.add_argument("--port", type=int, default=80, help="the web UI's port, for its address (default 80)")
    c.add_argument("--watch", type=float, metavar="SECONDS", help="redraw every SECONDS until Enter is pressed")
    add(
        "logs", cmd_logs, "the log keeper service: the kernel's and the services' logs kept in DATA_DIR/logs", data=True
    )
    c = add("diagnostics", cmd_diagnostics, "a zip for a report: logs, lspci, lsblk, drives, redacted", data=True)
    c.add_argument("-o", "--output", metavar="DIR", help="folder to write it in (default: here)")
    c.add_argument("--stick", action="store_true", help="write it to the USB stick found (FAT32 or exFAT)")
    c.add_argument("--to", metavar="DEVICE", help="with --stick: the stick's file system, e.g. /dev/sdb1")
    add("settings", cmd_settings, "at boot: ssdbench.conf from the stick and the kernel command line, checked")
    c = add("clock", cmd_clock, "the appliance's clock: floor at the build date at boot; sync from NTP or the lab")
    actions = c.add_subparsers(dest="action", required=True)
    actions.add_parser("floor", help="a clock behind the image's build date goes to it")
    sync = actions.add_parser("sync", help="set the clock from NTP (these servers, then pool.ntp.org), else the lab")
    sync.add_argument("servers", nargs="*", metavar="SERVER", help="NTP servers, as DHCP gave them (option 42)")
    c = add("auto", cmd_auto, "unattended: queue a suite on every empty drive, one after another, and wait", data=True)
    c.add_argument("--suite", required=True, help="a locked suite by name")
    return p


def add_lab(sub):
    c = sub.add_parser("lab", help="the lab: a results server on PostgreSQL for many appliances (docs/lab.md)")
    c.set_defaults(func=cmd_lab)
    actions = c.add_subparsers(dest="action", required=True)
    parsers = [
        migrate := actions.add_parser("migrate", help="create or update the lab's schema (idempotent)"),
        serve := actions.add_parser("serve", help="serve the lab: uploads, history, compare"),
        runs := actions.add_parser("runs", help="list the runs the lab holds"),
        sweep := actions.add_parser("sweep", help="list the store's bundle files that the database does not list"),
        reindex := actions.add_parser("reindex", help="index the store's bundle files that the database lacks"),
        remove := actions.add_parser("remove", help="remove a run and its bundle (with --yes; else say what goes)"),
        audit := actions.add_parser("audit", help="the audit log: logins, uploads and these commands' changes"),
    ]
    remove.add_argument("run", type=int, metavar="RUN", help="the lab's id of the run")
    remove.add_argument("--yes", action="store_true", help="remove them: without it, nothing is removed")
    audit.add_argument("--limit", type=int, default=100, metavar="N", help="the newest N entries (default 100)")
    audit.add_argument("--json", action="store_true", help="print JSON")
    sweep.add_argument("--quarantine", action="store_true", help="move them into STORE/quarantine/ (never deleted)")
    reindex.add_argument(
        "--appliance", default="restored", help="the appliance they are indexed as sent by (default: restored)"
    )
    local = actions.add_parser("local", help="try a lab: its own PostgreSQL in FOLDER, a first user, the server")
    local.add_argument("folder", metavar="FOLDER", help="where the PostgreSQL and the bundles are kept")
    for p in (serve, sweep, reindex, remove):
        p.add_argument("--store", required=True, metavar="DIR", help="the folder that keeps the bundles")
    migrate.add_argument(
        "--store", metavar="DIR", help="the folder that keeps the bundles: make the cards an upgrade asks for"
    )
    for p in (serve, local):
        p.add_argument(
            "--behind-proxy",
            metavar="ADDR",
            help="the lab is reached through one reverse proxy, at ADDR (an address, a network such as "
            "172.30.0.0/24, or a host name): take the client's address from its X-Forwarded-For, on its "
            "connections only; needed to listen on any address but the loopback",
        )
        p.add_argument("--host", default="127.0.0.1", help="address to listen on (the loopback, for the proxy)")
        p.add_argument(
            "--read-mib",
            type=float,
            metavar="MIB",
            help="the run documents a server process reads at once, in MiB of JSON, 64 unless set (about 9 times as "
            "much of memory): a compare of runs holding more is refused (413), one while others read waits, then 503",
        )
        p.add_argument("--port", type=int, default=8090)
        p.add_argument(
            "--access-log",
            default="-",
            metavar="FILE",
            help="a line per request in FILE, opened again on SIGUSR1 for logrotate (default: the standard output)",
        )
    runs.add_argument("--json", action="store_true", help="print JSON")
    for what, verbs, about in (
        (
            "token",
            ("add", "list", "revoke", "trust", "distrust"),
            "an appliance's upload token: add prints it, once; the bench shows the runs of trusted ones only",
        ),
        ("user", ("add", "list", "remove"), "who may log in to the lab's pages: add prints the password, once"),
    ):
        p = actions.add_parser(what, help=about)
        kinds = p.add_subparsers(dest="verb", required=True)
        for verb in verbs:
            v = kinds.add_parser(verb)
            if verb != "list":
                v.add_argument("name")
            parsers.append(v)
    for p in parsers:
        p.add_argument("--db", metavar="URL", help=f"postgresql://USER@HOST/DB (default ${lab_schema.DB_VAR})")


def main(argv=None):
    args = parser().parse_args(argv)
    if args.command == "repeat" and not (args.suite or args.suite_file):
        parser().error("repeat needs --suite NAME or --suite-file PATH")
    if args.command == "run" and sum(map(bool, (args.suite, args.suite_file, args.trace))) != 1:
        parser().error("run needs one of --suite NAME, --suite-file PATH or --trace NAME")
    try:
        return args.func(args) or 0
    except SsdbenchError as exc:
        print(f"ssdbench: error: {exc}", file=sys.stderr)
    except sqlite3.Error as exc:
        print(f"ssdbench: error: the results database failed: {exc}", file=sys.stderr)
    except OSError as exc:
        print(
            f"ssdbench: error: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""), file=sys.stderr
        )
    except KeyboardInterrupt:
        return 130
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
