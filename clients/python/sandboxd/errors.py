"""The errors of sandboxd's API v1 as exceptions.

Every error answer is an HTTP status plus ``{"error": {"code", "message"}}``
(DESIGN.md section 3). :func:`error_from_answer` turns one into the class of
its code; a body that is not sandboxd's (a proxy's page, say) is classed by
its status. ``str(err)`` is the server's one sentence saying what was wrong
and what to do.
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any, Dict, Mapping, Optional, Type, cast


class SandboxdError(Exception):
    """The base of every error this client raises.

    Attributes:
        code: the wire code (``not_found``, ``invalid_argument``, ...).
        message: one sentence for a person.
        status: the HTTP status, or 0 when no answer arrived.
        request_id: the answer's ``X-Request-Id``, for the server's logs.
    """

    code: str = "internal"
    default_status: int = 500

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        code: Optional[str] = None,
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = self.default_status if status is None else status
        if code is not None:
            self.code = code
        self.request_id = request_id

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status}, code={self.code!r})"


class InvalidArgument(SandboxdError):
    """400: the request was wrong; sending it again unchanged cannot succeed."""

    code = "invalid_argument"
    default_status = 400


class TooLarge(InvalidArgument):
    """413 (from a proxy), or an answer larger than the client reads."""

    code = "invalid_argument"
    default_status = 413


class Unauthorized(SandboxdError):
    """401: the token is missing or not known."""

    code = "unauthenticated"
    default_status = 401


class Forbidden(Unauthorized):
    """403: a proxy or gateway refused the token (sandboxd itself answers 404
    for what a tenant may not see)."""

    default_status = 403


class NotFound(SandboxdError):
    """404: no such sandbox, run, tool or question for this token."""

    code = "not_found"
    default_status = 404


class Conflict(SandboxdError):
    """409: the conversation already has a live sandbox, a question was
    already answered, ..."""

    code = "conflict"
    default_status = 409


class FailedPrecondition(SandboxdError):
    """412: the target is not in a state for this (a paused sandbox, ...)."""

    code = "failed_precondition"
    default_status = 412


class _Retryable(SandboxdError):
    """An error that may succeed later; ``retry_after`` is the server's hint
    in seconds (from ``Retry-After``), or None."""

    def __init__(self, message: str, *, retry_after: Optional[float] = None, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.retry_after = retry_after


class ResourceExhausted(_Retryable):
    """429: a quota or limit is reached."""

    code = "resource_exhausted"
    default_status = 429


class Internal(SandboxdError):
    """500: sandboxd failed; the message says what."""

    code = "internal"
    default_status = 500


class Unavailable(_Retryable):
    """503: sandboxd (or what it needs) does not answer now; also raised when
    the connection fails or a stream breaks before its result."""

    code = "unavailable"
    default_status = 503


class DeadlineExceeded(SandboxdError, TimeoutError):
    """504, or no answer within the client's timeout."""

    code = "deadline_exceeded"
    default_status = 504


_BY_CODE: Dict[str, Type[SandboxdError]] = {
    "invalid_argument": InvalidArgument,
    "unauthenticated": Unauthorized,
    "permission_denied": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "failed_precondition": FailedPrecondition,
    "resource_exhausted": ResourceExhausted,
    "internal": Internal,
    "unavailable": Unavailable,
    "deadline_exceeded": DeadlineExceeded,
}

_BY_STATUS: Dict[int, Type[SandboxdError]] = {
    400: InvalidArgument,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: NotFound,
    409: Conflict,
    412: FailedPrecondition,
    413: TooLarge,
    429: ResourceExhausted,
    500: Internal,
    502: Unavailable,
    503: Unavailable,
    504: DeadlineExceeded,
}


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(int(value)), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def error_from_code(
    code: str,
    message: str,
    *,
    status: Optional[int] = None,
    request_id: Optional[str] = None,
    retry_after: Optional[float] = None,
) -> SandboxdError:
    """The exception of a wire code; an unknown code is Internal keeping it."""
    cls: Optional[Type[SandboxdError]]
    if status in (403, 413):
        # Their codes are shared with 401 and 400; the status tells them apart.
        cls = _BY_STATUS[status]
    else:
        cls = _BY_CODE.get(code) or (_BY_STATUS.get(status) if status is not None else None) or Internal
    kw: Dict[str, object] = {"status": status, "request_id": request_id, "code": code or cls.code}
    if issubclass(cls, _Retryable):
        return cls(message, retry_after=retry_after, **kw)
    return cls(message, **kw)  # type: ignore[arg-type]


def error_from_answer(status: int, body: bytes, headers: Mapping[str, str]) -> SandboxdError:
    """The exception for an HTTP error answer."""
    request_id = headers.get("X-Request-Id")
    retry_after = parse_retry_after(headers.get("Retry-After"))
    try:
        doc: Any = json.loads(body)
        err: Any = cast(Dict[str, Any], doc).get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict):
            detail = cast(Dict[str, Any], err)
            code, message = detail.get("code"), detail.get("message", "")
            if isinstance(code, str) and code:
                return error_from_code(code, str(message), status=status, request_id=request_id, retry_after=retry_after)
    except (ValueError, UnicodeDecodeError):
        pass
    text = body.decode("utf-8", "replace").strip()
    if len(text) > 200:
        text = text[:200] + "..."
    if not text:
        from http import HTTPStatus

        try:
            text = HTTPStatus(status).phrase
        except ValueError:
            text = "no body"
    cls = _BY_STATUS.get(status, Internal)
    return error_from_code(
        cls.code, f"sandboxd answered {status}: {text}", status=status, request_id=request_id, retry_after=retry_after
    )
