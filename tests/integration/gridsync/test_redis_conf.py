"""gridsync-server started from a redis.conf copied from a Redis install
(Debian's /etc/redis/redis.conf, through an include line, as an operator
would reuse it): Redis's directives that do not apply are accepted with a
logged warning; daemonize, pidfile, logfile, bind with several addresses,
tcp-keepalive, databases, appendfsync, save and client-output-buffer-limit
(Redis's per-class syntax) are honoured or reported; CONFIG REWRITE writes
the running values back."""
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest
import redis

from conftest import find_binary, free_port
from test_vs_redis import Conn, compare, pair, redis_port  # noqa: F401 (fixtures)

REDIS_CONF = "/etc/redis/redis.conf"


def copy_redis_conf(tmp_path):
    if not os.access(REDIS_CONF, os.R_OK):
        pytest.skip(f"{REDIS_CONF} is not readable (redis-server not installed)")
    copy = tmp_path / "redis.conf"
    shutil.copy(REDIS_CONF, copy)
    return copy


def wait_for(path_or_port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if isinstance(path_or_port, int):
            try:
                socket.create_connection(("127.0.0.1", path_or_port), timeout=1).close()
                return True
            except OSError:
                pass
        elif os.path.exists(path_or_port) and os.path.getsize(path_or_port) > 0:
            return True
        time.sleep(0.02)
    return False


def stop_pid(pid):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)


def test_debian_redis_conf_daemonizes_and_rewrites(tmp_path):
    copy = copy_redis_conf(tmp_path)
    port = free_port()
    pidfile, logfile = tmp_path / "gs.pid", tmp_path / "gs.log"
    main = tmp_path / "gridsync.conf"
    # Later lines win, as in Redis: the copied file says daemonize yes,
    # port 6379 and Debian's paths; this host's test overrides port and paths.
    main.write_text(f"include {copy}\nport {port}\npidfile {pidfile}\nlogfile {logfile}\n"
                    f"dir {tmp_path}\n")
    exe = find_binary("gridsync-server")
    # daemonize yes: the command returns at once, the daemon keeps running.
    rc = subprocess.run([exe, str(main)], timeout=30, capture_output=True)
    assert rc.returncode == 0, rc.stderr
    pid = None
    try:
        assert wait_for(str(pidfile)), "no pidfile written"
        pid = int(pidfile.read_text())
        assert wait_for(port)
        c = redis.Redis(port=port, socket_timeout=10, decode_responses=True)
        assert c.ping()
        got = {k: c.config_get(k)[k] for k in
               ("bind", "daemonize", "databases", "tcp-keepalive", "appendfsync", "protected-mode",
                "client-output-buffer-limit", "loglevel")}
        assert got == {"bind": "127.0.0.1 -::1", "daemonize": "yes", "databases": "16",
                       "tcp-keepalive": "300", "appendfsync": "everysec", "protected-mode": "yes",
                       "client-output-buffer-limit":
                           "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
                       "loglevel": "notice"}
        assert c.info("server")["process_id"] == pid
        # bind's second address: ::1 when this host has IPv6 loopback.
        try:
            s6 = socket.create_connection(("::1", port), timeout=5)
        except OSError:
            s6 = None
        if s6:
            s6.sendall(b"PING\r\n")
            assert s6.recv(100) == b"+PONG\r\n"
            s6.close()
        log = logfile.read_text()
        assert "ready to accept connections" in log
        # The directives that do not apply were named, with their lines.
        assert "'activerehashing' does not apply here; ignored" in log
        # CONFIG REWRITE: the running values go into the file it started from.
        assert c.config_set("maxmemory", "5mb")
        assert c.config_set("client-output-buffer-limit", "pubsub 1mb 256kb 5")
        assert c.execute_command("CONFIG", "REWRITE") == "OK"
        text = main.read_text()
        assert f"include {copy}" in text  # other lines are kept
        assert "maxmemory 5242880" in text
        assert "pubsub 1048576 262144 5" in text
        c.shutdown(nosave=True) if hasattr(c, "shutdown") else c.execute_command("SHUTDOWN")
    except redis.ConnectionError:
        pass  # SHUTDOWN closes the connection
    finally:
        if pid:
            stop_pid(pid)
    deadline = time.monotonic() + 10
    while pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not pidfile.exists(), "the pidfile outlived the process"
    # The rewritten file starts a server with the values set before.
    port2 = free_port()
    with open(main, "a") as f:
        f.write(f"port {port2}\ndaemonize no\n")
    proc = subprocess.Popen([exe, str(main)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        assert wait_for(port2)
        c = redis.Redis(port=port2, socket_timeout=10, decode_responses=True)
        assert c.config_get("maxmemory") == {"maxmemory": "5242880"}
        assert c.config_get("client-output-buffer-limit")["client-output-buffer-limit"].endswith(
            "pubsub 1048576 262144 5")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_security_directives_are_refused(tmp_path):
    """A directive that would change who may do what is not ignored: the
    start fails and says where."""
    conf = tmp_path / "bad.conf"
    conf.write_text("port 0\nrename-command CONFIG \"\"\n")
    rc = subprocess.run([find_binary("gridsync-server"), str(conf)], timeout=30,
                        capture_output=True, text=True)
    assert rc.returncode != 0
    assert "bad.conf:2:" in rc.stderr and "rename-command" in rc.stderr


def test_config_file_quoting_and_repeated_save(tmp_path, make_server):
    conf = tmp_path / "q.conf"
    conf.write_text('save 900 1\nsave 300 10\nrequirepass "p w\\x21"\n'
                    "client-output-buffer-limit normal 0 0 0\n"
                    "client-output-buffer-limit pubsub 2mb 1mb 30\n")
    s = make_server(str(conf))
    c = s.client(decode_responses=True, password="p w!")
    assert c.config_get("save") == {"save": "900 1 300 10"}
    assert c.config_get("client-output-buffer-limit")["client-output-buffer-limit"] == (
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 2097152 1048576 30")


def test_bind_several_addresses(make_server):
    """bind with two addresses listens on both (any 127/8 address is
    loopback on Linux); a '-' address that does not exist is skipped."""
    s = make_server("--bind", "127.0.0.1 127.0.0.2 -192.0.2.1")
    for host in ("127.0.0.1", "127.0.0.2"):
        c = redis.Redis(host=host, port=s.port, socket_timeout=10)
        assert c.ping()
        c.close()


def test_bind_missing_address_fails_without_dash(tmp_path):
    rc = subprocess.run([find_binary("gridsync-server"), "--port", str(free_port()), "--bind",
                         "127.0.0.1 192.0.2.1"], timeout=30, capture_output=True, text=True)
    assert rc.returncode != 0
    assert "192.0.2.1" in rc.stdout + rc.stderr


def non_loopback_address():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent for UDP connect
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") else addr


def test_protected_mode_refuses_non_loopback(make_server):
    addr = non_loopback_address()
    if not addr:
        pytest.skip("this host has no non-loopback address")
    s = make_server("--bind", "0.0.0.0", "--protected-mode", "yes")
    sock = socket.create_connection((addr, s.port), timeout=10)
    sock.sendall(b"PING\r\n")
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    assert data.startswith(b"-DENIED Redis is running in protected mode")
    assert redis.Redis(port=s.port, socket_timeout=10).ping()  # loopback is served


@pytest.mark.parametrize("value", ["foo 1 2 3", "normal 1 2", "pubsub 1x 2 3", "pubsub 1 2 -1",
                                   "normal 1mb 1kb 10 pubsub 0 0 0", "replica 0 0 0"])
def test_output_buffer_limit_syntax_same_as_redis(pair, value):  # noqa: F811 (fixture)
    compare(pair, [["CONFIG", "SET", "client-output-buffer-limit", value]])
    g, r = pair
    assert g.cmd("CONFIG", "GET", "client-output-buffer-limit").split(b"pubsub")[1] == \
        r.cmd("CONFIG", "GET", "client-output-buffer-limit").split(b"pubsub")[1]
    for c in pair:
        c.cmd("CONFIG", "SET", "client-output-buffer-limit", "pubsub 32mb 8mb 60")
