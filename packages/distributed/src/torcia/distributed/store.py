"""A key-value store for rendezvous, as ``torch.distributed.TCPStore``.

Process groups that are not started by MPI (NCCL) need a place where rank 0 publishes
what the others need to join (NCCL's unique id), and where ranks can tell each other they
are alive. One process (``is_master=True``) serves a table over TCP from a background
thread; every process, the master included, reaches it through a client connection.

Examples
--------
>>> from torcia.distributed import TCPStore
>>> master = TCPStore("127.0.0.1", 0, is_master=True)  # port 0: any free port
>>> worker = TCPStore("127.0.0.1", master.port)
>>> worker.set("answer", "42")
>>> master.get("answer")
b'42'
>>> master.add("count", 2), worker.add("count", 3)
(2, 5)
"""

from __future__ import annotations

import datetime
import socket
import socketserver
import struct
import threading
import time

from torcia.distributed.group import _seconds

__all__ = ["DistStoreError", "TCPStore"]

_HEADER = struct.Struct("!I")
# a request may block this long on the server before the client hears back; a client
# waits a little longer on its socket, so a silent server is told apart from a timeout
_GRACE = 5.0


class DistStoreError(RuntimeError):
    """A store operation failed: a key was not set in time, or the master is unreachable."""


def _bytes(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


# ---------------------------------------------------------------------------------------
# the wire: a message is a count of parts, then each part as length + bytes
# ---------------------------------------------------------------------------------------


def _send(sock, *parts: bytes) -> None:
    sock.sendall(_HEADER.pack(len(parts))
                 + b"".join(_HEADER.pack(len(p)) + p for p in parts))


def _read_exactly(sock, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _receive(sock) -> list[bytes]:
    (count,) = _HEADER.unpack(_read_exactly(sock, 4))
    return [_read_exactly(sock, _HEADER.unpack(_read_exactly(sock, 4))[0])
            for _ in range(count)]


# ---------------------------------------------------------------------------------------
# the server, on the master
# ---------------------------------------------------------------------------------------


class _Table:
    """The store's contents; ``changed`` wakes requests waiting for keys."""

    def __init__(self):
        self.data: dict[bytes, bytes] = {}
        self.changed = threading.Condition()

    def wait(self, keys, seconds) -> list[bytes]:
        """Block until every key is set or ``seconds`` pass; returns the missing keys."""
        deadline = time.monotonic() + seconds
        with self.changed:
            while True:
                missing = [k for k in keys if k not in self.data]
                left = deadline - time.monotonic()
                if not missing or left <= 0:
                    return missing
                self.changed.wait(left)

    def handle(self, op: bytes, args: list[bytes]) -> list[bytes]:
        if op == b"get":
            missing = self.wait(args[:1], float(args[1]))
            return [b"timeout"] if missing else [b"ok", self.data[args[0]]]
        if op == b"wait":
            missing = self.wait(args[1:], float(args[0]))
            return [b"timeout", *missing] if missing else [b"ok"]
        with self.changed:
            if op == b"set":
                self.data[args[0]] = args[1]
                self.changed.notify_all()
                return [b"ok"]
            if op == b"add":
                value = int(self.data.get(args[0], b"0")) + int(args[1])
                self.data[args[0]] = str(value).encode()
                self.changed.notify_all()
                return [b"ok", self.data[args[0]]]
            if op == b"check":
                return [b"ok", b"1" if all(k in self.data for k in args) else b"0"]
            if op == b"delete":
                return [b"ok", b"1" if self.data.pop(args[0], None) is not None else b"0"]
        return [b"error", b"unknown store operation " + op]


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            try:
                op, *args = _receive(self.request)
            except (ConnectionError, OSError):
                return
            _send(self.request, *self.server.table.handle(op, args))


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port):
        super().__init__(("", port), _Handler)
        self.table = _Table()
        threading.Thread(target=self.serve_forever, name="TCPStore", daemon=True).start()


# ---------------------------------------------------------------------------------------
# the client, in every process
# ---------------------------------------------------------------------------------------


class TCPStore:
    """A key-value store served over TCP by the master process.

    Parameters
    ----------
    host_name : str
        The master's address (``MASTER_ADDR``). The master listens on every interface,
        as PyTorch's does, so that the name others use for it need not be its own.
    port : int
        The master's port (``MASTER_PORT``); 0 on the master picks a free one (read it back
        from ``port``).
    world_size : int, optional
        How many processes use the store; with ``wait_for_workers`` the master's
        constructor returns only once that many have connected.
    is_master : bool
        Whether this process serves the store.
    timeout : datetime.timedelta or float
        How long :meth:`get` and :meth:`wait` wait for keys, and how long a client keeps
        trying to reach a master that is not listening yet.
    wait_for_workers : bool

    Examples
    --------
    Rank 0 publishes, the others read (``get`` blocks until the key is set)::

        store = TCPStore("10.0.0.1", 29500, world_size=2, is_master=(rank == 0))
        if rank == 0:
            store.set("id", b"...")
        uid = store.get("id")
    """

    def __init__(self, host_name: str, port: int, world_size: int | None = None,
                 is_master: bool = False, timeout=datetime.timedelta(seconds=300),
                 wait_for_workers: bool = True):
        self.host = host_name
        self.world_size = world_size
        self.timeout = timeout
        self._server = _Server(port) if is_master else None
        self.port = self._server.server_address[1] if is_master else port
        self._lock = threading.Lock()
        self._sock = self._connect()
        joined = self.add("__torcia_store_joined__", 1)
        if is_master and wait_for_workers and world_size is not None:
            self._wait_for_workers(joined)

    def _connect(self):
        deadline = time.monotonic() + _seconds(self.timeout)
        pause = 0.01
        while True:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=5)
                break
            except OSError as exc:
                # the master may start after the workers: keep knocking until the timeout
                if time.monotonic() + pause > deadline:
                    raise DistStoreError(
                        f"TCPStore: could not reach the master at {self.host}:{self.port} "
                        f"within {_seconds(self.timeout):g} s ({exc}); is rank 0 running, "
                        "and are MASTER_ADDR and MASTER_PORT right?") from None
                time.sleep(pause)
                pause = min(1.0, pause * 2)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _wait_for_workers(self, joined):
        deadline = time.monotonic() + _seconds(self.timeout)
        while joined < self.world_size:
            if time.monotonic() > deadline:
                raise DistStoreError(
                    f"TCPStore: {joined} of {self.world_size} processes connected within "
                    f"{_seconds(self.timeout):g} s")
            time.sleep(0.01)
            joined = self.add("__torcia_store_joined__", 0)

    def _request(self, *parts: bytes, blocking_for: float = 0.0) -> list[bytes]:
        with self._lock:
            self._sock.settimeout(blocking_for + _GRACE)
            try:
                _send(self._sock, *parts)
                reply = _receive(self._sock)
            except (ConnectionError, OSError) as exc:
                raise DistStoreError(
                    f"TCPStore: lost the master at {self.host}:{self.port} ({exc}); did the "
                    "process hosting the store (rank 0) exit?") from None
        if reply[0] == b"error":
            raise DistStoreError(reply[1].decode())
        return reply

    def set(self, key: str, value) -> None:
        """Set ``key`` to ``value`` (bytes, or anything ``str()`` turns into them)."""
        self._request(b"set", key.encode(), _bytes(value))

    def get(self, key: str) -> bytes:
        """The value of ``key``, waiting for it to be set (at most the store's timeout)."""
        seconds = _seconds(self.timeout)
        reply = self._request(b"get", key.encode(), str(seconds).encode(), blocking_for=seconds)
        if reply[0] == b"timeout":
            raise DistStoreError(f"TCPStore.get: key {key!r} was not set within {seconds:g} s")
        return reply[1]

    def add(self, key: str, amount: int) -> int:
        """Add ``amount`` to the integer stored at ``key`` (0 when unset); returns the sum."""
        return int(self._request(b"add", key.encode(), str(int(amount)).encode())[1])

    def wait(self, keys, timeout=None) -> None:
        """Wait until every key in ``keys`` is set; raise naming the missing ones after
        ``timeout`` (the store's when None)."""
        seconds = _seconds(self.timeout if timeout is None else timeout)
        reply = self._request(b"wait", str(seconds).encode(), *(k.encode() for k in keys),
                              blocking_for=seconds)
        if reply[0] == b"timeout":
            missing = ", ".join(repr(k.decode()) for k in reply[1:])
            raise DistStoreError(f"TCPStore.wait: keys {missing} were not set within "
                                 f"{seconds:g} s")

    def check(self, keys) -> bool:
        """Whether every key in ``keys`` is set, without waiting."""
        return self._request(b"check", *(k.encode() for k in keys))[1] == b"1"

    def delete_key(self, key: str) -> bool:
        """Remove ``key``; returns whether it was there."""
        return self._request(b"delete", key.encode())[1] == b"1"

    def clone(self) -> TCPStore:
        """Another client of the same store, with its own connection (for a thread that
        must not wait behind this client's blocking requests)."""
        return TCPStore(self.host, self.port, timeout=self.timeout)
