"""``optkit profile`` for people: the decode step, the recipes ranked by the capture, what nothing explains."""

from __future__ import annotations

from optkit.cli.table import Table


def _us(value: float) -> str:
    return f"{value:,.1f} µs"


def profile_blocks(report) -> list:
    a = report.analysis
    r = a.slowest
    versions = ", ".join(f"{k.removesuffix('_version')} {v}" for k, v in r.versions.items())
    blocks: list = [
        f"optkit profile: {a.directory}: {len(a.ranks)} rank{'s' if len(a.ranks) > 1 else ''}, captured {a.started} "
        f"({r.form} form{'; ' + versions if versions else ''}); vllm-ascend {a.release or 'any (no --model)'}"
        + (f"; {a.release_check}" if a.release_check else ""),
        f"Steps ({r.steps_found}): {r.steps}, {r.decode_steps} decode, {r.prefill_steps} prefill"
        + (f"; figures of rank {r.rank}, the slowest" if len(a.ranks) > 1 else ""),
    ]
    d = r.decode
    syncs = ", ".join(f"{k} ×{v['count']} ({_us(v['us'])})" for k, v in d["syncs"].items()) or "none"
    streams = ", ".join(f"stream {k} {_us(v)}" for k, v in d["streams_us"].items())
    blocks.append(f"Decode step (median): wall {_us(d['wall_us'])}, device busy {_us(d['busy_us'])}, device free "
                  f"{_us(d['free_us'])}; {d['launches']} launches; syncs: {syncs}; blocking copies (pageable): "
                  f"{d['blocking_copies']['count']} ({_us(d['blocking_copies']['us'])} on the host, device idle caused "
                  f"{_us(d['blocking_copies']['device_idle_us'])}); {streams}; two or more "
                  f"streams at once {_us(d['overlap_us'])}")
    blocks += [f"Note: {n}" for n in r.notes]
    if report.plan is not None:
        table = Table(f"Recipes by your profile (savings per decode step at c{report.concurrency}; the plan's selection "
                      "first)", ["#", "recipe", "saving", "status", "what the capture shows / why"])
        for i, x in enumerate(report.ranked, 1):
            table.add_row(str(i), x.recipe, _us(x.saving_us) if x.findings else "—", x.status,
                          x.basis + ("" if x.valid or not x.findings else f" — {x.reason}"))
        blocks.append(table if report.ranked else "No recipe signature is present in this capture.")
    else:
        table = Table("Recipe signatures present (give --model and --target to rank them for your request)",
                      ["recipe", "per step", "saving", "signature"])
        for f in (f for f in a.findings if f.present):
            table.add_row(f.recipe, f"{f.per_step}" + (f" (expected {f.expected})" if f.expected else ""),
                          _us(f.saving_us), f.pattern)
        blocks.append(table)
    gaps = Table(f"Host gaps no recipe explains (rank {r.rank}; median per decode step)",
                 ["before op", "occurrence", "position", "gap"])
    for g in r.gaps:
        gaps.add_row(g.op, f"{g.occurrence} of {g.of}", str(g.position) if g.position >= 0 else "—", _us(g.gap_us))
    ops = Table("Costliest ops no recipe explains", ["op", "type", "per step", "device", "host gaps before"])
    for o in r.unexplained_ops:
        ops.add_row(o.op, o.type, str(o.per_step), _us(o.device_us), _us(o.gap_us))
    launches = Table("Launches per decode step (top 12 by device time + gaps)",
                     ["op", "type", "per step", "device", "host gaps before", "layers"])
    for row in [o for o in r.ops if o.per_step][:12]:
        launches.add_row(row.op, row.type, str(row.per_step), _us(row.device_us), _us(row.gap_us), row.layers)
    return [*blocks, gaps, ops, launches]


def step_profiles_table(rows: list[dict]) -> Table:
    """``optkit report`` of a ladder run with --profile: per step, the signatures it removed."""
    table = Table("Step captures (c1): recipe signatures present, and what each step removed",
                  ["step", "decode step", "Δ", "present (µs/step)", "disappeared", "still present"])
    for r in rows:
        if not r["capture"]:
            table.add_row(r["step"], "—", "—", r.get("problem", ""), "—", "—")
            continue
        table.add_row(r["step"], _us(r["wall_us"]), f"{r['wall_delta_us']:+.1f} µs" if "wall_delta_us" in r else "—",
                      ", ".join(f"{k} {v:g}" for k, v in sorted(r["present"].items())) or "none",
                      ", ".join(r.get("disappeared", [])) or "—", ", ".join(r.get("still_present", [])) or "—")
    return table
