"""Free TCP ports on loopback for the Python and shell tests, as tests/mesh/free_ports.h gives
the C++ tests: drawn at random below the kernel's ephemeral range (where no connect() takes a
source port and no bind(0) lands), each checked by binding it once, and held until the process
exits by the abstract unix socket "tpnode-test-port-N" that the C++ helper takes too (never a
port this process or another live test process holds). Run as a command,
the reservations end with it: a shell test's ports are only drawn below the range and checked.

    from free_ports import free_port          # (tests/support on sys.path)
    python3 tests/support/free_ports.py 127.0.0.1 127.0.0.2 127.0.0.1   # one port per host
"""
import random
import socket
import sys

_reservations = []  # the open abstract sockets (tests/mesh/free_ports.h)


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
            if low > 2048:
                return low
    except (OSError, ValueError, IndexError):
        pass
    return 32768


def _bindable(host, port):
    with socket.socket() as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def _reserve(port):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # not inheritable by children
    try:
        s.bind(b"\0tpnode-test-port-%d" % port)
    except OSError:
        s.close()
        return False
    _reservations.append(s)
    return True


def free_port(host="127.0.0.1"):
    high = _ephemeral_low() - 1
    low = 10000 if high > 12000 else 1024
    for _ in range(1000):
        port = random.randint(low, high)
        if _bindable(host, port) and _reserve(port):
            return port
    raise RuntimeError(f"no free port on {host} below {high + 1}")


if __name__ == "__main__":
    print(*[free_port(h) for h in (sys.argv[1:] or ["127.0.0.1"])])
