"""The autouse network guard (tests/_netguard.py) blocks the network and
keeps loopback and AF_UNIX working."""

from __future__ import annotations

import socket

import pytest
from _netguard import NetworkBlocked, is_local


def test_remote_connect_is_blocked():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        with pytest.raises(NetworkBlocked):
            s.connect(("192.0.2.1", 80))  # TEST-NET-1, never routed
    with pytest.raises(OSError):
        socket.create_connection(("198.51.100.7", 443), timeout=1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        with pytest.raises(NetworkBlocked):
            s.sendto(b"x", ("203.0.113.9", 53))


def test_loopback_and_unix_sockets_work(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            conn, _ = server.accept()
            client.sendall(b"ping")
            assert conn.recv(4) == b"ping"
            conn.close()
        with socket.create_connection(("localhost", port), timeout=5):
            server.accept()[0].close()
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen(1)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)


@pytest.mark.parametrize("addr,local", [
    (("127.0.0.1", 1), True), (("127.5.6.7", 1), True), (("::1", 1, 0, 0), True),
    (("localhost", 1), True), (("0.0.0.0", 1), True), (("::ffff:127.0.0.1", 1, 0, 0), True),
    (("10.0.0.1", 1), False), (("example.com", 80), False), (("2001:db8::1", 1, 0, 0), False),
])
def test_is_local(addr, local):
    assert is_local(addr) is local
