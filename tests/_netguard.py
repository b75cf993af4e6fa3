"""No network during tests: socket connects to anything but this machine fail.

``block()`` patches ``socket.socket.connect``/``connect_ex``/``sendto`` so
that an AF_INET/AF_INET6 destination outside loopback (127.0.0.0/8, ::1,
``localhost``, the unspecified address) raises ``NetworkBlocked``. AF_UNIX
and loopback stay allowed: a Dask LocalCluster, Playwright's driver and the
process pools talk over them. The conftest applies it to every test; the
robustness batch driver applies it in its CLI subprocess too, so ``advisor``
itself is checked, not only the test process.
"""

from __future__ import annotations

import ipaddress
import socket

_LOCAL_NAMES = {"", "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


class NetworkBlocked(OSError):
    """A test (or advisor) tried to reach another machine."""


def is_local(address) -> bool:
    """True when ``address`` (a connect() argument) stays on this machine."""
    host = address[0] if isinstance(address, tuple) and address else address
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    host = host.strip("[]").split("%", 1)[0]
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False  # a remote host name
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


def _guard(method_name: str):
    original = getattr(socket.socket, method_name)

    def guarded(self, *args):
        address = args[-1] if method_name == "sendto" else args[0]
        if self.family in (socket.AF_INET, socket.AF_INET6) and not is_local(address):
            raise NetworkBlocked(f"network access blocked in tests: {method_name}({address!r})")
        return original(self, *args)

    guarded.__wrapped__ = original  # type: ignore[attr-defined]
    return original, guarded


def block():
    """Install the guard; returns a function that removes it."""
    saved = {}
    for name in ("connect", "connect_ex", "sendto"):
        original, guarded = _guard(name)
        saved[name] = original
        setattr(socket.socket, name, guarded)

    def undo() -> None:
        for name, original in saved.items():
            setattr(socket.socket, name, original)

    return undo
