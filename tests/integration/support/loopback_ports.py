"""Free loopback ports for the integration tests' servers (shared by the
GridSync and EduMatcher conftests, which put this folder on sys.path)."""
import socket

# Ports handed out by this process: bind(0) may give the same port again
# once the probing socket is closed, and two of them in one command line
# (an engine's --pub and --query, say) then collide.
_GIVEN_PORTS = set()


def free_port():
    """A loopback TCP port that is free now and not handed out before."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _GIVEN_PORTS:
            _GIVEN_PORTS.add(port)
            return port
