"""Offline checks of the client's own logic: error classes from answers,
tool definitions for model SDKs, time parsing, SSE framing."""

from __future__ import annotations

import datetime
import json
import os
import sys
import unittest

# The checkout's package, however the tests are discovered.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import sandboxd  # noqa: E402
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


if __name__ == "__main__":
    unittest.main()
