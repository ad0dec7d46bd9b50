#!/usr/bin/python3
"""Mutation check of the differential test: is the generator good enough?

Each mutant below is the reference model with one rule broken on purpose.
The tool builds every mutant, runs diff.py with the real model as the
reference and the mutant in the engine's place (CI settings by default),
and reports whether a mismatch was found. A mutant that survives points to
a rule the generated streams do not reach; extend em-gen until it is caught.

Not part of ctest (it takes a few minutes). The patterns are exact text of
refmodel.c; when the model is edited, a mutant whose pattern no longer
matches is reported as STALE and should be updated.

    /usr/bin/python3 tests/differential/mutants.py --gen build/tests/bin/em-gen \
        --ref build/tests/bin/em-refmodel [--seeds 20 --messages 50000] [NAME...]
"""

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (text of refmodel.c, replacement)
MUTANTS = {
    'iceberg_seq': ('        o->display = min64(o->peak, o->leaves);\n        o->seq = next_seq++;', '        o->display = min64(o->peak, o->leaves);'),
    'fok_no_band': ('        if (breaker_outside(s, r->px))\n            break;', '        (void)0;'),
    'breaker_before_stp': ('        /* E: self-trade prevention, continuous matching only. §6, H.10:', '        if (breaker_outside(s, r->px)) { s->phase = PH_AUCTION; s->resume_pending = true; s->resume_at = add_saturating(now_ms, (uint64_t)s->cb_ms); break; }\n        /* E: self-trade prevention, continuous matching only. §6, H.10:'),
    'fok_breaker_before_stp': ('        if (!r || !crosses(a, r))\n            break;\n        if (a->stp != STP_NONE', '        if (!r || !crosses(a, r) || breaker_outside(s, r->px))\n            break;\n        if (a->stp != STP_NONE'),
    'stops_by_priority_not_queue': ('        pick->queued = next_queue_pos++;', '        pick->queued = pick->side == BUY ? (uint64_t)pick->stop : (UINT64_C(1) << 62) - (uint64_t)pick->stop;'),
    'dc_display': ('o->display = o->leaves; /* H.9: hidden part first */', '(void)0;'),
    'uncross_ref': ('better = abs64(c - refpx) < abs64(p - refpx); /* closest to ref */', 'better = c < p;'),
    'uncross_buy_pressure': ('better = c > p;', 'better = c < p;'),
    'stops_sell_first': ('if (!pick) {\n            for', 'if (1) {\n            for'),
    'collar_exclusive': ('return pp >= (__int128)r * (10000 - b) && pp <= (__int128)r * (10000 + b);', 'return pp > (__int128)r * (10000 - b) && pp < (__int128)r * (10000 + b);'),
    'replace_decrease_loses': ('bool loses = new_px != o->px || new_qty > o->qty;', 'bool loses = new_px != o->px || new_qty != o->qty;'),
    'close_keeps_day_stops': ('if (o->tif == TIF_GTC && !resting_mkt)', 'if ((o->tif == TIF_GTC || o->state == ST_PENDING_STOP) && !resting_mkt)'),
    'close_keeps_ioc_stops': ('if (o->tif == TIF_GTC && !resting_mkt)', 'if (o->tif != TIF_DAY && !resting_mkt)'),
    'tick_ties_last': ('(due < 0 || s->resume_at < symbols[due].resume_at))', '(due < 0 || s->resume_at <= symbols[due].resume_at))'),
    'mass_no_stops': ('        cancel_order(o, why);\n    }\n}', '        if (!strcmp(why, "MASS") && o->state == ST_PENDING_STOP) continue;\n        cancel_order(o, why);\n    }\n}'),
    'no_echo_syntax': ('        return reject(gw, &m, "SYNTAX");', '        { emit(gw, "REJECT reason=SYNTAX"); return; }'),
    'preopen_ioc_ok': ('if ((s->phase == PH_PREOPEN || s->phase == PH_AUCTION) && (ti == TIF_IOC || ti == TIF_FOK))', 'if ((s->phase == PH_AUCTION) && (ti == TIF_IOC || ti == TIF_FOK))'),
    'fok_co_counted': ('            r->leaves = 0; /* CO: skipped, canceled during the execution */\n            continue;', '            (void)0;'),
    'uncross_iceberg_display': ('            *buy += o->leaves; /* icebergs: whole leaves (F.5) */', '            *buy += displayed(o);'),
    'breaker_ref_live': ('    if (s->cb_bp == 0 || !s->has_cb_ref)\n        return false;\n    return !inside_band(px, s->cb_ref, s->cb_bp);', '    int64_t r;\n    if (s->cb_bp == 0 || !has_reference(s, &r))\n        return false;\n    return !inside_band(px, r, s->cb_bp);'),
    'mkt_empty_uncross_kept': ('    uncross(sym);\n    cancel_markets(sym); /* H.12', '    if (uncross(sym))\n    cancel_markets(sym); /* H.12'),
    'buy_stops_last_only': ('s->range_hi < o->stop)', 's->last < o->stop)'),
    'sell_stops_last_only': ('s->range_lo > o->stop)', 's->last > o->stop)'),
    'range_kept_after_uncross': ('    start_range(s);\n    run_stops(sym);', '    run_stops(sym);'),
    'range_kept_across_messages': ('        start_range(&symbols[i]);\n', ''),
    'leave_no_uncross': ('if (s->phase == PH_PREOPEN || s->phase == PH_AUCTION || s->phase == PH_HALTED) {', 'if (0) {'),
    'leave_auction_no_uncross': ('s->phase == PH_PREOPEN || s->phase == PH_AUCTION || s->phase', 's->phase == PH_PREOPEN || s->phase'),
    'leave_halted_no_uncross': ('|| s->phase == PH_HALTED) {', ') {'),
    'leave_mkt_always': ('        if (uncross(sym))\n            cancel_markets(sym);\n    }', '        uncross(sym);\n        cancel_markets(sym);\n    }'),
    'halt_uncrosses': ('        s->halted_from = s->phase;', '        if (uncross(sx)) cancel_markets(sx);\n        s->halted_from = s->phase;'),
    'events_from_ops_auth': ('    const struct msgdef *d = find_msgdef(m.type);', '    const struct msgdef *d = find_msgdef(m.type);\n    if (!d && !strcmp(gw, "OPS") && (!strcmp(m.type, "ACK") || !strcmp(m.type, "FILL") || !strcmp(m.type, "PONG") || !strcmp(m.type, "CANCELED") || !strcmp(m.type, "REJECT") || !strcmp(m.type, "LOGGEDIN") || !strcmp(m.type, "REPLACED") || !strcmp(m.type, "TRIGGERED"))) return reject(gw, &m, "AUTH");'),
    'gw_disabled_cancel': ('    cancel_order(o, "USER"); /* B', '    if (gw_disabled(gw)) return reject(gw, m, "GATEWAY_DISABLED");\n    cancel_order(o, "USER"); /* B'),
    'stl_recollar': ('        pick->seq = next_seq++;\n        execute_incoming(pick);', '        pick->seq = next_seq++;\n        if (pick->type == T_LMT && !collar_ok(s, pick->px)) { cancel_order(pick, "USER"); continue; }\n        execute_incoming(pick);'),
    'line_len_1023': ('> MAX_MSG_LEN)', '> MAX_MSG_LEN - 1)'),
    'alloc_sell_by_seq': ('        return a->side == BUY ? a->px > b->px : a->px < b->px;\n    return a->seq < b->seq;\n}\n\nstatic bool executable_at', '        return a->side == BUY ? a->px > b->px : a->seq < b->seq;\n    return a->seq < b->seq;\n}\n\nstatic bool executable_at'),
    'alloc_market_last': ('    if (am != bm)\n        return am;', '    if (am != bm)\n        return bm;'),
    'stop_tie_reversed': ('(o->stop == pick->stop && o->seq < pick->seq))\n                pick = o;\n        }\n        if', '(o->stop == pick->stop && o->seq > pick->seq))\n                pick = o;\n        }\n        if'),
    'dc_event_order': ('struct order *both[2] = {r, a};', 'struct order *both[2] = {a, r};'),
    'cancel_iceberg_display': ('(unsigned long long)o->oid, (long long)o->leaves, (long long)o->cum, why);', '(unsigned long long)o->oid, (long long)displayed(o), (long long)o->cum, why);'),
    'replace_lt_cum': ('if (new_qty <= o->cum) /*', 'if (new_qty < o->cum) /*'),
    'collar_cfg_ref': ('    if (s->band_bp == 0 || !has_reference(s, &r))\n        return true;', '    r = s->ref;\n    if (s->band_bp == 0 || !s->has_ref)\n        return true;'),
    'dup_before_disabled': ('    if (gw_disabled(gw))\n        return reject(gw, m, "GATEWAY_DISABLED");\n    if (find_live(gw, cl))\n        return reject(gw, m, "DUPLICATE_ID");', '    if (find_live(gw, cl))\n        return reject(gw, m, "DUPLICATE_ID");\n    if (gw_disabled(gw))\n        return reject(gw, m, "GATEWAY_DISABLED");'),
    'peak_second_class': ('|| (peak && pk >= q))\n        return reject(gw, m, "BAD_VALUE");', ')\n        return reject(gw, m, "BAD_VALUE");\n    if (peak && pk >= q && find_symbol(sym) >= 0) return reject(gw, m, "BAD_VALUE");'),
    'h3_19_digits_ok': ('if (units >= (__int128)1000000000000000000LL ||', 'if (units >= (__int128)10000000000000000000.0 ||'),
    'pct_3_decimals': ('if (!parse_price(v, &d) || d.ndec > 2)', 'if (!parse_price(v, &d) || d.ndec > 3)'),
    'missing_px_malformed_type': ('    if (t >= 0) {\n        if ((t == T_LMT || t == T_STL) && !px)', '    if (1) {\n        if ((t == T_LMT || t == T_STL || t < 0) && !px)'),
    'logout_noop': ('else if (!strcmp(t, "LOGOUT") || !strcmp(t, "DISCONNECT"))', 'else if (!strcmp(t, "DISCONNECT"))'),
    'mkt_fok_reason_mkt': ('    if (a->tif == TIF_FOK && !fok_fillable(a)) {\n        cancel_order(a, "FOK");', '    if (a->tif == TIF_FOK && !fok_fillable(a)) {\n        cancel_order(a, a->type == T_MKT ? "MKT" : "FOK");'),
    'trade_at_aggressor_px': ('        fill(r, tid, r->px, q);\n        fill(a, tid, r->px, q);', '        fill(r, tid, a->type == T_MKT ? r->px : a->px, q);\n        fill(a, tid, a->type == T_MKT ? r->px : a->px, q);'),
    'uncross_max_surplus': ('(vol == best_vol && vol > 0 && sur < best_abs)', '(vol == best_vol && vol > 0 && sur > best_abs)'),
    'co_stops': ('                cancel_order(r, "STP");\n                continue;', '                cancel_order(r, "STP");\n                break;'),
    'trigger_keeps_seq': ('        pick->seq = next_seq++;\n        execute_incoming(pick);', '        execute_incoming(pick);'),
    'resume_closed_uncross': ('    if (s->halted_from == PH_CLOSED)\n        s->phase = PH_CLOSED;', '    if (0)\n        s->phase = PH_CLOSED;'),
    'symbol_redef_keeps': ('    s->has_ref = ref != NULL;', '    if (ref) s->has_ref = true;\n    if (!band) b = s->band_bp;'),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--version", action="version",
        version="mutants.py " + open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..", "VERSION")).read().strip())
    ap.add_argument("--gen", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--messages", type=int, default=50000)
    ap.add_argument("names", nargs="*", help="mutants to run (default: all)")
    args = ap.parse_args()
    src = open(os.path.join(HERE, "refmodel.c")).read()
    survived = 0
    with tempfile.TemporaryDirectory() as work:
        for name in args.names or MUTANTS:
            old, new = MUTANTS[name]
            if src.count(old) != 1:
                print(f"{name}: STALE (pattern found {src.count(old)} times)")
                survived += 1
                continue
            c = os.path.join(work, name + ".c")
            exe = os.path.join(work, name)
            with open(c, "w") as f:
                f.write(src.replace(old, new))
            r = subprocess.run([args.cc, "-O2", "-D_GNU_SOURCE", "-o", exe, c],
                               capture_output=True, text=True)
            if r.returncode:
                print(f"{name}: does not compile\n{r.stderr[:400]}")
                survived += 1
                continue
            p = subprocess.run([sys.executable, os.path.join(HERE, "diff.py"), "--gen", args.gen,
                                "--ref", args.ref, "--engine", exe, "--seeds", str(args.seeds),
                                "--messages", str(args.messages), "--out",
                                os.path.join(work, "out-" + name), "--max-failures", "1",
                                "--reduce-runs", "0"], capture_output=True, text=True)
            hit = [ln for ln in p.stdout.splitlines() if "MISMATCH" in ln]
            if hit:
                print(f"{name}: caught ({hit[0].split(':')[0]})", flush=True)
            else:
                survived += 1
                print(f"{name}: SURVIVED", flush=True)
    print(f"{len(args.names or MUTANTS)} mutants, {survived} not caught")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
