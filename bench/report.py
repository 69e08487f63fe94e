#!/usr/bin/python3
"""report.py - turns the client's JSON lines into the benchmark's report:
<prefix>-sync_on.md and <prefix>-sync_off.md (pipelines side by side, the
performance contract of SPEC.md section 5, fault scenarios, scale curve) and
<prefix>-throughput.png, <prefix>-scale.png.

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
    ("idem_async", "2. webhook_idem async: `apply_event` + workers `process_pending`"),
    ("seed_lock", "3. seed 1: Redis `SET NX EX` lock, then a PG transaction"),
    ("seed_queue", "4. seed 2: Redis status + lock + `RPUSH`; `BLPOP` worker"),
    ("plpgsql", "5. PL/pgSQL + pgcrypto, same logic as 1"),
    ("floor", "6. floor: one SQL statement, no verification, no lock"),
]
SHORT = {
    "idem_sync": "webhook_idem\nsync",
    "idem_async": "webhook_idem\nasync",
    "seed_lock": "seed 1\nRedis lock",
    "seed_queue": "seed 2\nRedis queue",
    "plpgsql": "PL/pgSQL\n+ pgcrypto",
    "floor": "floor\n(1 statement)",
}
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
    out = {
        "rounds": len(good),
        "failed_rounds": len(errors),
        "round_error": errors[0] if errors else None,
        "eps": median([r["eps"] for r in good]),
        "eps_all": [r["eps"] for r in good],
        "p50_ms": median([r["p50_ms"] for r in good]),
        "p99_ms": median([r["p99_ms"] for r in good]),
        "applied_eps": median([r["applied_eps"] for r in good]),
        "drain_s": max(r.get("drain_s", 0) for r in good),
    }
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
    return "PASS" if ok else "**FAIL**"


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
        ratio = f"{a['eps'] / base:.2f}x" if base else "–"
        eps = fmt(a["eps"])
        if len(a["eps_all"]) > 1:
            eps += f" ({min(a['eps_all']):,.0f}–{max(a['eps_all']):,.0f})"
        lines.append(
            f"| {name} | {eps} | {fmt(a['p50_ms'], 2)} | {fmt(a['p99_ms'], 2)} | {ratio} "
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


def contract(agg, scale):
    """SPEC.md section 5, checked on this run's numbers."""
    lines = []
    s = agg.get("idem_sync", {})
    if "eps" not in s:
        return ["Not checked: webhook_idem sync did not run (" + short_error(s.get("error", "absent")) + ")."]

    def ratio_to(key):
        other = agg.get(key, {})
        return s["eps"] / other["eps"] if other.get("eps") else None

    checks = []
    r = ratio_to("plpgsql")
    if r is not None:
        checks.append((f"sync `apply_event` ≥ 1.3x PL/pgSQL + pgcrypto: {r:.2f}x", r >= 1.3))
    # The target, as the issue states it, is against the second seed's
    # pipeline (Redis status + lock + queue + worker); the first seed's ratio
    # is shown beside it, and held to the same bar in its own line.
    r = ratio_to("seed_queue")
    if r is not None:
        checks.append((f"sync `apply_event` ≥ 3x the second seed's Redis + PostgreSQL pipeline: "
                       f"{r:.2f}x", r >= 3.0))
    r = ratio_to("seed_lock")
    if r is not None:
        checks.append((f"(also shown) sync `apply_event` ≥ 3x the first seed's Redis lock + PostgreSQL: "
                       f"{r:.2f}x", r >= 3.0))
    r = ratio_to("floor")
    if r is not None:
        checks.append((f"sync `apply_event` within 15% of the floor: {r:.2f}x of the floor", r >= 0.85))
    doubles = s.get("doubles", 0) + agg.get("idem_async", {}).get("doubles", 0)
    lost = s.get("lost", 0) + agg.get("idem_async", {}).get("lost", 0)
    checks.append((f"webhook_idem: zero double applications ({doubles}) and zero lost events ({lost})",
                   doubles == 0 and lost == 0))
    good = [(size, a["eps"]) for size, a in scale.items() if "eps" in a]
    if len(good) >= 2:
        base = good[0][1]
        worst = max(abs(eps / base - 1) for _, eps in good)
        sizes = ", ".join(f"{size:,}: {eps:,.0f}/s" for size, eps in good)
        checks.append((f"throughput flat within 20% across stored events ({sizes}; worst {worst:.0%})",
                       worst <= 0.20))
    for text, ok in checks:
        lines.append(f"- {verdict(ok)} {text}")
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


def write_markdown(path, setting, agg, scale, rows, meta, prefix, other):
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
        f"{m.get('dup_rate', 0):.0%} of deliveries are redeliveries of an earlier event, "
        f"1 KiB Stripe-signed bodies, {m.get('accounts'):,} accounts, "
        f"{m.get('workers')} worker processes for the async pipelines.",
        "See bench/README.md for what each column means and how each pipeline works."
        + (" With more than one round, events/s shows the median and (in brackets) the range of the rounds."
           if (m.get("rounds") or 1) > 1 else ""),
        "",
        "## Pipelines side by side",
        "",
    ]
    if m.get("mode") == "quick":
        out += ["QUICK run: one round of a few seconds per pipeline on whatever else the machine is doing; "
                "the ratios are indicative only. Run `make bench` for the median of 5 interleaved rounds.", ""]
    out += main_table(agg)
    out += ["", f"![throughput]({base}-throughput.png)", "", "## Performance contract (SPEC.md section 5)", ""]
    out += contract(agg, scale)
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
        agg = aggs[setting]
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
    ax.set_xticklabels([SHORT[k] for k in keys], fontsize=8)
    ax.set_ylabel("events/s (deliveries answered per second)")
    ax.set_title("Throughput by pipeline (same client, same payloads, same handler effect)")
    ax.set_ylim(0, top * 1.18 if top else 1)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
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
        by_pipe = defaultdict(list)
        for r in rows:
            if r.get("kind") == "run" and r.get("label") == f"sync_{setting}":
                by_pipe[r["pipeline"]].append(r)
        aggs[setting] = {k: aggregate(v) for k, v in by_pipe.items()}
        scales[setting] = scale_rows(rows, f"scale_{setting}")

    base = os.path.basename(args.prefix)
    for setting in ("on", "off"):
        other = f"{base}-sync_{'on' if setting == 'off' else 'off'}.md"
        write_markdown(f"{args.prefix}-sync_{setting}.md", setting, aggs[setting], scales[setting], rows, meta,
                       args.prefix, other)
    throughput_chart(f"{args.prefix}-throughput.png", aggs)
    scale_chart(f"{args.prefix}-scale.png", scales, aggs)

    # A short summary on the terminal.
    for setting in ("on", "off"):
        print(f"\nsynchronous_commit = {setting}")
        for line in main_table(aggs[setting]):
            print(line)
        for line in contract(aggs[setting], scales[setting]):
            print(line)
    print()
    for line in scenario_section(rows)[: 2 + len(PIPELINES)]:
        print(line)


if __name__ == "__main__":
    main()
