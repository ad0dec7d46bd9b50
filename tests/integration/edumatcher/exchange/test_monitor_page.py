"""The monitor's page in a real browser: the exchange runs, two traders
trade at 101.00 and 102.50, and headless Chromium loads the page, runs its
script and dumps the DOM: the book ladder, the trade tape and the price
chart show the traded prices, the gateway table shows rejects by reason,
and no figure the monitor lacks is shown as 0.0."""
import json
import re
import shutil
import subprocess

import pytest

from conftest import http_get, wait_until


def chromium():
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    pytest.skip("chromium is not installed (scripts/install-deps installs it)")


def dump_dom(url):
    exe = chromium()
    try:
        r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                            "--disable-dev-shm-usage", "--no-first-run",
                            "--virtual-time-budget=5000", "--dump-dom", url],
                           capture_output=True, text=True, timeout=180)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"chromium cannot start here: {e}")
    if r.returncode != 0 and "<html" not in r.stdout:
        pytest.skip(f"chromium cannot start here: {r.stderr[-500:]}")
    return r.stdout


def section(dom, ident, end_tag):
    i = dom.find(f'id="{ident}"')
    assert i >= 0, f"{ident} is not on the page"
    j = dom.find(end_tag, i)
    return dom[i:j]


def test_market_view_in_chromium(exchange):
    x = exchange(monitor=True)
    a, b = x.trader("GWA"), x.trader("GWB")
    a.send("NEW cl=s1 sym=ABC side=S qty=2 px=101.00")
    b.send("NEW cl=b1 sym=ABC side=B qty=2 px=101.00")
    b.until_pong()
    a.send("NEW cl=s2 sym=ABC side=S qty=1 px=102.50")
    a.until_pong()
    b.send("NEW cl=b2 sym=ABC side=B qty=1 px=102.50", "NEW cl=b3 sym=ABC side=B qty=4 px=99.00",
           "CANCEL cl=nope")
    b.until_pong()
    a.send("NEW cl=s3 sym=ABC side=S qty=3 px=103.00")
    a.until_pong()

    def ready():
        mk = json.loads(http_get(x.monitor_port, "/market.json")[2])
        abc = [s for s in mk["symbols"] if s["sym"] == "ABC"]
        d = json.loads(http_get(x.monitor_port, "/metrics.json")[2])
        gw = [p for p in d["processes"] if "rej_unknown_order" in p["counters"]]
        return (abc and len(abc[0]["tape"]) == 2 and abc[0]["bids"] == [["99.00", 4, 1]]
                and abc[0]["asks"] == [["103.00", 3, 1]] and gw and gw[0]["counters"]["rej_unknown_order"]["total"] == 1)
    assert wait_until(ready, timeout=20, step=0.1), http_get(x.monitor_port, "/market.json")[2]

    dom = dump_dom(f"http://127.0.0.1:{x.monitor_port}/")
    ladder = section(dom, "ladder-ABC", "</table>")
    assert "103.00" in ladder and "99.00" in ladder, ladder   # what rests
    assert "101.00" not in ladder and "102.50" not in ladder, ladder  # traded away
    tape = section(dom, "tape-ABC", "</table>")
    assert "101.00" in tape and "102.50" in tape, tape
    chart = section(dom, "chart-ABC", "</svg>")
    assert "101.00</title>" in chart and "price 102.50</title>" in chart, chart  # low, last
    assert "<path" in chart
    sym = section(dom, "sym-ABC", "</h3>")
    assert "CONTINUOUS" in sym
    gateways = section(dom, "gateways", "</tbody>")
    assert "UNKNOWN_ORDER 1" in gateways, gateways
    assert "NaN" not in dom and "undefined" not in dom
    # the monitor itself times no message: its latency cells are a dash, not 0.0
    procs = section(dom, "procs", "</tbody>")
    mon = [r for r in re.findall(r"<tr.*?</tr>", procs, re.S) if "<td>monitor" in r]
    assert mon, procs
    cells = re.findall(r"<td[^>]*>(.*?)</td>", mon[0])
    assert cells[6] == "–" and cells[7] == "–", cells  # p50, p99
