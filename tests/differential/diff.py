#!/usr/bin/python3
"""Differential test of edumatcher-replay against em-refmodel.

For each seed, em-gen writes a random replay stream (docs/alf.md §8); both
edumatcher-replay and em-refmodel replay it, and their outputs must be the
same byte for byte. On a mismatch the driver prints the seed and the first
differing output line, then shrinks the input to its shortest failing
prefix (binary search on the number of input lines, re-running both on
each prefix), saves that prefix under --out, then also tries removing lines
from it (saved as *.reduced.replay), and goes on with the next seed. Exit status: 0 all equal, 1 a mismatch, 77 (ctest's skip code) when
edumatcher-replay is not built yet.

Self-test mode (--cases DIR): replays every DIR/*.replay with em-refmodel
and compares with DIR/*.expected, hand-derived from the spec; also checks
that em-gen gives the same stream for the same seed, and that the model's
own invariants hold on a few generated streams (em-refmodel --check).

Only the standard library; run with Debian's /usr/bin/python3.
"""

import argparse
import difflib
import os
import subprocess
import sys
import tempfile

SKIP = 77


def run(binary, path, timeout):
    """Runs a replay binary on a file; returns (exit status, stdout bytes)."""
    try:
        p = subprocess.run([binary, path], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=timeout)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired:
        return "timeout", b""


def first_difference(a, b):
    """1-based line number and the two lines where outputs a and b differ."""
    la, lb = a.split(b"\n"), b.split(b"\n")
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else b"<end of output>"
        y = lb[i] if i < len(lb) else b"<end of output>"
        if x != y:
            return i + 1, x, y
    return None


def outcomes_differ(args, lines, k, workdir):
    """Do the two binaries disagree on the first k input lines?"""
    path = os.path.join(workdir, "prefix.replay")
    with open(path, "wb") as f:
        f.writelines(lines[:k])
    ref = run(args.ref, path, args.timeout)
    eng = run(args.engine, path, args.timeout)
    return ref != eng, ref, eng


def shrink(args, lines, workdir):
    """Smallest k such that the first k lines already make a mismatch."""
    lo, hi = 0, len(lines)  # invariant: prefix lo agrees, prefix hi differs
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if outcomes_differ(args, lines, mid, workdir)[0]:
            hi = mid
        else:
            lo = mid
    return hi


def reduce_lines(args, lines, workdir):
    """Removes chunks of lines, halving the chunk size, while the two still
    disagree (a light delta debugging). The result still fails but may show
    a different symptom than the prefix; both are saved."""
    chunk = len(lines) // 2
    runs = 0
    while chunk >= 1 and runs < args.reduce_runs:
        i = 0
        while i < len(lines) and runs < args.reduce_runs:
            candidate = lines[:i] + lines[i + chunk:]
            runs += 1
            if candidate and outcomes_differ(args, candidate, len(candidate), workdir)[0]:
                lines = candidate
            else:
                i += chunk
        chunk //= 2
    return lines


def describe(ref, eng):
    code_r, out_r = ref
    code_e, out_e = eng
    msg = []
    if code_r != code_e:
        msg.append(f"  exit status: em-refmodel {code_r}, edumatcher-replay {code_e}")
    d = first_difference(out_r, out_e)
    if d:
        n, x, y = d
        msg.append(f"  first differing output line {n}:")
        msg.append(f"    em-refmodel:       {x.decode(errors='replace')}")
        msg.append(f"    edumatcher-replay: {y.decode(errors='replace')}")
    return "\n".join(msg)


def generate(args, seed):
    cmd = [args.gen, "--seed", str(seed), "--messages", str(args.messages)]
    for feature in args.without:
        cmd += ["--without", feature]
    return subprocess.run(cmd, stdout=subprocess.PIPE, check=True,
                          timeout=args.timeout).stdout


def differential(args):
    if not os.access(args.engine, os.X_OK):
        print(f"SKIP: {args.engine} is not built yet; nothing to compare")
        return SKIP
    os.makedirs(args.out, exist_ok=True)
    failures = 0
    total = 0
    with tempfile.TemporaryDirectory() as workdir:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            stream = generate(args, seed)
            lines = stream.splitlines(keepends=True)
            total += len(lines)
            path = os.path.join(workdir, "stream.replay")
            with open(path, "wb") as f:
                f.write(stream)
            ref = run(args.ref, path, args.timeout)
            eng = run(args.engine, path, args.timeout)
            if ref == eng:
                events = ref[1].count(b"\n")
                print(f"seed {seed}: {len(lines)} messages, {events} events, same")
                continue
            failures += 1
            print(f"seed {seed}: MISMATCH")
            print(describe(ref, eng))
            k = shrink(args, lines, workdir)
            _, ref, eng = outcomes_differ(args, lines, k, workdir)
            saved = os.path.join(args.out, f"mismatch-seed{seed}.replay")
            with open(saved, "wb") as f:
                f.writelines(lines[:k])
            for name, (_, out) in (("refmodel", ref), ("engine", eng)):
                with open(saved[:-len(".replay")] + f".{name}.out", "wb") as f:
                    f.write(out)
            print(f"  shortest failing prefix: {k} input lines, saved to {saved}")
            if k <= 60:
                print("  the prefix:")
                for ln in lines[:k]:
                    print("    " + ln.decode(errors="replace").rstrip())
            else:
                print(f"  last input line: {lines[k - 1].decode(errors='replace').rstrip()}")
            print(describe(ref, eng))
            if args.reduce_runs > 0:
                small = reduce_lines(args, lines[:k], workdir)
                reduced = saved[:-len(".replay")] + ".reduced.replay"
                with open(reduced, "wb") as f:
                    f.writelines(small)
                print(f"  reduced by removing lines: {len(small)} lines, saved to {reduced}")
                if len(small) <= 60:
                    for ln in small:
                        print("    " + ln.decode(errors="replace").rstrip())
            if failures >= args.max_failures:
                print(f"stopping after {failures} mismatching seeds")
                break
    print(f"{total} messages in total, {failures} mismatching seed(s)")
    return 1 if failures else 0


def self_test(args):
    names = sorted(n for n in os.listdir(args.cases) if n.endswith(".replay"))
    bad = 0
    for name in names:
        path = os.path.join(args.cases, name)
        with open(path[:-len(".replay")] + ".expected", "rb") as f:
            expected = f.read()
        code, out = run(args.ref, path, args.timeout)
        if code == 0 and out == expected:
            print(f"{name}: ok")
            continue
        bad += 1
        print(f"{name}: FAILED (exit status {code})")
        diff = difflib.unified_diff(expected.decode().splitlines(),
                                    out.decode(errors="replace").splitlines(),
                                    "expected", "em-refmodel", lineterm="")
        print("\n".join(diff))
    if args.gen:
        args.messages, args.without = 2000, []
        if generate(args, 7) != generate(args, 7) or generate(args, 7) == generate(args, 8):
            bad += 1
            print("em-gen: the same seed must give the same stream, another seed another")
        else:
            print("em-gen: deterministic per seed")
        # The model's own invariants (refmodel.c, --check) on random streams.
        args.messages = 20000
        for seed in (1, 2, 3):
            with tempfile.TemporaryDirectory() as workdir:
                path = os.path.join(workdir, "stream.replay")
                with open(path, "wb") as f:
                    f.write(generate(args, seed))
                p = subprocess.run([args.ref, "--check", path], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, timeout=args.timeout)
            if p.returncode != 0:
                bad += 1
                print(f"em-refmodel --check, seed {seed}: exit status {p.returncode}")
                print(p.stderr.decode(errors="replace")[-2000:])
            else:
                print(f"em-refmodel --check, seed {seed}: invariants hold")
    print(f"{len(names)} cases, {bad} failure(s)")
    return 1 if bad or not names else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--version", action="version",
        version="diff.py " + open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..", "VERSION")).read().strip())
    ap.add_argument("--gen", help="path of em-gen")
    ap.add_argument("--ref", required=True, help="path of em-refmodel")
    ap.add_argument("--engine", help="path of edumatcher-replay")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--messages", type=int, default=50000, help="lines per seed")
    ap.add_argument("--without", action="append", default=[],
                    help="feature left out of the generated streams (see README.md)")
    ap.add_argument("--out", default="differential-out", help="where failing prefixes go")
    ap.add_argument("--max-failures", type=int, default=5,
                    help="stop after this many mismatching seeds")
    ap.add_argument("--reduce-runs", type=int, default=3000,
                    help="at most this many runs to remove lines from a failing prefix (0: off)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per run")
    ap.add_argument("--cases", help="self-test em-refmodel on DIR/*.replay instead")
    args = ap.parse_args()
    if args.cases:
        return self_test(args)
    if not args.gen or not args.engine:
        ap.error("--gen and --engine are required")
    return differential(args)


if __name__ == "__main__":
    sys.exit(main())
