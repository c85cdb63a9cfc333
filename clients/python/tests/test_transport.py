"""The client's HTTP behaviour against a small local server: connections
kept alive and reused, a server-closed idle connection not reused, and the
deadline of a whole call (not of each read)."""

from __future__ import annotations

import http.server
import json
import os
import select
import sys
import threading
import time
import unittest
from typing import Any, Set, Tuple, cast

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import sandboxd  # noqa: E402


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def srv(self) -> "_Server":
        return cast(_Server, self.server)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _answer(self, status: int, doc: Any) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_GET(self) -> None:
        self.srv.peers.add(self.client_address)
        if self.path == "/slow-head":
            time.sleep(3)
        if self.path == "/drip":
            # Each byte well within a socket timeout, the whole far past the deadline.
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "40")
            self.end_headers()
            for _ in range(40):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.2)
            return
        self._answer(200, {"status": "ok"})
        if self.srv.close_after:
            # Close without saying so, as a server whose idle timeout ran out.
            self.close_connection = True

    def do_POST(self) -> None:
        self.srv.peers.add(self.client_address)
        n = int(self.headers.get("Content-Length", "0"))
        args = json.loads(self.rfile.read(n))
        self._answer(200, {"content": [{"type": "text", "text": json.dumps(args)}], "is_error": False})


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.peers: Set[Tuple[str, int]] = set()
        self.close_after = False
        self.closed = threading.Event()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (the deadline tests) breaks the pipe: expected

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        if self.close_after:
            self.closed.set()


class Transport(unittest.TestCase):
    def setUp(self) -> None:
        self.srv = _Server()
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        self.client = sandboxd.Client(self.url, "t", timeout=30)

    def tearDown(self) -> None:
        self.client.close()
        self.srv.shutdown()
        self.srv.server_close()

    def test_connections_are_reused(self) -> None:
        for _ in range(3):
            self.client.healthz()
        res = self.client.call_tool("r", "shell", {"command": "true"})
        self.assertEqual(json.loads(res.text), {"command": "true"})
        self.assertEqual(len(self.srv.peers), 1, self.srv.peers)

    def test_a_connection_the_server_closed_is_not_reused(self) -> None:
        self.srv.close_after = True
        self.client.healthz()
        self.assertTrue(self.srv.closed.wait(10))
        # The close has reached the client's kept socket (it is readable: EOF).
        idle = self.client._transport._idle  # pyright: ignore[reportPrivateUsage]
        self.assertEqual(len(idle), 1)
        sock = idle[0][0].sock
        assert sock is not None
        deadline = time.monotonic() + 10
        while not select.select([sock], [], [], 0.1)[0]:
            self.assertLess(time.monotonic(), deadline, "the server's close never reached the client")
        # A POST cannot be retried blindly; it must go on a live connection.
        res = self.client.call_tool("r", "read", {"path": "x"})
        self.assertFalse(res.is_error)
        self.assertEqual(len(self.srv.peers), 2)

    def test_the_deadline_covers_the_whole_answer(self) -> None:
        started = time.monotonic()
        with self.assertRaises(sandboxd.DeadlineExceeded) as cm:
            self.client._do("GET", "/drip", want=200, timeout=1)  # pyright: ignore[reportPrivateUsage]
        self.assertLess(time.monotonic() - started, 6, "the deadline was taken per read, not per call")
        self.assertIn("no answer within 1 s", str(cm.exception))
        with self.assertRaises(TimeoutError):
            self.client._do("GET", "/slow-head", want=200, timeout=0.5)  # pyright: ignore[reportPrivateUsage]

    def test_bad_addresses_say_what_to_pass(self) -> None:
        with self.assertRaises(sandboxd.InvalidArgument) as cm:
            sandboxd.Client("127.0.0.1:7788", "t")
        self.assertIn("http://127.0.0.1:7788", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
