"""A typed client of sandboxd's HTTP API v1, standard library only.

    from sandboxd import Client
    c = Client("http://127.0.0.1:7788", token)
    c.create_sandbox("conv-1", image="sandboxd-sandbox:latest")
    run = c.create_run("conv-1")
    print(c.call_tool(run.id, "shell", {"command": "uname -a"}).text)
"""

from .client import DEFAULT_STREAM_IDLE_TIMEOUT, DEFAULT_TIMEOUT, Client
from .errors import (
    Conflict,
    DeadlineExceeded,
    FailedPrecondition,
    Forbidden,
    Internal,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    SandboxdError,
    TooLarge,
    Unauthorized,
    Unavailable,
)
from .streams import QuestionStream, ToolStream
from .types import (
    AnswerResult,
    AuditPage,
    AuditRecord,
    Block,
    EgressLayer,
    EgressRecord,
    Lifecycle,
    NetworkStatus,
    OutputEvent,
    Question,
    QuestionEvent,
    QuestionOption,
    Resolution,
    Resources,
    Run,
    RunSummary,
    Sandbox,
    Snapshot,
    ToolResult,
    ToolSpec,
    ToolStreamEvent,
    UnavailableTools,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_STREAM_IDLE_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "AnswerResult",
    "AuditPage",
    "AuditRecord",
    "Block",
    "Client",
    "Conflict",
    "DeadlineExceeded",
    "EgressLayer",
    "EgressRecord",
    "Lifecycle",
    "FailedPrecondition",
    "Forbidden",
    "Internal",
    "InvalidArgument",
    "NetworkStatus",
    "NotFound",
    "OutputEvent",
    "Question",
    "QuestionEvent",
    "QuestionOption",
    "QuestionStream",
    "Resolution",
    "ResourceExhausted",
    "Resources",
    "Run",
    "RunSummary",
    "Sandbox",
    "Snapshot",
    "SandboxdError",
    "TooLarge",
    "ToolResult",
    "ToolSpec",
    "ToolStream",
    "ToolStreamEvent",
    "Unauthorized",
    "Unavailable",
    "UnavailableTools",
]
