"""The HTTP layer: kept-alive connections per client, a deadline on every
request, and line reads with deadlines for server-sent events.

http.client has one socket timeout per operation, not a deadline per
request, so each blocking step (connect, send, each read) gets what is left
of the request's deadline as its timeout.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Dict, List, Mapping, Optional, Tuple

from .errors import DeadlineExceeded, InvalidArgument, SandboxdError, TooLarge, Unavailable

MAX_ANSWER = 64 << 20
"""The most the client reads of one answer or one event line; tool results
with images are the largest legitimate ones."""

MAX_IDLE_CONNECTIONS = 8
"""Idle connections kept per client; more are closed after use."""

IDLE_REUSE_SECONDS = 60.0
"""A connection idle longer than this is not reused: sandboxd closes idle
connections after two minutes, and a request on one it closed fails."""

_CHUNK = 64 << 10
_IDEMPOTENT = frozenset({"GET", "HEAD", "DELETE"})
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.CannotSendRequest)


class Answer:
    """A complete answer: status, headers and body."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


def _headers(resp: http.client.HTTPResponse) -> Dict[str, str]:
    # Header names are case-insensitive; keep the canonical spelling of the
    # ones the client reads.
    out: Dict[str, str] = {}
    for k, v in resp.getheaders():
        out["-".join(p.capitalize() for p in k.split("-"))] = v
    return out


class Transport:
    """Connections to one sandboxd. Safe for concurrent use: each request
    takes an idle connection (or makes one) and gives it back once its
    answer is read in full."""

    def __init__(self, base_url: str) -> None:
        u = urllib.parse.urlsplit(base_url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise InvalidArgument(
                f"sandboxd address {base_url!r} is not a URL like http://127.0.0.1:7788; pass base_url or set SANDBOXD_URL",
                status=0,
            )
        self.base_url = base_url.rstrip("/")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip("/")
        self._ssl = ssl.create_default_context() if self._https else None
        self._lock = threading.Lock()  # guards _idle and _closed
        self._idle: List[Tuple[http.client.HTTPConnection, float]] = []
        self._closed = False

    # --- connections -------------------------------------------------------

    def _new_conn(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _take(self) -> Optional[http.client.HTTPConnection]:
        now = time.monotonic()
        with self._lock:
            while self._idle:
                conn, since = self._idle.pop()
                if now - since < IDLE_REUSE_SECONDS and conn.sock is not None and not _readable(conn.sock):
                    return conn
                conn.close()
        return None

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < MAX_IDLE_CONNECTIONS and conn.sock is not None:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def close(self) -> None:
        """Closes the idle connections; streams in flight keep theirs."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    # --- requests ----------------------------------------------------------

    def _unavailable(self, err: BaseException) -> Unavailable:
        return Unavailable(
            f"sandboxd at {self.base_url} does not answer: {err}; check that it runs and the address is right",
            status=0,
        )

    def _send(
        self,
        method: str,
        path: str,
        body: Optional[bytes],
        headers: Mapping[str, str],
        deadline: float,
        timeout: float,
    ) -> Tuple[http.client.HTTPConnection, socket.socket, http.client.HTTPResponse]:
        """Sends a request and reads the answer's head, reusing an idle
        connection where one is kept. Retries once on a fresh connection
        when a kept one turns out closed, for methods safe to repeat."""
        for attempt in (0, 1):
            conn = self._take() if attempt == 0 else None
            reused = conn is not None
            if conn is None:
                conn = self._new_conn(_left(deadline, method, path, timeout))
            try:
                if conn.sock is None:
                    conn.connect()
                sock = conn.sock
                assert sock is not None
                sock.settimeout(_left(deadline, method, path, timeout))
                conn.request(method, self._prefix + path, body=body, headers=dict(headers))
                sock.settimeout(_left(deadline, method, path, timeout))
                resp = conn.getresponse()
                return conn, sock, resp
            except socket.timeout:
                conn.close()
                raise _deadline(method, path, timeout) from None
            except _STALE as e:
                conn.close()
                if reused and (method in _IDEMPOTENT or isinstance(e, (BrokenPipeError, http.client.CannotSendRequest))):
                    continue
                if reused:
                    raise Unavailable(
                        f"{method} {path}: the connection closed before the answer ({e}); "
                        "the call may have run, check its effects before retrying",
                        status=0,
                    ) from e
                raise self._unavailable(e) from e
            except SandboxdError:
                conn.close()
                raise
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise self._unavailable(e) from e
        raise AssertionError("unreachable")

    def request(
        self,
        method: str,
        path: str,
        body: Optional[bytes],
        headers: Mapping[str, str],
        timeout: float,
    ) -> Answer:
        """One request whose whole answer must arrive within timeout seconds."""
        deadline = time.monotonic() + timeout
        conn, sock, resp = self._send(method, path, body, headers, deadline, timeout)
        try:
            data = read_body(resp, sock, deadline, method, path, timeout)
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return Answer(resp.status, _headers(resp), data)

    def open_stream(
        self,
        method: str,
        path: str,
        body: Optional[bytes],
        headers: Mapping[str, str],
        timeout: float,
    ) -> Tuple[http.client.HTTPConnection, socket.socket, http.client.HTTPResponse, Dict[str, str]]:
        """Sends a request whose answer may be a stream; the answer's head
        must arrive within timeout. The connection is the caller's."""
        deadline = time.monotonic() + timeout
        conn, sock, resp = self._send(method, path, body, headers, deadline, timeout)
        return conn, sock, resp, _headers(resp)


def _readable(sock: socket.socket) -> bool:
    """Whether an idle connection has something to read: nothing is due on
    it, so that is the server's close (or garbage), and it must not be
    reused."""
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


def _left(deadline: float, method: str, path: str, timeout: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise _deadline(method, path, timeout)
    return left


def _deadline(method: str, path: str, timeout: float) -> DeadlineExceeded:
    return DeadlineExceeded(
        f"{method} {path}: no answer within {timeout:g} s; a tool call may still be running in the sandbox, "
        "pass a longer timeout for long calls",
        status=0,
    )


def read_body(
    resp: http.client.HTTPResponse, sock: socket.socket, deadline: float, method: str, path: str, timeout: float
) -> bytes:
    """Reads a whole answer body, at most MAX_ANSWER bytes, by the deadline."""
    parts: List[bytes] = []
    size = 0
    try:
        while True:
            sock.settimeout(_left(deadline, method, path, timeout))
            chunk = resp.read1(_CHUNK)  # what has arrived; read() would wait for all of it
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_ANSWER:
                raise TooLarge(f"{method} {path}: the answer is larger than {MAX_ANSWER} bytes, the most this client reads", status=0)
            parts.append(chunk)
    except socket.timeout:
        raise _deadline(method, path, timeout) from None
    except (OSError, http.client.HTTPException) as e:
        raise Unavailable(f"{method} {path}: the answer was cut off: {e}", status=0) from e
    # Read to its end: closing it frees the connection for the next request
    # (read1 does not mark the end itself as read() does).
    resp.close()
    return b"".join(parts)


class LineReader:
    """Reads the lines of a stream, each within idle_timeout of the one
    before and all by the deadline (None: no overall deadline). close() may
    be called from another thread to end a blocked read."""

    def __init__(
        self,
        conn: http.client.HTTPConnection,
        sock: socket.socket,
        resp: http.client.HTTPResponse,
        what: str,
        idle_timeout: float,
        deadline: Optional[float],
        timeout: Optional[float],
    ) -> None:
        self._conn = conn
        self._sock = sock
        self._resp = resp
        self._what = what
        self._idle = idle_timeout
        self._deadline = deadline
        self._timeout = timeout
        self._lock = threading.Lock()  # guards _closed
        self._closed = False

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    def readline(self) -> Optional[str]:
        """The next line without its end, or None at the end of the stream."""
        wait = self._idle
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise self._past_deadline()
            wait = min(wait, left)
        try:
            self._sock.settimeout(wait)
            raw = self._resp.readline(MAX_ANSWER + 1)
        except socket.timeout:
            if self._deadline is not None and self._deadline - time.monotonic() <= 0:
                raise self._past_deadline() from None
            raise DeadlineExceeded(
                f"{self._what}: the stream sent nothing for {self._idle:g} s (not even a heartbeat); "
                "the connection is taken as dead",
                status=0,
            ) from None
        except Exception as e:
            # close() from another thread ends a read midway with whatever
            # http.client makes of the shut socket (a short chunk, a closed
            # file); that is the stream's end, not a failure.
            if self.closed:
                return None
            if isinstance(e, (OSError, ValueError, http.client.HTTPException)):
                raise Unavailable(f"{self._what}: the stream broke: {e}", status=0) from e
            raise
        if not raw:
            return None
        if len(raw) > MAX_ANSWER:
            raise TooLarge(f"{self._what}: a stream line is longer than {MAX_ANSWER} bytes, the most this client reads", status=0)
        return raw.decode("utf-8", "replace").rstrip("\r\n")

    def _past_deadline(self) -> DeadlineExceeded:
        return DeadlineExceeded(
            f"{self._what}: the stream did not end within {self._timeout:g} s; pass a longer timeout for long calls",
            status=0,
        )

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            # Wakes a read blocked in another thread.
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._resp.close()
        self._conn.close()
