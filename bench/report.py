#!/usr/bin/python3
"""report.py - turns the client's JSON lines into the benchmark's report:
<prefix>-sync_on.md and <prefix>-sync_off.md (pipelines side by side, first
deliveries and duplicates apart, async intake and end-to-end application,
the performance contract of SPEC.md section 5 checked target by target on
the same run's numbers, fault scenarios, scale curve) and
<prefix>-throughput.png, <prefix>-apart.png, <prefix>-async.png,
<prefix>-scale.png.

Usage: report.py --raw results.jsonl --meta meta.json --prefix bench/results/DATE
"""
import argparse
import json
import os
import statistics
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PIPELINES = [
    ("idem_sync", "1. webhook_idem sync: `apply_event`"),
    ("idem_async", "2. webhook_idem async: `apply_event` + client workers `process_pending`"),
    ("idem_bgw", "3. webhook_idem async: `apply_event` + in-database workers"),
    ("seed_lock", "4. seed 1: Redis `SET NX EX` lock, then a PG transaction"),
    ("seed_queue", "5. seed 2: Redis status + lock + `RPUSH`; `BLPOP` worker"),
    ("plpgsql", "6. careful PL/pgSQL + pgcrypto, same logic as 1"),
    ("plpgsql_min", "7. minimal PL/pgSQL receiver: HMAC, advisory lock, `ON CONFLICT DO NOTHING`, handler"),
    ("floor", "8. floor: one SQL statement, no verification, no lock"),
]
SHORT = {
    "idem_sync": "webhook_idem\nsync",
    "idem_async": "webhook_idem\nasync\n(process_pending)",
    "idem_bgw": "webhook_idem\nasync\n(in-db workers)",
    "seed_lock": "seed 1\nRedis lock",
    "seed_queue": "seed 2\nRedis queue",
    "plpgsql": "careful\nPL/pgSQL",
    "plpgsql_min": "minimal\nPL/pgSQL",
    "floor": "floor\n(1 statement)",
}
ASYNC = [("idem_async", "client workers (`process_pending`)"), ("idem_bgw", "in-database workers")]
KINDS = ("sync", "first", "dup", "intake")  # the labels' prefixes (run.sh)
SCENARIOS = [
    ("slow_handler", "handler slower than the lock TTL"),
    ("worker_kill", "killed between commit and status update"),
    ("burst", "burst of one event from many connections"),
]


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return rows


def median(values):
    return statistics.median(values) if values else None


def aggregate(runs):
    """One row per pipeline from its rounds: medians of speed, sums of counts."""
    good = [r for r in runs if not r.get("error")]
    errors = [r["error"] for r in runs if r.get("error")]
    if not good:
        return {"error": errors[0] if errors else "no run"}
    def med(key):
        return median([r[key] for r in good if r.get(key) is not None])

    out = {
        "rounds": len(good),
        "failed_rounds": len(errors),
        "round_error": errors[0] if errors else None,
        "eps": med("eps"),
        "eps_all": [r["eps"] for r in good],
        "p50_ms": med("p50_ms"),
        "p99_ms": med("p99_ms"),
        "applied_eps": med("applied_eps"),
        "queued_eps": med("queued_eps"),
        "drain_s": max(r.get("drain_s", 0) for r in good),
        "drain_s_median": med("drain_s"),
    }
    answers = defaultdict(int)
    for r in good:
        for k, v in (r.get("window_answers") or {}).items():
            answers[k] += v
    out["window_answers"] = dict(answers)
    for key in ("applied", "doubles", "lost", "errors", "deliveries_total", "ok_events"):
        out[key] = sum(r.get(key, 0) for r in good)
    return out


def fmt(v, digits=0):
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def short_error(msg, limit=110):
    msg = " ".join(str(msg).split())
    return msg if len(msg) <= limit else msg[: limit - 1] + "…"


def verdict(ok):
    return "met" if ok else "**not met**"


def eps_cell(a):
    """events/s, with the range of the rounds when there are several."""
    if not a or "eps" not in a:
        return "error: " + short_error(a.get("error", "absent"), 60) if a else "–"
    cell = fmt(a["eps"])
    if len(a["eps_all"]) > 1:
        cell += f" ({min(a['eps_all']):,.0f}–{max(a['eps_all']):,.0f})"
    return cell


def ratio(x, y):
    return x / y if x is not None and y else None


def xfmt(r):
    return "–" if r is None else f"{r:.2f}x"


def main_table(agg):
    base = agg.get("idem_sync", {}).get("eps")
    lines = [
        "| pipeline | events/s | p50 ms | p99 ms | vs webhook_idem sync | applied/s end to end "
        "| events applied | double applications | lost events | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, name in PIPELINES:
        a = agg.get(key)
        if a is None:
            continue
        if "error" in a:
            lines.append(f"| {name} | error: {short_error(a['error'])} | | | | | | | | |")
            continue
        vs = f"{a['eps'] / base:.2f}x" if base else "–"
        lines.append(
            f"| {name} | {eps_cell(a)} | {fmt(a['p50_ms'], 2)} | {fmt(a['p99_ms'], 2)} | {vs} "
            f"| {fmt(a['applied_eps'])} | {fmt(a['applied'])} | {fmt(a['doubles'])} | {fmt(a['lost'])} "
            f"| {fmt(a['errors'])} |"
        )
    return lines


def scale_rows(rows, label):
    by_size = defaultdict(list)
    for r in rows:
        if r.get("kind") in ("run", "scale") and r.get("label") == label:
            by_size[r.get("stored_events", 0)].append(r)
    return {size: aggregate(runs) for size, runs in sorted(by_size.items())}


def scale_table(scale):
    if not scale:
        return ["(not run)"]
    first = next((a.get("eps") for a in scale.values() if "error" not in a), None)
    lines = [
        "| events stored | events/s | p50 ms | p99 ms | vs smallest | double applications | lost |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, a in scale.items():
        if "error" in a:
            lines.append(f"| {size:,} | error: {short_error(a['error'])} | | | | | |")
            continue
        ratio = f"{a['eps'] / first:.2f}x" if first else "–"
        lines.append(
            f"| {size:,} | {fmt(a['eps'])} | {fmt(a['p50_ms'], 2)} | {fmt(a['p99_ms'], 2)} | {ratio} "
            f"| {fmt(a['doubles'])} | {fmt(a['lost'])} |"
        )
    return lines


def apart_table(k):
    """First deliveries and duplicates measured apart (runs first_* and dup_*)."""
    first, dup = k.get("first", {}), k.get("dup", {})
    keys = [key for key, _ in PIPELINES if key in first or key in dup]
    if not keys:
        return ["(not run)"]
    base_f = first.get("idem_sync", {}).get("eps")
    base_d = dup.get("idem_sync", {}).get("eps")
    lines = [
        "| pipeline | first deliveries: events/s | p50 ms | webhook_idem sync ÷ it "
        "| duplicates: events/s | p50 ms | webhook_idem sync ÷ it | duplicate ÷ first "
        "| double applications | lost | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, name in PIPELINES:
        if key not in keys:
            continue
        f, d = first.get(key, {}), dup.get(key, {})
        cnt = lambda field: sum(x.get(field, 0) for x in (f, d) if "eps" in x)  # noqa: E731
        note = ""
        nondup = {a: n for a, n in d.get("window_answers", {}).items() if a != "duplicate"}
        if nondup:
            note = " (answers other than duplicate: " + ", ".join(f"{a} {n}" for a, n in sorted(nondup.items())) + ")"
        lines.append(
            f"| {name} | {eps_cell(f)} | {fmt(f.get('p50_ms'), 2)} | {xfmt(ratio(base_f, f.get('eps')))} "
            f"| {eps_cell(d)}{note} | {fmt(d.get('p50_ms'), 2)} | {xfmt(ratio(base_d, d.get('eps')))} "
            f"| {xfmt(ratio(d.get('eps'), f.get('eps')))} | {fmt(cnt('doubles'))} | {fmt(cnt('lost'))} "
            f"| {fmt(cnt('errors'))} |"
        )
    return lines


def async_table(k):
    """Async intake (no backlog limit) and end-to-end application, against sync."""
    sync_first = k.get("first", {}).get("idem_sync", {})
    sync_mixed = k.get("sync", {}).get("idem_sync", {})
    rows = [(key, name) for key, name in ASYNC if key in k.get("intake", {}) or key in k.get("sync", {})]
    if not rows:
        return ["(not run)"]
    lines = [
        "| workers | intake: `queued` answers/s, no backlog limit | ÷ sync first deliveries/s "
        "| applied/s end to end, backlog ≤ 1,000 | ÷ sync applied/s | intake run: applied/s end to end "
        "(burst, then drain) | intake run: drain s | double applications | lost | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| (sync `apply_event`, for reference) | {fmt(sync_first.get('eps'))} (first deliveries/s) | 1.00x "
        f"| {fmt(sync_mixed.get('applied_eps'))} | 1.00x | | | | | |",
    ]
    for key, name in rows:
        i, m = k.get("intake", {}).get(key, {}), k.get("sync", {}).get(key, {})
        if "eps" not in i and "eps" not in m:
            err = i.get("error") or m.get("error") or "absent"
            lines.append(f"| {name} | error: {short_error(err)} | | | | | | | | |")
            continue
        cnt = lambda field: sum(x.get(field, 0) for x in (i, m) if "eps" in x)  # noqa: E731
        lines.append(
            f"| {name} | {fmt(i.get('queued_eps'))} | {xfmt(ratio(i.get('queued_eps'), sync_first.get('eps')))} "
            f"| {fmt(m.get('applied_eps'))} | {xfmt(ratio(m.get('applied_eps'), sync_mixed.get('applied_eps')))} "
            f"| {fmt(i.get('applied_eps'))} | {fmt(i.get('drain_s_median'), 1)} "
            f"| {fmt(cnt('doubles'))} | {fmt(cnt('lost'))} | {fmt(cnt('errors'))} |"
        )
    return lines


def contract(k, scale, setting, scenario_rows=None):
    """SPEC.md section 5, checked target by target on this run's numbers:
    a table of (target, what was measured, ratio, verdict)."""
    mixed, first, dup, intake = (k.get(x, {}) for x in KINDS)
    checks = []  # (target, measured, ratio text, ok or None for shown only)

    def eps(group, key, field="eps"):
        return group.get(key, {}).get(field)

    def vs(target, group, what, other, bar, label, shown=False):
        a, b = eps(group, "idem_sync"), eps(group, other)
        r = ratio(a, b)
        if r is None:
            why = group.get("idem_sync", {}).get("error") or group.get(other, {}).get("error") or "not run"
            checks.append((target, f"{what}: {short_error(why, 80)}", "–", False if not shown else None))
            return
        checks.append((target, f"{what}: {a:,.0f} vs {label} {b:,.0f} events/s", f"{r:.2f}x",
                       None if shown else r >= bar))

    vs("sync `apply_event` ≥ 1.3x the careful PL/pgSQL + pgcrypto", first, "first deliveries", "plpgsql", 1.3, "PL/pgSQL")
    vs("sync `apply_event` ≥ 1.3x the careful PL/pgSQL + pgcrypto", dup, "duplicates", "plpgsql", 1.3, "PL/pgSQL")
    vs("(also shown) ≥ 1.3x the careful PL/pgSQL", mixed, f"mixed deliveries", "plpgsql", 1.3, "PL/pgSQL", shown=True)
    vs("sync `apply_event` ≥ 1.0x the minimal PL/pgSQL receiver", first, "first deliveries", "plpgsql_min", 1.0,
       "minimal")
    vs("sync `apply_event` ≥ 1.0x the minimal PL/pgSQL receiver", dup, "duplicates", "plpgsql_min", 1.0, "minimal")
    vs("(also shown) ≥ 1.0x the minimal PL/pgSQL receiver", mixed, "mixed deliveries", "plpgsql_min", 1.0, "minimal", shown=True)
    vs("sync `apply_event` ≥ 3x the second seed's Redis + PostgreSQL pipeline", mixed, "mixed deliveries",
       "seed_queue", 3.0, "seed 2")
    vs("(also shown) ≥ 3x the first seed's Redis lock + PostgreSQL", mixed, "mixed deliveries", "seed_lock", 3.0,
       "seed 1", shown=True)
    vs("sync `apply_event` within 15% of the floor (≥ 0.85x)", first, "first deliveries", "floor", 0.85, "floor")
    vs("sync `apply_event` within 15% of the floor (≥ 0.85x)", dup, "duplicates", "floor", 0.85, "floor")
    vs("sync `apply_event` within 15% of the floor (≥ 0.85x)", mixed, "mixed deliveries", "floor", 0.85, "floor")

    f, d = eps(first, "idem_sync"), eps(dup, "idem_sync")
    r = ratio(d, f)
    target = "a duplicate ≥ 3x as fast as a first delivery" + (
        "" if setting == "on" else " (the target is for synchronous_commit = on; shown)")
    if r is None:
        checks.append((target, "not run", "–", False if setting == "on" else None))
    else:
        checks.append((target, f"webhook_idem sync: duplicates {d:,.0f} vs first deliveries {f:,.0f} events/s",
                       f"{r:.2f}x", (r >= 3.0) if setting == "on" else None))

    for key, name in ASYNC:
        if key not in intake and key not in mixed:
            continue
        q, base = eps(intake, key, "queued_eps"), eps(first, "idem_sync")
        r = ratio(q, base)
        why = intake.get(key, {}).get("error")
        checks.append((f"async intake ({name}) ≥ 1.5x sync throughput",
                       f"`queued` {q:,.0f}/s (no backlog limit) vs sync first deliveries {base:,.0f}/s"
                       if r is not None else short_error(why or "not run", 80),
                       xfmt(r), r is not None and r >= 1.5))
        a, base = eps(mixed, key, "applied_eps"), eps(mixed, "idem_sync", "applied_eps")
        r = ratio(a, base)
        why = mixed.get(key, {}).get("error")
        checks.append((f"async events applied per second end to end ({name}) ≥ 0.8x sync",
                       f"{a:,.0f} vs sync {base:,.0f} applied/s (mixed deliveries, backlog ≤ 1,000)"
                       if r is not None else short_error(why or "not run", 80),
                       xfmt(r), r is not None and r >= 0.8))

    doubles = lost = 0
    runs = 0
    for group in (mixed, first, dup, intake):
        for key, a in group.items():
            if key.startswith("idem_") and "eps" in a:
                doubles += a.get("doubles", 0)
                lost += a.get("lost", 0)
                runs += a.get("rounds", 0)
    scen = ""
    for r in scenario_rows or []:
        if r.get("pipeline", "").startswith("idem_") and not r.get("error"):
            doubles += r.get("doubles", 0)
            lost += r.get("lost", 0)
            runs += 1
    if scenario_rows:
        scen = " and fault scenarios"
    checks.append(("zero double applications and zero lost events in every webhook_idem pipeline",
                   f"{doubles} double applications, {lost} lost, over {runs} runs{scen}", "–",
                   doubles == 0 and lost == 0))

    good = [(size, a["eps"]) for size, a in scale.items() if "eps" in a]
    if len(good) >= 2:
        base = good[0][1]
        worst = max(abs(e / base - 1) for _, e in good)
        sizes = ", ".join(f"{size:,}: {e:,.0f}/s" for size, e in good)
        checks.append(("throughput flat (within 20%) from 10 thousand to 10 million stored events",
                       sizes, f"worst {worst:.0%}", worst <= 0.20))

    lines = ["| SPEC.md §5 target | this run | ratio | verdict |", "|---|---|---:|---|"]
    for target, measured, r, ok in checks:
        lines.append(f"| {target} | {measured} | {r} | {'shown' if ok is None else verdict(ok)} |")
    met = sum(1 for *_, ok in checks if ok is True)
    total = sum(1 for *_, ok in checks if ok is not None)
    lines += ["", f"{met} of {total} targets met with synchronous_commit = {setting}."]
    return lines


def scenario_section(rows):
    scen = defaultdict(dict)
    for r in rows:
        if r.get("kind") == "scenario":
            scen[r.get("scenario")][r.get("pipeline")] = r
    if not scen:
        return ["(not run)"]
    head = "| pipeline | " + " | ".join(f"{title}: doubles / lost" for _, title in SCENARIOS) + " |"
    lines = [head, "|---|" + "---:|" * len(SCENARIOS)]
    for key, name in PIPELINES:
        if not any(key in scen.get(sk, {}) for sk, _ in SCENARIOS):
            continue
        cells = []
        for sk, _ in SCENARIOS:
            r = scen.get(sk, {}).get(key)
            if r is None:
                cells.append("–")
            elif r.get("error"):
                cells.append("error")
            else:
                d, l = r.get("doubles", 0), r.get("lost", 0)
                cell = f"{d} / {l}"
                cells.append(f"**{cell}**" if d or l else cell)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Details (deliveries made, events answered 2xx, events applied, the answers given):", "",
              "| scenario | pipeline | deliveries | 2xx events | applied | doubles | lost | answers / error |",
              "|---|---|---:|---:|---:|---:|---:|---|"]
    for sk, _ in SCENARIOS:
        for key, _ in PIPELINES:
            r = scen.get(sk, {}).get(key)
            if r is None:
                continue
            if r.get("error"):
                lines.append(f"| {sk} | {key} | | | | | | error: {short_error(r['error'])} |")
                continue
            answers = ", ".join(f"{k} {v}" for k, v in sorted(r.get("answers", {}).items()))
            if r.get("worker_crashes"):
                answers += f"; worker crashes {r['worker_crashes']}"
            lines.append(
                f"| {sk} | {key} | {r.get('deliveries_total', 0)} | {r.get('ok_events', 0)} "
                f"| {r.get('applied', 0)} | {r.get('doubles', 0)} | {r.get('lost', 0)} | {answers} |"
            )
    return lines


def write_markdown(path, setting, k, scale, rows, meta, prefix, other):
    base = os.path.basename(prefix)
    m = meta
    out = [
        f"# webhook_idem benchmark — synchronous_commit = {setting}",
        "",
        f"{m.get('date', '')}, {m.get('mode', '')} run ({m.get('elapsed', '?')} s). "
        f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('memory_gib', '?')} GiB, "
        f"Linux {m.get('kernel', '?')}; {m.get('pg_version', '')}; {m.get('redis_version', '')}; "
        f"webhook_idem {m.get('ext_version') or 'not installed'} (git {m.get('git_rev', '?')}).",
        "",
        f"Client: {m.get('threads')} sender threads (one PostgreSQL connection each, plus one Redis "
        f"connection for the seeds), {m.get('rounds')} round(s) of {m.get('warmup_s', m.get('warmup'))} s "
        f"warm-up + {m.get('seconds_run')} s measured per pipeline (median of rounds shown), "
        f"{m.get('dup_rate', 0):.0%} of deliveries are redeliveries of an earlier event in the mixed runs, "
        f"1 KiB Stripe-signed bodies, {m.get('accounts'):,} accounts, "
        f"{m.get('workers')} workers for each async pipeline (processes of the client for "
        f"`process_pending` and seed 2, background workers of the server for the in-database workers). "
        f"Duplicates apart: {m.get('preapplied', 0):,} events applied first (not measured), then every delivery "
        f"a redelivery of one of them. Async intake runs: {m.get('intake_seconds')} s measured, first deliveries, "
        f"no backlog limit. The cluster has `shared_preload_libraries = 'webhook_idem'` for all pipelines; its "
        f"in-database workers serve the database `bench_bgw` (pipeline 3's), the other pipelines run in `bench`.",
        "See bench/README.md for what each column means and how each pipeline works."
        + (" With more than one round, events/s shows the median and (in brackets) the range of the rounds."
           if (m.get("rounds") or 1) > 1 else ""),
        "",
        "## Pipelines side by side",
        "",
    ]
    if m.get("mode") == "quick":
        out += ["QUICK run: one round of a few seconds per pipeline on whatever else the machine is doing; "
                "the ratios are indicative only. Run `make bench` for the median of 3 interleaved rounds.", ""]
    out += ["### Mixed deliveries (every pipeline)", ""]
    out += main_table(k.get("sync", {}))
    out += ["", f"![throughput]({base}-throughput.png)", "",
            "### First deliveries and duplicates, measured apart", "",
            "First deliveries: every delivery a new event (`--dup-rate 0`). Duplicates: every delivery a "
            "redelivery of an event applied before the window. The last columns count both runs.", ""]
    out += apart_table(k)
    out += ["", f"![first deliveries and duplicates]({base}-apart.png)", "",
            "### Async: intake and events applied end to end", "",
            "Intake: deliveries answered `queued` per second in a run of first deliveries with no backlog limit "
            "(the workers run meanwhile). Applied end to end: distinct events applied per second from the first "
            "delivery until the last one was applied, in the mixed run (senders held back while more than 1,000 "
            "events wait, so the rate is one the workers sustain); the intake run's own rate, which includes "
            "draining the whole burst, is shown beside it.", ""]
    out += async_table(k)
    out += ["", f"![async]({base}-async.png)", "", "## Performance contract (SPEC.md section 5)", ""]
    scen = [r for r in rows if r.get("kind") == "scenario"] if setting == "on" else None
    out += contract(k, scale, setting, scen)
    out += ["", "## Scale: webhook_idem sync with events already stored", ""]
    out += scale_table(scale)
    out += ["", f"![scale]({base}-scale.png)", "", "## Fault scenarios", ""]
    if setting == "on":
        out += [
            f"Run once, with synchronous_commit on. The seeds' lock TTL is scaled down from 30 s to "
            f"{m.get('scenario_ttl_ms')} ms so that a scenario takes seconds; only the ratios of times "
            f"matter. {m.get('scenario_events')} events per scenario "
            f"({m.get('burst_events')} x {m.get('burst_connections')} connections for the burst). "
            "A cell reads `double applications / lost events`.",
            "",
        ]
        out += scenario_section(rows)
    else:
        out += [f"Run once, with synchronous_commit on: see `{other}`."]
    if m.get("idem_error"):
        out += ["", f"webhook_idem could not be set up: `{m['idem_error']}`"]
    if m.get("bgw_error"):
        out += ["", f"In-database workers: `{m['bgw_error']}`"]
    out += ["", "## Server settings", "", "```", m.get("pg_settings", "").strip(), "```", ""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def throughput_chart(path, aggs):
    fig, ax = plt.subplots(figsize=(11, 5.5))
    keys = [k for k, _ in PIPELINES]
    width = 0.38
    colors = {"on": "#3a6ea5", "off": "#e08a2c"}
    top = 0
    for i, setting in enumerate(("on", "off")):
        agg = aggs[setting].get("sync", {})
        xs = [j + (i - 0.5) * width for j in range(len(keys))]
        vals = [agg.get(k, {}).get("eps") or 0 for k in keys]
        top = max([top] + vals)
        bars = ax.bar(xs, vals, width, label=f"synchronous_commit = {setting}", color=colors[setting])
        for bar, k, v in zip(bars, keys, vals):
            a = agg.get(k, {})
            text = "error" if "error" in a else (f"{v:,.0f}" if v else "")
            if a.get("doubles"):
                text += f"\n{a['doubles']} doubles"
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                        va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([SHORT[k] for k in keys], fontsize=7)
    ax.set_ylabel("events/s (deliveries answered per second)")
    ax.set_title("Mixed deliveries by pipeline (same client, same payloads, same handler effect)")
    ax.set_ylim(0, top * 1.18 if top else 1)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def apart_chart(path, aggs):
    """First deliveries and duplicates per pipeline, commit on and off."""
    keys = [k for k, _ in PIPELINES
            if any(k in aggs[s].get(kind, {}) for s in ("on", "off") for kind in ("first", "dup"))]
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    colors = {"first": "#3a6ea5", "dup": "#5aa469"}
    top = 0
    for ax, setting in zip(axes, ("on", "off")):
        for i, kind in enumerate(("first", "dup")):
            agg = aggs[setting].get(kind, {})
            xs = [j + (i - 0.5) * 0.38 for j in range(len(keys))]
            vals = [agg.get(k, {}).get("eps") or 0 for k in keys]
            top = max([top] + vals)
            bars = ax.bar(xs, vals, 0.38, color=colors[kind],
                          label="first deliveries" if kind == "first" else "duplicates of applied events")
            for bar, v in zip(bars, vals):
                ax.annotate(f"{v:,.0f}" if v else "", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([SHORT[k] for k in keys], fontsize=8)
        ax.set_title(f"synchronous_commit = {setting}")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("events/s")
    axes[0].legend(fontsize=8, loc="upper left")
    axes[0].set_ylim(0, top * 1.15 if top else 1)
    fig.suptitle("First deliveries and duplicates, measured apart")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def async_chart(path, aggs):
    """Sync throughput against async intake and end-to-end application."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    top = 0
    for ax, setting in zip(axes, ("on", "off")):
        k = aggs[setting]
        bars = [("sync\nfirst deliveries/s", k.get("first", {}).get("idem_sync", {}).get("eps"), "#3a6ea5"),
                ("sync\napplied/s\n(mixed)", k.get("sync", {}).get("idem_sync", {}).get("applied_eps"), "#3a6ea5")]
        for key, name in ASYNC:
            short = "process_pending" if key == "idem_async" else "in-db workers"
            bars.append((f"{short}\nqueued/s", k.get("intake", {}).get(key, {}).get("queued_eps"), "#e08a2c"))
            bars.append((f"{short}\napplied/s\n(mixed)", k.get("sync", {}).get(key, {}).get("applied_eps"),
                         "#c05a2c"))
        vals = [v or 0 for _, v, _ in bars]
        top = max([top] + vals)
        rects = ax.bar(range(len(bars)), vals, color=[c for *_, c in bars])
        for rect, v in zip(rects, vals):
            ax.annotate(f"{v:,.0f}" if v else "n/a", (rect.get_x() + rect.get_width() / 2, rect.get_height()),
                        ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(range(len(bars)))
        ax.set_xticklabels([b for b, _, _ in bars], fontsize=7)
        ax.set_title(f"synchronous_commit = {setting}")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("events/s")
    axes[0].set_ylim(0, top * 1.15 if top else 1)
    fig.suptitle("Async intake (no backlog limit) and events applied end to end, against sync")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def scale_chart(path, scales, aggs):
    fig, ax = plt.subplots(figsize=(8, 5))
    colors = {"on": "#3a6ea5", "off": "#e08a2c"}
    plotted = False
    top = 0
    for setting in ("on", "off"):
        pts = [(size, a["eps"]) for size, a in scales[setting].items() if "eps" in a]
        if not pts:
            continue
        plotted = True
        xs, ys = zip(*pts)
        top = max([top] + list(ys))
        ax.plot(xs, ys, marker="o", color=colors[setting], label=f"webhook_idem sync, synchronous_commit = {setting}")
        for x, y in pts:
            ax.annotate(f"{y:,.0f}", (x, y), fontsize=8, xytext=(0, 6), textcoords="offset points", ha="center")
        base = pts[0][1]
        ax.fill_between([min(xs), max(xs)], base * 0.8, base * 1.2, color=colors[setting], alpha=0.08)
    if not plotted:
        ax.text(0.5, 0.5, "scale curve not measured", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.set_xscale("log")
        ax.set_ylim(0, top * 1.3)
    ax.set_xlabel("events already stored in webhook_idem.events")
    ax.set_ylabel("events/s")
    ax.set_title("Scale: throughput vs. stored events (band: ±20% of the smallest)")
    ax.grid(alpha=0.3)
    if plotted:
        ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--meta", required=True)
    ap.add_argument("--prefix", required=True)
    args = ap.parse_args()
    rows = load(args.raw)
    meta = json.load(open(args.meta)) if os.path.exists(args.meta) else {}

    aggs, scales = {}, {}
    for setting in ("on", "off"):
        aggs[setting] = {}
        for kind in KINDS:
            by_pipe = defaultdict(list)
            for r in rows:
                if r.get("kind") == "run" and r.get("label") == f"{kind}_{setting}":
                    by_pipe[r["pipeline"]].append(r)
            if by_pipe:
                aggs[setting][kind] = {k: aggregate(v) for k, v in by_pipe.items()}
        scales[setting] = scale_rows(rows, f"scale_{setting}")

    base = os.path.basename(args.prefix)
    for setting in ("on", "off"):
        other = f"{base}-sync_{'on' if setting == 'off' else 'off'}.md"
        write_markdown(f"{args.prefix}-sync_{setting}.md", setting, aggs[setting], scales[setting], rows, meta,
                       args.prefix, other)
    throughput_chart(f"{args.prefix}-throughput.png", aggs)
    apart_chart(f"{args.prefix}-apart.png", aggs)
    async_chart(f"{args.prefix}-async.png", aggs)
    scale_chart(f"{args.prefix}-scale.png", scales, aggs)

    # A short summary on the terminal.
    for setting in ("on", "off"):
        print(f"\nsynchronous_commit = {setting}")
        for line in main_table(aggs[setting].get("sync", {})):
            print(line)
        for line in apart_table(aggs[setting]) + [""] + async_table(aggs[setting]) + [""]:
            print(line)
        scen = [r for r in rows if r.get("kind") == "scenario"] if setting == "on" else None
        for line in contract(aggs[setting], scales[setting], setting, scen):
            print(line)
    print()
    for line in scenario_section(rows)[: 2 + len(PIPELINES)]:
        print(line)


if __name__ == "__main__":
    main()
