"""The two server-sent event streams of API v1: a streamed tool call and a
space's questions. Both are iterators and context managers; leaving the
``with`` block (or close()) closes the connection, which for a tool call
ends the call as a client that goes away ends a plain one."""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Optional, Tuple, cast

from ._http import LineReader
from .errors import Internal, SandboxdError, Unavailable, error_from_code
from .types import OutputEvent, Question, QuestionEvent, Resolution, ToolResult, ToolStreamEvent


def iter_sse(lines: LineReader) -> Iterator[Tuple[str, str]]:
    """(event name, data) of each event; comments (heartbeats) are skipped.
    Ends when the stream ends."""
    name, has_data = "", False
    data: List[str] = []
    while True:
        line = lines.readline()
        if line is None:
            return
        if line == "":
            if has_data:
                yield name or "message", "\n".join(data)
            name, has_data, data = "", False, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
            has_data = True


def _json_object(data: str) -> Optional[Dict[str, Any]]:
    """data as a JSON object, or None when it is not one."""
    try:
        doc: Any = json.loads(data)
    except ValueError:
        return None
    return cast(Dict[str, Any], doc) if isinstance(doc, dict) else None


class ToolStream:
    """A streamed tool call: yields OutputEvent as the tool prints, then the
    ToolResult, then stops. An error after the stream began (an ``error``
    event) is raised from the iteration as its exception class; a stream
    that ends before its result raises Unavailable."""

    def __init__(self, what: str, lines: Optional[LineReader], plain: Optional[ToolResult] = None) -> None:
        self._what = what
        self._lines = lines
        self._plain = plain
        self._events: Optional[Iterator[Tuple[str, str]]] = iter_sse(lines) if lines is not None else None
        self._done = False
        self._result: Optional[ToolResult] = None

    def __iter__(self) -> "ToolStream":
        return self

    def __next__(self) -> ToolStreamEvent:
        if self._done:
            raise StopIteration
        if self._events is None:
            # Answered plain JSON before anything streamed: that is the result.
            self._done = True
            assert self._plain is not None
            self._result = self._plain
            return self._plain
        try:
            for name, data in self._events:
                if name == "output":
                    return OutputEvent.from_json(self._decode(name, data))
                if name == "result":
                    self._finish()
                    self._result = ToolResult.from_json(self._decode(name, data))
                    return self._result
                if name == "error":
                    self._finish()
                    doc = self._decode(name, data)
                    raw_err: Any = doc.get("error")
                    err: Dict[str, Any] = cast(Dict[str, Any], raw_err) if isinstance(raw_err, dict) else {}
                    raw_status: Any = doc.get("status")
                    status = raw_status if isinstance(raw_status, int) else None
                    raise error_from_code(str(err.get("code") or "internal"), str(err.get("message") or data), status=status)
        except BaseException:
            self._finish()
            raise
        self._finish()
        raise Unavailable(
            f"{self._what}: the stream ended before the result; the call may have run, check its effects before retrying",
            status=0,
        )

    def _decode(self, name: str, data: str) -> Dict[str, Any]:
        doc = _json_object(data)
        if doc is None:
            self._finish()
            raise Internal(f"{self._what}: the {name} event is not the expected JSON: {data[:200]}", status=0)
        return doc

    def _finish(self) -> None:
        self._done = True
        if self._lines is not None:
            self._lines.close()

    def result(self) -> ToolResult:
        """Reads the rest of the stream, dropping the output, and returns the
        result."""
        for _ in self:
            pass
        if self._result is None:
            raise Unavailable(f"{self._what}: the stream was closed before the result", status=0)
        return self._result

    def close(self) -> None:
        """Closes the stream; a call still running ends as when a plain
        call's client goes away."""
        self._finish()

    def __enter__(self) -> "ToolStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class QuestionStream:
    """A space's questions as they come: the pending ones first, then each
    new ``question`` and each ``resolved``. While it is open a human is
    connected to the space. close() may be called from another thread."""

    def __init__(self, what: str, lines: LineReader) -> None:
        self._what = what
        self._lines = lines
        self._events = iter_sse(lines)

    def __iter__(self) -> "QuestionStream":
        return self

    def __next__(self) -> QuestionEvent:
        try:
            for name, data in self._events:
                if name not in ("question", "resolved"):
                    continue
                doc = _json_object(data)
                if doc is None:
                    raise Internal(f"{self._what}: the {name} event is not the expected JSON: {data[:200]}", status=0)
                if name == "question":
                    return QuestionEvent(type=name, question=Question.from_json(doc))
                return QuestionEvent(type=name, resolved=Resolution.from_json(doc))
        except SandboxdError:
            if self._lines.closed:
                raise StopIteration from None
            self.close()
            raise
        self.close()
        raise StopIteration

    def next_question(self) -> Question:
        """The next question card, skipping resolved events."""
        for ev in self:
            if ev.question is not None:
                return ev.question
        raise Unavailable(f"{self._what}: the stream ended before a question came", status=0)

    def close(self) -> None:
        self._lines.close()

    def __enter__(self) -> "QuestionStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
