"""HTTP/1.1 by hand over raw sockets, for the tests of slow and hostile clients.

An HTTP client sends a request whole; these tests need heads cut short, bodies
trickled and heads of any size, and read the answer the service writes as the
connection's last.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from typing import Any

TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes

    def problem(self) -> dict[str, Any]:
        assert self.headers.get("content-type") == "application/problem+json", self.headers
        problem: dict[str, Any] = json.loads(self.body)
        return problem


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)


def head(method: str, path: str, *headers: str, length: int | None = None) -> bytes:
    """A request head; ``length`` sets Content-Length (and a JSON Content-Type)."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *headers]
    if length is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {length}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def padded_head(size: int) -> bytes:
    """A ``GET /healthz`` head of exactly ``size`` bytes, padded by a header of its own."""
    bare = head("GET", "/healthz", "X-Pad: ")
    padded = head("GET", "/healthz", "X-Pad: " + "p" * (size - len(bare)))
    assert len(padded) == size
    return padded


def read_answer(sock: socket.socket, timeout_s: float = TIMEOUT_S) -> Answer:
    """The next answer on ``sock`` (with a Content-Length body); fails after ``timeout_s``."""
    sock.settimeout(timeout_s)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed without an answer (got {data!r})"
        data += chunk
    raw_head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = raw_head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed in the middle of an answer"
        body += chunk
    return Answer(int(status_line.split()[1]), headers, body[:length])


def closed_by_peer(sock: socket.socket, timeout_s: float = TIMEOUT_S) -> bool:
    """True once the service closes ``sock`` (an end of file or a reset) within ``timeout_s``;
    what it still sends before is read and dropped."""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
    return False


def trickle_until_answered(
    sock: socket.socket, byte: bytes, timeout_s: float = TIMEOUT_S
) -> Answer:
    """Send ``byte`` every 0.1 s until the service answers; that answer."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        sock.settimeout(0.1)
        try:
            peeked = sock.recv(1, socket.MSG_PEEK)
        except TimeoutError:
            sock.sendall(byte)
            continue
        assert peeked, "closed without an answer"
        return read_answer(sock)
    raise AssertionError(f"no answer within {timeout_s:g} s")
