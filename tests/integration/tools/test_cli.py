"""Every binary and script behaves alike on the command line.

The products are installed with `cmake --install` into a temporary prefix
(what `make install` does) and run from there; benchmark and test binaries
come from the build tree, scripts from the repository. For each one:

- `--help` prints the usage on stdout, exits 0 and does nothing else (run
  in an empty directory, which must stay empty: no journal, no data
  directory, no file named --help opened);
- `--version` prints "<name> <version of the VERSION file>" and exits 0;
- a bad option exits 2 with a one-line reason on stderr.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build"))
with open(os.path.join(ROOT, "VERSION")) as f:
    VERSION = f.read().strip()

PRODUCTS = ["gridsync-server", "gridsync-placement", "edumatcher-engine", "edumatcher-gateway",
            "edumatcher-fix", "edumatcher-clearing", "edumatcher-monitor", "edumatcher-replay"]
BUILD_TOOLS = ["bench/bin/em-bench", "bench/bin/em-load", "bench/bin/em-snap",
               "bench/bin/evict-sim", "bench/bin/gs-bench", "bench/bin/origin-storm-stub",
               "bench/bin/store-mem", "bench/bin/zmq-hop", "tests/bin/em-gen",
               "tests/bin/em-refmodel", "tests/bin/edumatcher-replay-checked"]
SCRIPTS = ["scripts/install-deps", "scripts/run", "scripts/run-fuzz", "scripts/gridsync-cluster",
           "scripts/edumatcher", "scripts/gridsync-reshard", "bench/run-all",
           "bench/edumatcher/compare", "bench/edumatcher/exchange-ab",
           "bench/edumatcher/exchange-compare", "bench/edumatcher/exchange-cost",
           "bench/edumatcher/fix-compare",
           "bench/edumatcher/snapshot-restart", "bench/gridsync/compare",
           "bench/gridsync/cluster-compare", "bench/gridsync/origin-storm",
           "bench/gridsync/origin-storm-cost", "bench/gridsync/store-mem-vs-redis",
           "bench/gridsync/types-vs-redis", "bench/gridsync/raft-store-compare",
           "bench/gridsync/seed-bench", "bench/gridsync/snapshot-stall",
           "bench/edumatcher/path-compare", "bench/edumatcher/snapshot-latency",
           "tests/scenarios/run", "tests/differential/diff.py", "tests/differential/mutants.py"]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """Install the products as `make install` does, into a fresh prefix."""
    dest = tmp_path_factory.mktemp("prefix")
    out = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(dest)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return dest


def test_install_puts_only_the_products_in_bin(prefix):
    assert sorted(os.listdir(prefix / "bin")) == sorted(PRODUCTS)
    assert (prefix / "share" / "edumatcher" / "symbols.alf").is_file()


def all_commands():
    cmds = [("installed", name) for name in PRODUCTS]
    cmds += [("build", path) for path in BUILD_TOOLS]
    cmds += [("repo", path) for path in SCRIPTS]
    return cmds


def resolve(kind, name, prefix):
    if kind == "installed":
        return str(prefix / "bin" / name)
    if kind == "build":
        return os.path.join(BUILD, name)
    return os.path.join(ROOT, name)


def run(path, arg, cwd):
    # stdin closed: a tool that wrongly went on to do its work would read EOF
    # and stop instead of hanging the test.
    return subprocess.run([path, arg], cwd=cwd, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("kind,name", all_commands(), ids=lambda v: str(v))
def test_help_version_and_bad_option(kind, name, prefix, tmp_path):
    path = resolve(kind, name, prefix)
    assert os.access(path, os.X_OK), f"{path} is not built"
    base = os.path.basename(name)

    out = run(path, "--help", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip(), "--help printed nothing on stdout"
    assert out.stderr == "", f"--help wrote to stderr: {out.stderr!r}"
    assert os.listdir(tmp_path) == [], f"--help left {os.listdir(tmp_path)}"

    out = run(path, "--version", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{base} {VERSION}"
    assert os.listdir(tmp_path) == []

    out = run(path, "--no-such-option", tmp_path)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert lines, "a bad option must say why on stderr"
    if not name.endswith(".py") and base not in ("gridsync-reshard",):
        # argparse prints its usage first; every other tool one line.
        assert len(lines) == 1, out.stderr
    assert os.listdir(tmp_path) == []


def test_unknown_log_level_is_refused_everywhere(prefix, tmp_path):
    for name in ["gridsync-server", "edumatcher-engine", "edumatcher-gateway", "edumatcher-fix",
                 "edumatcher-clearing", "edumatcher-monitor"]:
        out = subprocess.run([str(prefix / "bin" / name), "--loglevel", "chatty"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
        assert out.returncode == 2, (name, out.stderr)
        assert "chatty" in out.stderr
        assert os.listdir(tmp_path) == []


def test_engine_market_data_keeps_the_best_level(prefix, tmp_path):
    # SYMBOLS answers the best bid and offer from the MD lines: a depth of
    # 0 levels would leave every session without them, so it is refused
    out = subprocess.run([str(prefix / "bin" / "edumatcher-engine"), "--md-depth", "0"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 2, out.stderr
    assert "md-depth" in out.stderr
    assert os.listdir(tmp_path) == []


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
