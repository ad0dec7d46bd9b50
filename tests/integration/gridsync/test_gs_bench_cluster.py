"""gs-bench --cluster against a real 3-node GridSync cluster: it routes by
CLUSTER SLOTS and, when leadership moves under it, follows -MOVED to the new
leader and re-sends, so every request it sent is answered.

The map gs-bench reads is made stale by the cluster itself, not by a test
hook: a node is killed, its group elects a leader on a survivor, gs-bench
starts and reads that map, then the node comes back and its group's
leadership returns to it (leadership prefers one group per node)."""
import json
import signal
import subprocess
import time

from test_cluster import make_cluster  # noqa: F401  (fixture)
from test_gs_bench import gs_bench


def progress_lines(proc, n):
    """Wait for n more progress lines of gs-bench on stderr (one a second)."""
    for _ in range(n):
        line = proc.stderr.readline()
        assert line, "gs-bench exited early"


def test_cluster_mode_follows_moved_and_answers_every_request(make_cluster, tmp_path):
    c = make_cluster(3)
    c.wait_settled()
    back = c.nodes[0]
    group = f"{back.host}:{back.port}"
    back.kill9()
    c.killed.add(back.i)
    deadline = time.monotonic() + 60
    while group not in c.leaders() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert c.leaders().get(group) not in (None, back.port)

    out = tmp_path / "run.json"
    proc = subprocess.Popen(
        [gs_bench(), "--cluster", "-s", "127.0.0.1", "-p", str(c.nodes[1].port), "-c", "2",
         "-k", "1000", "-g", "0.5", "--load", "-w", "0", "-t", "3600", "--drain", "60",
         "--progress", "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        progress_lines(proc, 1)  # the map is read before the first request
        back.start()
        c.killed.discard(back.i)
        c.wait_settled(timeout=60)
        progress_lines(proc, 2)  # requests went out after the move
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    res = json.loads(out.read_text())
    errors, cl = res["results"]["errors"], res["results"]["cluster"]
    assert errors["lost"] == 0, stdout  # every request sent was answered
    assert errors["protocol"] == 0 and errors["unexpected"] == 0, stdout
    assert errors["connections_closed"] == 0, stdout
    assert res["results"]["loaded"] == 1000
    assert res["results"]["requests"] > 0
    assert cl["moved"] >= 1, stdout  # the stale map was corrected by -MOVED
    assert cl["map_reads"] >= 2, stdout  # ... and re-read
    assert cl["nodes"] == 3, stdout  # the returning node was reached
    assert "MOVED followed" in stdout
