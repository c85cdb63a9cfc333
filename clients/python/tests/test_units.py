"""Offline checks of the client's own logic: error classes from answers,
tool definitions for model SDKs, time parsing, SSE framing, and the
requests and parsing of a sandbox's network (through a fake transport)."""

from __future__ import annotations

import datetime
import json
import os
import sys
import unittest
from typing import Any, Dict, List, Optional, Tuple, cast

# The checkout's package, however the tests are discovered.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import sandboxd  # noqa: E402
from sandboxd._http import Answer  # noqa: E402
from sandboxd.errors import error_from_answer, parse_retry_after  # noqa: E402
from sandboxd.streams import iter_sse  # noqa: E402
from sandboxd.types import ToolSpec, parse_time  # noqa: E402


def _err(status: int, code: str, msg: str = "m", headers: dict | None = None) -> sandboxd.SandboxdError:
    body = json.dumps({"error": {"code": code, "message": msg}}).encode()
    return error_from_answer(status, body, headers or {})


class ErrorClasses(unittest.TestCase):
    def test_each_code_has_its_class(self) -> None:
        cases = [
            (400, "invalid_argument", sandboxd.InvalidArgument),
            (401, "unauthenticated", sandboxd.Unauthorized),
            (404, "not_found", sandboxd.NotFound),
            (409, "conflict", sandboxd.Conflict),
            (412, "failed_precondition", sandboxd.FailedPrecondition),
            (429, "resource_exhausted", sandboxd.ResourceExhausted),
            (500, "internal", sandboxd.Internal),
            (503, "unavailable", sandboxd.Unavailable),
            (504, "deadline_exceeded", sandboxd.DeadlineExceeded),
        ]
        for status, code, cls in cases:
            with self.subTest(code=code):
                e = _err(status, code, "what was wrong; what to do")
                self.assertIs(type(e), cls)
                self.assertEqual(str(e), "what was wrong; what to do")
                self.assertEqual((e.status, e.code), (status, code))

    def test_a_foreign_body_is_classed_by_status(self) -> None:
        e = error_from_answer(502, b"<html>Bad Gateway</html>", {})
        self.assertIsInstance(e, sandboxd.Unavailable)
        self.assertEqual(str(e), "sandboxd answered 502: <html>Bad Gateway</html>")
        self.assertIsInstance(error_from_answer(413, b"", {}), sandboxd.TooLarge)
        self.assertIsInstance(error_from_answer(413, b"", {}), sandboxd.InvalidArgument)
        self.assertIsInstance(error_from_answer(403, b"no", {}), sandboxd.Forbidden)
        self.assertIn("Not Found", str(error_from_answer(404, b"", {})))

    def test_retry_after_and_request_id(self) -> None:
        e = _err(503, "unavailable", headers={"Retry-After": "7", "X-Request-Id": "req-1"})
        assert isinstance(e, sandboxd.Unavailable)
        self.assertEqual(e.retry_after, 7.0)
        self.assertEqual(e.request_id, "req-1")
        self.assertIsNone(parse_retry_after(None))
        self.assertIsNone(parse_retry_after("soon"))
        self.assertEqual(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), 0.0)

    def test_deadline_is_a_timeout(self) -> None:
        self.assertIsInstance(_err(504, "deadline_exceeded"), TimeoutError)


class ToolDefinitions(unittest.TestCase):
    spec = ToolSpec.from_json(
        {
            "name": "read",
            "description": "Read a file.",
            "level": "read",
            "parallel_safe": True,
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        }
    )

    def test_openai(self) -> None:
        self.assertEqual(
            self.spec.to_openai(),
            {
                "type": "function",
                "function": {"name": "read", "description": "Read a file.", "parameters": self.spec.input_schema},
            },
        )

    def test_anthropic(self) -> None:
        self.assertEqual(
            self.spec.to_anthropic(),
            {"name": "read", "description": "Read a file.", "input_schema": self.spec.input_schema},
        )


class Times(unittest.TestCase):
    def test_go_times(self) -> None:
        utc = datetime.timezone.utc
        self.assertEqual(parse_time("2026-12-01T21:16:56.465777123Z"), datetime.datetime(2026, 12, 1, 21, 16, 56, 465777, utc))
        self.assertEqual(parse_time("0001-01-01T00:00:00Z"), datetime.datetime(1, 1, 1, tzinfo=utc))
        two = datetime.timezone(datetime.timedelta(hours=2))
        self.assertEqual(parse_time("2026-12-01T21:16:56.5+02:00"), datetime.datetime(2026, 12, 1, 21, 16, 56, 500000, two))
        self.assertIsNone(parse_time(""))


class _Lines:
    def __init__(self, text: str) -> None:
        self._lines = text.split("\n")

    def readline(self) -> str | None:
        return self._lines.pop(0) if self._lines else None


class SSEFraming(unittest.TestCase):
    def test_events_comments_and_multiline_data(self) -> None:
        text = "retry: 2000\n: connected\n\nevent: output\ndata: {\"a\": 1}\n\n: heartbeat\n\nevent: result\ndata: x\ndata: y\n\n"
        self.assertEqual(list(iter_sse(_Lines(text))), [("output", '{"a": 1}'), ("result", "x\ny")])  # type: ignore[arg-type]


class _FakeTransport:
    """Stands in for the client's HTTP transport: records each request and
    answers the next of the answers it was given."""

    def __init__(self, *answers: Tuple[int, Any]) -> None:
        self.answers = list(answers)
        self.sent: List[Tuple[str, str, Optional[Any]]] = []

    def request(self, method: str, path: str, body: Optional[bytes], headers: Any, timeout: float) -> Answer:
        self.sent.append((method, path, None if body is None else json.loads(body)))
        status, doc = self.answers.pop(0)
        return Answer(status, {"Content-Type": "application/json"}, json.dumps(doc).encode())

    def close(self) -> None:
        pass


def _client(*answers: Tuple[int, Any]) -> Tuple[sandboxd.Client, _FakeTransport]:
    c = sandboxd.Client("http://sandboxd.test", "tok")
    fake = _FakeTransport(*answers)
    c._transport = fake  # type: ignore[assignment]  # pyright: ignore[reportPrivateUsage]
    return c, fake


# GET /v1/sandboxes/{id}/network of a proxy sandbox as sandboxd writes it,
# with a field this client does not know.
_PROXY_STATUS: Dict[str, Any] = {
    "network": "proxy",
    "proxy": "http://127.0.0.1:41234",
    "allow": ["pypi.org", "*.pythonhosted.org", "evil.example"],
    "deny": ["upload.pypi.org"],
    "allowed": ["pypi.org", "*.pythonhosted.org"],
    "layers": [
        {"name": "deployment", "allow": [], "deny": [], "restricts": False},
        {"name": "tenant", "allow": ["pypi.org", "*.pythonhosted.org"], "deny": [], "restricts": True},
        {"name": "sandbox", "allow": ["pypi.org", "*.pythonhosted.org", "evil.example"], "deny": ["upload.pypi.org"], "restricts": True},
    ],
    "not_effective": ["evil.example"],
    "secrets": ["github"],
    "open_connections": 2,
    "added_later": {"x": 1},
}

_SANDBOX: Dict[str, Any] = {
    "id": "sb_1",
    "conversation": "c1",
    "backend": "docker",
    "image": "sandboxd-sandbox:latest",
    "state": "running",
    "created_at": "2026-12-01T21:16:56.465777123Z",
    "workspace": "/workspace",
    "network": "proxy",
}


class Network(unittest.TestCase):
    def test_create_a_proxy_sandbox_sends_its_rules_and_secrets(self) -> None:
        c, fake = _client((201, _SANDBOX))
        sb = c.create_sandbox(
            "c1", network="proxy", egress_allow=["pypi.org", "*.pythonhosted.org"], egress_deny=["upload.pypi.org"], secrets=["github"]
        )
        self.assertEqual(
            fake.sent,
            [("POST", "/v1/sandboxes", {
                "conversation": "c1",
                "network": "proxy",
                "egress": {"allow": ["pypi.org", "*.pythonhosted.org"], "deny": ["upload.pypi.org"]},
                "secrets": ["github"],
            })],
        )
        self.assertEqual((sb.id, sb.network), ("sb_1", "proxy"))

    def test_create_without_egress_sends_none(self) -> None:
        c, fake = _client((201, {**_SANDBOX, "network": "none"}), (201, {k: v for k, v in _SANDBOX.items() if k != "network"}))
        self.assertEqual(c.create_sandbox("c1", network="proxy", egress_allow=[], secrets=()).network, "none")
        self.assertEqual(fake.sent[0][2], {"conversation": "c1", "network": "proxy"})
        # An older sandboxd that reports no network.
        self.assertEqual(c.create_sandbox("c1").network, "")
        self.assertEqual(fake.sent[1][2], {"conversation": "c1"})

    def test_one_string_for_a_list_is_refused_before_sending(self) -> None:
        c, fake = _client()
        with self.assertRaises(sandboxd.InvalidArgument) as cm:
            c.create_sandbox("c1", network="proxy", egress_allow="pypi.org")
        self.assertIn("egress_allow is a list of strings", str(cm.exception))
        self.assertIn("['pypi.org']", str(cm.exception))
        with self.assertRaises(sandboxd.InvalidArgument) as cm:
            c.set_network("sb_1", ["pypi.org", 443])  # type: ignore[list-item]
        self.assertIn("443", str(cm.exception))
        with self.assertRaises(sandboxd.InvalidArgument):
            c.egress("sb_1", limit="5")  # type: ignore[arg-type]
        self.assertEqual(fake.sent, [])

    def test_network_reads_the_status(self) -> None:
        c, fake = _client((200, _PROXY_STATUS))
        st = c.network("sb/1")
        self.assertEqual(fake.sent, [("GET", "/v1/sandboxes/sb%2F1/network", None)])
        self.assertEqual((st.network, st.proxy, st.open_connections), ("proxy", "http://127.0.0.1:41234", 2))
        self.assertEqual(st.allow, ["pypi.org", "*.pythonhosted.org", "evil.example"])
        self.assertEqual(st.deny, ["upload.pypi.org"])
        self.assertEqual(st.allowed, ["pypi.org", "*.pythonhosted.org"])
        self.assertEqual(st.not_effective, ["evil.example"])
        self.assertEqual(st.secrets, ["github"])
        self.assertEqual([x.name for x in st.layers], ["deployment", "tenant", "sandbox"])
        tenant = st.layer("tenant")
        assert tenant is not None
        self.assertEqual((tenant.allow, tenant.deny, tenant.restricts), (["pypi.org", "*.pythonhosted.org"], [], True))
        self.assertFalse(st.layers[0].restricts)
        self.assertIsNone(st.layer("nope"))

    def test_network_of_a_sandbox_without_proxy(self) -> None:
        doc: Dict[str, Any] = {"network": "none", "allow": [], "deny": [], "allowed": [], "layers": [], "secrets": [], "open_connections": 0}
        st = _client((200, doc))[0].network("sb_1")
        self.assertEqual(st, sandboxd.NetworkStatus(network="none"))

    def test_set_network_puts_both_lists(self) -> None:
        c, fake = _client(
            (200, {**_PROXY_STATUS, "allow": ["github.com"], "deny": [], "not_effective": ["github.com"]}),
            (200, {**_PROXY_STATUS, "allow": [], "deny": ["*.example.com"]}),
        )
        st = c.set_network("sb_1", ["github.com"])
        self.assertEqual(fake.sent, [("PUT", "/v1/sandboxes/sb_1/network", {"allow": ["github.com"], "deny": []})])
        self.assertEqual((st.allow, st.deny, st.not_effective), (["github.com"], [], ["github.com"]))
        st = c.set_network("sb_1", (), deny=("*.example.com",))
        self.assertEqual(fake.sent[1], ("PUT", "/v1/sandboxes/sb_1/network", {"allow": [], "deny": ["*.example.com"]}))
        self.assertEqual((st.allow, st.deny), ([], ["*.example.com"]))

    def test_set_network_on_a_sandbox_without_proxy_is_failed_precondition(self) -> None:
        msg = 'sandbox sb_1 has network "none", and egress rules apply only to network "proxy"; create the sandbox with "network": "proxy"'
        c, _ = _client((412, {"error": {"code": "failed_precondition", "message": msg}}))
        with self.assertRaises(sandboxd.FailedPrecondition) as cm:
            c.set_network("sb_1", ["pypi.org"])
        self.assertEqual((cm.exception.status, cm.exception.code, str(cm.exception)), (412, "failed_precondition", msg))

    def test_egress_lists_the_decisions(self) -> None:
        recs = [
            {
                "time": "2026-12-01T21:16:56.465777123Z", "tenant": "default", "sandbox": "sb_1", "conversation": "c1",
                "kind": "connect", "host": "pypi.org", "port": 443, "addr": "151.101.0.223:443", "rule": "pypi.org",
                "decision": "allow", "reason": "allowed by pypi.org", "bytes_up": 517, "bytes_down": 4096,
                "duration_ms": 120, "trace": "unknown to this client",
            },
            {
                "time": "2026-12-01T21:16:55Z", "tenant": "default", "sandbox": "sb_1", "conversation": "c1",
                "kind": "intercept", "host": "github.com", "port": 443, "decision": "deny", "reason": "no rule allows it",
                "secrets": ["github"], "bytes_up": 0, "bytes_down": 0, "duration_ms": 0,
            },
        ]
        c, fake = _client((200, recs), (200, []))
        got = c.egress("sb_1", limit=5)
        self.assertEqual(fake.sent[0][:2], ("GET", "/v1/sandboxes/sb_1/egress?limit=5"))
        self.assertEqual([(r.host, r.port, r.kind, r.decision, r.allowed) for r in got],
                         [("pypi.org", 443, "connect", "allow", True), ("github.com", 443, "intercept", "deny", False)])
        first, second = got
        self.assertEqual(first.time, datetime.datetime(2026, 12, 1, 21, 16, 56, 465777, datetime.timezone.utc))
        self.assertEqual((first.addr, first.rule, first.bytes_up, first.bytes_down, first.duration_ms),
                         ("151.101.0.223:443", "pypi.org", 517, 4096, 120))
        self.assertEqual((first.tenant, first.sandbox, first.conversation, first.secrets), ("default", "sb_1", "c1", []))
        self.assertEqual((second.addr, second.rule, second.secrets, second.reason), ("", "", ["github"], "no rule allows it"))
        self.assertEqual(c.egress("sb_1"), [])
        self.assertEqual(fake.sent[1][1], "/v1/sandboxes/sb_1/egress")


class SandboxRuntime(unittest.TestCase):
    def test_runtime_and_read_only_root_are_read(self) -> None:
        from sandboxd.types import Sandbox

        s = Sandbox.from_json({"id": "a", "runtime": "gvisor", "read_only_root": True})
        self.assertEqual((s.runtime, s.read_only_root), ("gvisor", True))
        old = Sandbox.from_json({"id": "b"})
        self.assertEqual((old.runtime, old.read_only_root), ("", False))



class Audit(unittest.TestCase):
    def test_pages_follow_the_cursor_with_the_filters(self) -> None:
        rec = {"seq": 7, "prev": "ab", "time": "2026-12-06T09:00:00Z", "replica": "r1", "kind": "event", "tenant": "acme",
               "sandbox": "sb_1", "action": "egress.denied", "args_bytes": 0, "outcome": "denied", "duration_ms": 0.5,
               "detail": "connect example.com:443: no rule allows it", "later": "unknown to this client"}
        c, fake = _client((200, {"records": [rec], "next": "Y3Vy"}), (200, {"records": [{**rec, "seq": 8}]}))
        since = datetime.datetime(2026, 12, 6, 10, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
        got = list(c.audit_records(since=since, sandbox="sb_1", page_size=1))
        self.assertEqual([r.seq for r in got], [7, 8])
        self.assertEqual(fake.sent[0][:2], ("GET", "/v1/audit?since=2026-12-06T09%3A00%3A00Z&limit=1&sandbox=sb_1"))
        self.assertEqual(fake.sent[1][:2], ("GET", "/v1/audit?since=2026-12-06T09%3A00%3A00Z&limit=1&sandbox=sb_1&cursor=Y3Vy"))
        first = got[0]
        self.assertEqual((first.kind, first.action, first.outcome, first.detail, first.replica, first.duration_ms),
                         ("event", "egress.denied", "denied", "connect example.com:443: no rule allows it", "r1", 0.5))
        self.assertEqual(first.time, datetime.datetime(2026, 12, 6, 9, 0, tzinfo=datetime.timezone.utc))

    def test_bad_arguments_are_refused_before_sending(self) -> None:
        c, fake = _client()
        with self.assertRaises(sandboxd.InvalidArgument):
            c.audit(since=datetime.datetime(2026, 12, 6))  # no time zone
        with self.assertRaises(sandboxd.InvalidArgument):
            c.audit(limit=cast(int, "10"))
        self.assertEqual(fake.sent, [])

    def test_unreached_replicas_are_read(self) -> None:
        c, _ = _client((200, {"records": [], "next": "bQ", "unreached": ["sandboxd-2"]}))
        page = c.audit()
        self.assertEqual((page.records, page.next, page.unreached), ([], "bQ", ["sandboxd-2"]))


if __name__ == "__main__":
    unittest.main()
