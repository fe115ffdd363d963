"""Key-value stores for rendezvous, as ``torch.distributed``: :class:`TCPStore`,
:class:`FileStore`, :class:`HashStore` and :class:`PrefixStore`, all with the interface of
:class:`Store`.

Process groups that are not started by MPI (NCCL) need a place where rank 0 publishes
what the others need to join (NCCL's unique id), and where ranks can tell each other they
are alive. A TCPStore's master process (``is_master=True``) serves a table over TCP from a
background thread; every process, the master included, reaches it through a client
connection. A FileStore keeps the table in a file that processes of one machine (or of a
shared file system) open; a HashStore keeps it in this process, for threads.

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

import collections
import datetime
import fcntl
import os
import socket
import socketserver
import struct
import threading
import time

from torcia.distributed.group import _seconds

__all__ = ["DistBackendError", "DistError", "DistNetworkError", "DistStoreError", "FileStore",
           "HashStore", "PrefixStore", "QueueEmptyError", "Store", "TCPStore"]

_HEADER = struct.Struct("!I")
# a request may block this long on the server before the client hears back; a client
# waits a little longer on its socket, so a silent server is told apart from a timeout
_GRACE = 5.0
_DEFAULT_TIMEOUT = datetime.timedelta(seconds=300)


class DistError(RuntimeError):
    """An error of torcia.distributed (the base of the other distributed errors).

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> issubclass(dist.DistError, RuntimeError)
    True
    """


class DistBackendError(DistError):
    """A process-group backend failed (a communicator broke, a collective was aborted).

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> issubclass(dist.DistBackendError, dist.DistError)
    True
    """


class DistNetworkError(DistError):
    """A network operation of the distributed layer failed.

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> issubclass(dist.DistNetworkError, dist.DistError)
    True
    """


class DistStoreError(DistError):
    """A store operation failed: a key was not set in time, or the master is unreachable.

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> issubclass(dist.DistStoreError, dist.DistError)
    True
    """


class QueueEmptyError(DistStoreError):
    """A non-blocking :meth:`Store.queue_pop` found the queue empty.

    Examples
    --------
    >>> import torcia.distributed as dist
    >>> issubclass(dist.QueueEmptyError, dist.DistStoreError)
    True
    """


def _bytes(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


# ---------------------------------------------------------------------------------------
# the wire: a message is a count of parts, then each part as length + bytes
# ---------------------------------------------------------------------------------------


def _pack(*parts: bytes) -> bytes:
    return (_HEADER.pack(len(parts))
            + b"".join(_HEADER.pack(len(p)) + p for p in parts))


def _send(sock, *parts: bytes) -> None:
    sock.sendall(_pack(*parts))


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


def _unpack(data: bytes) -> list[bytes]:
    """The parts :func:`_pack` packed; ValueError where ``data`` is not such a blob."""
    try:
        (count,) = _HEADER.unpack_from(data, 0)
        pos, parts = 4, []
        for _ in range(count):
            (n,) = _HEADER.unpack_from(data, pos)
            if pos + 4 + n > len(data):
                raise struct.error("a part runs past the end")
            parts.append(data[pos + 4:pos + 4 + n])
            pos += 4 + n
    except struct.error as exc:
        raise ValueError(f"not a packed table ({len(data)} bytes): {exc}") from None
    if pos != len(data):
        raise ValueError(f"not a packed table: {len(data) - pos} bytes after its end")
    return parts


# ---------------------------------------------------------------------------------------
# the table, shared by every store
# ---------------------------------------------------------------------------------------


class _Table:
    """The store's contents; ``changed`` wakes requests waiting for keys.

    :meth:`handle` runs one request (an operation name and its byte-string arguments) and
    returns the reply, ``[b"ok", ...]``, ``[b"timeout", ...]``, ``[b"empty"]`` or
    ``[b"error", message]``; TCPStore's server, HashStore and FileStore all go through it.
    """

    def __init__(self):
        self.data: dict[bytes, bytes] = {}
        self.queues: dict[bytes, collections.deque] = {}
        self.changed = threading.Condition()

    def wait(self, keys, seconds, ready=None) -> list[bytes]:
        """Block until every key is set (``ready()`` is true, when given) or ``seconds``
        pass; returns the missing keys (with ``ready``: ``keys`` unless ready)."""
        deadline = time.monotonic() + seconds
        with self.changed:
            while True:
                if ready is not None:
                    missing = [] if ready() else list(keys)
                else:
                    missing = [k for k in keys if k not in self.data]
                left = deadline - time.monotonic()
                if not missing or left <= 0:
                    return missing
                self.changed.wait(left)

    def handle(self, op: bytes, args: list[bytes]) -> list[bytes]:
        if op == b"get":
            missing = self.wait(args[:1], float(args[1]))
            return [b"timeout"] if missing else [b"ok", self.data[args[0]]]
        if op in (b"wait", b"multi_get"):
            missing = self.wait(args[1:], float(args[0]))
            if missing:
                return [b"timeout", *missing]
            return [b"ok", *(self.data[k] for k in args[1:])] if op == b"multi_get" else [b"ok"]
        if op == b"queue_pop":
            with self.changed:
                queue = self.queues.setdefault(args[0], collections.deque())
            self.wait(args[:1], float(args[1]), ready=lambda: bool(queue))
            with self.changed:
                return [b"ok", queue.popleft()] if queue else [b"empty"]
        with self.changed:
            reply = self._update(op, args)
            self.changed.notify_all()
            return reply

    def _update(self, op, args):
        data = self.data
        if op == b"set":
            data[args[0]] = args[1]
        elif op == b"multi_set":
            data.update(zip(args[0::2], args[1::2]))
        elif op == b"add":
            data[args[0]] = str(int(data.get(args[0], b"0")) + int(args[1])).encode()
            return [b"ok", data[args[0]]]
        elif op == b"append":
            data[args[0]] = data.get(args[0], b"") + args[1]
        elif op == b"compare_set":
            key, expected, desired = args
            # PyTorch's rule: a missing key counts as holding b"" (so b"" creates it)
            if data.get(key, b"") == expected:
                data[key] = desired
            return [b"ok", data.get(key, expected)]
        elif op == b"check":
            return [b"ok", b"1" if all(k in data for k in args) else b"0"]
        elif op == b"delete":
            return [b"ok", b"1" if data.pop(args[0], None) is not None else b"0"]
        elif op == b"num_keys":
            return [b"ok", str(len(data)).encode()]
        elif op == b"list_keys":
            return [b"ok", *data]
        elif op == b"queue_push":
            self.queues.setdefault(args[0], collections.deque()).append(args[1])
        elif op == b"queue_len":
            return [b"ok", str(len(self.queues.get(args[0], ()))).encode()]
        else:
            return [b"error", b"unknown store operation " + op]
        return [b"ok"]

    # a FileStore keeps the table in a file between requests
    def dump(self) -> bytes:
        items = [p for kv in self.data.items() for p in kv]
        queues = [p for k, q in self.queues.items() for p in (k, _pack(*q))]
        return _pack(_pack(*items), _pack(*queues))

    def load(self, blob: bytes) -> None:
        items, queues = _unpack(blob)
        items, queues = _unpack(items), _unpack(queues)
        self.data = dict(zip(items[0::2], items[1::2]))
        self.queues = {k: collections.deque(_unpack(q))
                       for k, q in zip(queues[0::2], queues[1::2])}


# ---------------------------------------------------------------------------------------
# the interface of every store
# ---------------------------------------------------------------------------------------


class Store:
    """A key-value store that processes (or threads) of a job share, as
    ``torch.distributed.Store``: the base of :class:`TCPStore`, :class:`FileStore`,
    :class:`HashStore` and :class:`PrefixStore`.

    Keys are strings; values are bytes (``str`` values are stored encoded). ``get`` and
    ``wait`` block until the keys are set, at most ``timeout``. A subclass implements
    ``_request(op, *args, blocking_for=seconds)``, returning the table's reply.

    Examples
    --------
    >>> from torcia.distributed import HashStore
    >>> store = HashStore()
    >>> store.compare_set("leader", "", "rank0"), store.compare_set("leader", "", "rank1")
    (b'rank0', b'rank0')
    >>> store.queue_push("jobs", "a"); store.queue_len("jobs")
    1
    >>> store.queue_pop("jobs")
    b'a'
    """

    def __init__(self, timeout=_DEFAULT_TIMEOUT):
        self._timeout = timeout

    @property
    def timeout(self) -> datetime.timedelta:
        """How long blocking operations wait."""
        t = self._timeout
        return t if isinstance(t, datetime.timedelta) else datetime.timedelta(seconds=t)

    def set_timeout(self, timeout) -> None:
        """Set how long blocking operations wait (a timedelta or seconds)."""
        self._timeout = timeout

    def _request(self, *parts: bytes, blocking_for: float = 0.0) -> list[bytes]:
        raise NotImplementedError(f"{type(self).__name__} must implement _request or "
                                  "override the store's methods")

    def _name(self) -> str:
        return type(self).__name__

    def set(self, key: str, value) -> None:
        """Set ``key`` to ``value`` (bytes, or anything ``str()`` turns into them)."""
        self._request(b"set", key.encode(), _bytes(value))

    def get(self, key: str) -> bytes:
        """The value of ``key``, waiting for it to be set (at most the store's timeout)."""
        seconds = _seconds(self.timeout)
        reply = self._request(b"get", key.encode(), str(seconds).encode(), blocking_for=seconds)
        if reply[0] == b"timeout":
            raise DistStoreError(f"{self._name()}.get: key {key!r} was not set within "
                                 f"{seconds:g} s")
        return reply[1]

    def add(self, key: str, amount: int) -> int:
        """Add ``amount`` to the integer stored at ``key`` (0 when unset); returns the sum."""
        return int(self._request(b"add", key.encode(), str(int(amount)).encode())[1])

    def append(self, key: str, value) -> None:
        """Append ``value`` to the bytes at ``key`` (set it when unset)."""
        self._request(b"append", key.encode(), _bytes(value))

    def compare_set(self, key: str, expected_value, desired_value) -> bytes:
        """Set ``key`` to ``desired_value`` if it holds ``expected_value`` (a missing key
        holds ``""``); returns the value ``key`` holds afterwards (``expected_value`` when
        it is still missing)."""
        return self._request(b"compare_set", key.encode(), _bytes(expected_value),
                             _bytes(desired_value))[1]

    def wait(self, keys, timeout=None) -> None:
        """Wait until every key in ``keys`` is set; raise naming the missing ones after
        ``timeout`` (the store's when None)."""
        seconds = _seconds(self.timeout if timeout is None else timeout)
        reply = self._request(b"wait", str(seconds).encode(), *(k.encode() for k in keys),
                              blocking_for=seconds)
        if reply[0] == b"timeout":
            missing = ", ".join(repr(k.decode()) for k in reply[1:])
            raise DistStoreError(f"{self._name()}.wait: keys {missing} were not set within "
                                 f"{seconds:g} s")

    def multi_get(self, keys) -> list[bytes]:
        """The values of ``keys``, waiting for all of them (at most the timeout)."""
        seconds = _seconds(self.timeout)
        reply = self._request(b"multi_get", str(seconds).encode(), *(k.encode() for k in keys),
                              blocking_for=seconds)
        if reply[0] == b"timeout":
            missing = ", ".join(repr(k.decode()) for k in reply[1:])
            raise DistStoreError(f"{self._name()}.multi_get: keys {missing} were not set "
                                 f"within {seconds:g} s")
        return list(reply[1:])

    def multi_set(self, keys, values) -> None:
        """Set each of ``keys`` to the matching entry of ``values``, at once."""
        keys, values = list(keys), list(values)
        if len(keys) != len(values):
            raise ValueError(f"multi_set: {len(keys)} keys but {len(values)} values")
        self._request(b"multi_set", *(p for k, v in zip(keys, values)
                                      for p in (k.encode(), _bytes(v))))

    def check(self, keys) -> bool:
        """Whether every key in ``keys`` is set, without waiting."""
        return self._request(b"check", *(k.encode() for k in keys))[1] == b"1"

    def delete_key(self, key: str) -> bool:
        """Remove ``key``; returns whether it was there."""
        return self._request(b"delete", key.encode())[1] == b"1"

    def num_keys(self) -> int:
        """How many keys are set (a TCPStore counts its own bookkeeping key too)."""
        return int(self._request(b"num_keys")[1])

    def list_keys(self) -> list[str]:
        """The keys that are set."""
        return [k.decode() for k in self._request(b"list_keys")[1:]]

    def queue_push(self, key: str, value) -> None:
        """Append ``value`` to the queue ``key`` (queues are apart from the keys)."""
        self._request(b"queue_push", key.encode(), _bytes(value))

    def queue_pop(self, key: str, block: bool = True) -> bytes:
        """Remove and return the oldest value of the queue ``key``; with ``block``, wait
        for one (at most the timeout, then :class:`DistStoreError`), else raise
        :class:`QueueEmptyError` at once when it is empty."""
        seconds = _seconds(self.timeout) if block else 0.0
        reply = self._request(b"queue_pop", key.encode(), str(seconds).encode(),
                              blocking_for=seconds)
        if reply[0] == b"empty":
            if block:
                raise DistStoreError(f"{self._name()}.queue_pop: queue {key!r} stayed empty "
                                     f"for {seconds:g} s")
            raise QueueEmptyError("queue is empty")
        return reply[1]

    def queue_len(self, key: str) -> int:
        """How many values the queue ``key`` holds."""
        return int(self._request(b"queue_len", key.encode())[1])

    def has_extended_api(self) -> bool:
        """Whether the store has ``append``, ``multi_get`` and ``multi_set`` (all do)."""
        return True

    def clone(self) -> Store:
        """Another handle on the same store, safe to use from another thread."""
        raise NotImplementedError(f"{type(self).__name__} cannot be cloned")


class HashStore(Store):
    """A store held in this process, for threads (and tests), as
    ``torch.distributed.HashStore``.

    Examples
    --------
    >>> from torcia.distributed import HashStore
    >>> store = HashStore()
    >>> store.set("a", "1"); store.add("a", 2)
    3
    """

    def __init__(self):
        super().__init__()
        self._table = _Table()

    def _request(self, *parts, blocking_for=0.0):
        return self._table.handle(parts[0], list(parts[1:]))

    def clone(self) -> HashStore:
        """A handle on the same table."""
        other = HashStore.__new__(HashStore)
        Store.__init__(other, self._timeout)
        other._table = self._table
        return other


class FileStore(Store):
    """A store kept in a file that every process opens, as ``torch.distributed.FileStore``
    (processes of one machine, or of a file system with working ``flock``).

    Each operation locks the file, reads the table, applies the operation and writes the
    table back; blocking operations poll until their keys appear.

    Parameters
    ----------
    file_name : str
        The file (created when missing).
    world_size : int, default -1
        How many processes use the store (-1: unknown); kept for PyTorch's signature.

    Examples
    --------
    >>> import os, tempfile
    >>> from torcia.distributed import FileStore
    >>> path = os.path.join(tempfile.mkdtemp(), "store")
    >>> FileStore(path).set("key", "value")
    >>> FileStore(path).get("key")
    b'value'
    """

    def __init__(self, file_name: str, world_size: int = -1):
        super().__init__()
        self.path = os.fspath(file_name)
        self.world_size = world_size
        with open(self.path, "ab"):
            pass

    def _name(self) -> str:
        return f"FileStore({self.path!r})"

    def _once(self, op, args):
        table = _Table()
        with open(self.path, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                blob = f.read()
                if blob:
                    try:
                        table.load(blob)
                    except ValueError as exc:
                        raise DistStoreError(
                            f"{self._name()}: the file is not a store's table (another "
                            f"program's file, or one cut short): {exc}") from None
                # blocking operations are polled here, one non-blocking try at a time
                if op in (b"get", b"queue_pop"):
                    args = [args[0], b"0"]
                elif op in (b"wait", b"multi_get"):
                    args = [b"0", *args[1:]]
                reply = table.handle(op, args)
                if op not in (b"get", b"wait", b"multi_get", b"check", b"num_keys",
                              b"list_keys", b"queue_len") and reply[0] == b"ok":
                    f.seek(0)
                    f.truncate()
                    f.write(table.dump())
                    # written before the lock goes: flushed at close, after the unlock, a
                    # process that locks in between would read a torn table and write
                    # back one without this operation's keys
                    f.flush()
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
        return reply

    def _request(self, *parts, blocking_for=0.0):
        op, args = parts[0], list(parts[1:])
        deadline = time.monotonic() + blocking_for
        pause = 0.001
        while True:
            reply = self._once(op, args)
            if reply[0] not in (b"timeout", b"empty") or time.monotonic() >= deadline:
                return reply
            time.sleep(pause)
            pause = min(0.05, pause * 2)

    def clone(self) -> FileStore:
        """Another handle on the same file."""
        other = FileStore(self.path, self.world_size)
        other._timeout = self._timeout
        return other


class PrefixStore(Store):
    """A view of another store whose keys all start with ``prefix + "/"``, as
    ``torch.distributed.PrefixStore``: several users of one store keep apart.

    Parameters
    ----------
    prefix : str
    store : Store
        The store underneath (``underlying_store``).

    Examples
    --------
    >>> from torcia.distributed import HashStore, PrefixStore
    >>> base = HashStore()
    >>> PrefixStore("job1", base).set("step", "3")
    >>> base.get("job1/step")
    b'3'
    """

    def __init__(self, prefix: str, store: Store):
        super().__init__(store.timeout)
        self.prefix = prefix
        self.underlying_store = store

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    @property
    def timeout(self):
        return self.underlying_store.timeout

    def set_timeout(self, timeout) -> None:
        self.underlying_store.set_timeout(timeout)

    def set(self, key, value):
        self.underlying_store.set(self._key(key), value)

    def get(self, key):
        return self.underlying_store.get(self._key(key))

    def add(self, key, amount):
        return self.underlying_store.add(self._key(key), amount)

    def append(self, key, value):
        self.underlying_store.append(self._key(key), value)

    def compare_set(self, key, expected_value, desired_value):
        return self.underlying_store.compare_set(self._key(key), expected_value,
                                                 desired_value)

    def wait(self, keys, timeout=None):
        self.underlying_store.wait([self._key(k) for k in keys], timeout)

    def multi_get(self, keys):
        return self.underlying_store.multi_get([self._key(k) for k in keys])

    def multi_set(self, keys, values):
        self.underlying_store.multi_set([self._key(k) for k in keys], values)

    def check(self, keys):
        return self.underlying_store.check([self._key(k) for k in keys])

    def delete_key(self, key):
        return self.underlying_store.delete_key(self._key(key))

    def num_keys(self):
        """How many keys the underlying store holds (as PyTorch's, not only this prefix's)."""
        return self.underlying_store.num_keys()

    def list_keys(self):
        """The keys under this prefix, without it."""
        start = self.prefix + "/"
        return [k[len(start):] for k in self.underlying_store.list_keys()
                if k.startswith(start)]

    def queue_push(self, key, value):
        self.underlying_store.queue_push(self._key(key), value)

    def queue_pop(self, key, block=True):
        return self.underlying_store.queue_pop(self._key(key), block)

    def queue_len(self, key):
        return self.underlying_store.queue_len(self._key(key))

    def clone(self):
        return PrefixStore(self.prefix, self.underlying_store.clone())


# ---------------------------------------------------------------------------------------
# the server, on the master
# ---------------------------------------------------------------------------------------


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


class TCPStore(Store):
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

    Run in one process:

    >>> import torcia.distributed as dist
    >>> store = dist.TCPStore("127.0.0.1", 0, world_size=1, is_master=True)
    >>> store.set("epoch", "3")
    >>> store.get("epoch")
    b'3'
    """

    def __init__(self, host_name: str, port: int, world_size: int | None = None,
                 is_master: bool = False, timeout=datetime.timedelta(seconds=300),
                 wait_for_workers: bool = True):
        super().__init__(timeout)
        self.host = host_name
        self.world_size = world_size
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

    def clone(self) -> TCPStore:
        """Another client of the same store, with its own connection (for a thread that
        must not wait behind this client's blocking requests)."""
        return TCPStore(self.host, self.port, timeout=self.timeout)
