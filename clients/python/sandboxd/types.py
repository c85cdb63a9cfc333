"""The JSON shapes of API v1 (DESIGN.md section 3) as dataclasses.

``from_json`` builders ignore fields they do not know, so a newer sandboxd
that adds fields does not break an older client.
"""

from __future__ import annotations

import base64
import datetime as _dt
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union, cast

JSON = Dict[str, Any]

_FRACTION = re.compile(r"\.(\d+)")


def parse_time(value: Optional[str]) -> Optional[_dt.datetime]:
    """An RFC 3339 time as Go writes it (nanoseconds, ``Z``) as an aware
    datetime; None for an absent or empty value."""
    if not value:
        return None
    # datetime takes at most microseconds.
    v = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], value, count=1)
    return _dt.datetime.fromisoformat(v.replace("Z", "+00:00"))


def _obj(v: Any) -> Mapping[str, Any]:
    """v as a JSON object ({} when it is not one)."""
    return cast(Mapping[str, Any], v) if isinstance(v, Mapping) else {}


def _items(v: Any) -> List[Any]:
    """v as a JSON array ([] when it is not one)."""
    return list(cast(List[Any], v)) if isinstance(v, list) else []


@dataclass(frozen=True)
class Resources:
    """A sandbox's limits; None leaves the backend's default."""

    cpus: Optional[float] = None
    memory_mb: Optional[int] = None
    pids: Optional[int] = None

    def to_json(self) -> JSON:
        return {k: v for k, v in (("cpus", self.cpus), ("memory_mb", self.memory_mb), ("pids", self.pids)) if v}


@dataclass(frozen=True)
class Lifecycle:
    """What idleness does to a sandbox, in seconds without a call, process
    output or preview request: pause it, hibernate it, delete it. 0 is
    never (or, in a create, the tenant's default)."""

    pause_after_s: int = 0
    hibernate_after_s: int = 0
    delete_after_s: int = 0

    def to_json(self) -> Dict[str, int]:
        return {k: v for k, v in (("pause_after_s", self.pause_after_s), ("hibernate_after_s", self.hibernate_after_s),
                                  ("delete_after_s", self.delete_after_s)) if v}

    @classmethod
    def from_json(cls, d: Optional[Mapping[str, Any]]) -> Optional["Lifecycle"]:
        if not d:
            return None
        return cls(int(d.get("pause_after_s", 0)), int(d.get("hibernate_after_s", 0)), int(d.get("delete_after_s", 0)))


@dataclass(frozen=True)
class Snapshot:
    """A sandbox's files taken at one point. ``holds`` is "filesystem and
    workspace" or "workspace"; ``note`` says what no snapshot holds
    (processes and memory)."""

    id: str
    sandbox: str
    name: str
    created_at: Optional[_dt.datetime]
    size_bytes: int
    holds: str = ""
    note: str = ""
    conversation: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Snapshot":
        return cls(
            id=str(d.get("id", "")),
            sandbox=str(d.get("sandbox", "")),
            name=str(d.get("name", "")),
            created_at=parse_time(d.get("created_at")),
            size_bytes=int(d.get("size_bytes", 0)),
            holds=str(d.get("holds", "")),
            note=str(d.get("note", "")),
            conversation=str(d.get("conversation", "")),
        )


@dataclass(frozen=True)
class Sandbox:
    """A sandbox as the API reports it. ``state`` is running, paused,
    hibernated, stopped or gone, and ``state_since`` when it entered it
    (None where unknown); ``workspace`` is the workspace root as tools see
    it; ``network`` is none, bridge or proxy ("" from a sandboxd older than
    network mode proxy); ``lifecycle`` what idleness does to it;
    ``runtime`` is runc or gvisor ("" from an older sandboxd) and
    ``read_only_root`` whether its root file system is read-only."""

    id: str
    conversation: str
    backend: str
    image: str
    state: str
    created_at: Optional[_dt.datetime]
    workspace: str = ""
    deployment: str = ""
    network: str = ""
    state_since: Optional[_dt.datetime] = None
    lifecycle: Optional[Lifecycle] = None
    runtime: str = ""
    read_only_root: bool = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Sandbox":
        return cls(
            id=str(d.get("id", "")),
            conversation=str(d.get("conversation", "")),
            backend=str(d.get("backend", "")),
            image=str(d.get("image", "")),
            state=str(d.get("state", "")),
            created_at=parse_time(d.get("created_at")),
            workspace=str(d.get("workspace", "")),
            deployment=str(d.get("deployment", "")),
            network=str(d.get("network", "")),
            state_since=parse_time(d.get("state_since")),
            lifecycle=Lifecycle.from_json(d.get("lifecycle")),
            runtime=str(d.get("runtime", "")),
            read_only_root=bool(d.get("read_only_root", False)),
        )


def _strs(v: Any) -> List[str]:
    """v as a JSON array of strings ([] when it is not an array)."""
    return [str(x) for x in _items(v)]


@dataclass(frozen=True)
class EgressLayer:
    """One level of a proxy sandbox's egress policy: ``name`` is deployment,
    tenant or sandbox. A connection must pass every level; a level that
    does not ``restricts`` names no destination of its own and lets through
    what the others allow."""

    name: str
    allow: List[str] = field(default_factory=list[str])
    deny: List[str] = field(default_factory=list[str])
    restricts: bool = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "EgressLayer":
        return cls(
            name=str(d.get("name", "")),
            allow=_strs(d.get("allow")),
            deny=_strs(d.get("deny")),
            restricts=bool(d.get("restricts", False)),
        )


@dataclass(frozen=True)
class NetworkStatus:
    """A sandbox's network as ``GET /v1/sandboxes/{id}/network`` reports it.

    For ``none`` and ``bridge`` only ``network`` says anything. For
    ``proxy``: ``allow`` and ``deny`` are the sandbox's own lists;
    ``allowed`` the host rules every level allows (what a refusal offers);
    ``layers`` the levels outermost first; ``not_effective`` the sandbox's
    allow rules an outer level refuses (a sandbox narrows its tenant's
    policy, never widens it); ``secrets`` the names of the secrets sandboxd
    adds; ``proxy`` the proxy's URL inside the sandbox ("" until a tool call
    has reached it)."""

    network: str
    proxy: str = ""
    allow: List[str] = field(default_factory=list[str])
    deny: List[str] = field(default_factory=list[str])
    allowed: List[str] = field(default_factory=list[str])
    layers: List[EgressLayer] = field(default_factory=list[EgressLayer])
    not_effective: List[str] = field(default_factory=list[str])
    secrets: List[str] = field(default_factory=list[str])
    open_connections: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "NetworkStatus":
        return cls(
            network=str(d.get("network", "")),
            proxy=str(d.get("proxy", "")),
            allow=_strs(d.get("allow")),
            deny=_strs(d.get("deny")),
            allowed=_strs(d.get("allowed")),
            layers=[EgressLayer.from_json(_obj(x)) for x in _items(d.get("layers"))],
            not_effective=_strs(d.get("not_effective")),
            secrets=_strs(d.get("secrets")),
            open_connections=int(d.get("open_connections") or 0),
        )

    def layer(self, name: str) -> Optional[EgressLayer]:
        """The level of that name (deployment, tenant or sandbox), or None."""
        return next((x for x in self.layers if x.name == name), None)


@dataclass(frozen=True)
class EgressRecord:
    """One egress decision of a proxy sandbox. ``kind`` is connect (a
    tunnel), intercept (a request in a tunnel opened to add a secret) or
    http (a plain-HTTP request); ``decision`` is allow or deny and
    ``reason`` says why; ``addr`` is the address connected to and ``rule``
    the rule that decided, when there was one; ``secrets`` are names only."""

    time: Optional[_dt.datetime]
    host: str
    port: int
    kind: str
    decision: str
    reason: str = ""
    tenant: str = ""
    sandbox: str = ""
    conversation: str = ""
    addr: str = ""
    rule: str = ""
    secrets: List[str] = field(default_factory=list[str])
    bytes_up: int = 0
    bytes_down: int = 0
    duration_ms: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "EgressRecord":
        return cls(
            time=parse_time(d.get("time")),
            host=str(d.get("host", "")),
            port=int(d.get("port") or 0),
            kind=str(d.get("kind", "")),
            decision=str(d.get("decision", "")),
            reason=str(d.get("reason", "")),
            tenant=str(d.get("tenant", "")),
            sandbox=str(d.get("sandbox", "")),
            conversation=str(d.get("conversation", "")),
            addr=str(d.get("addr", "")),
            rule=str(d.get("rule", "")),
            secrets=_strs(d.get("secrets")),
            bytes_up=int(d.get("bytes_up") or 0),
            bytes_down=int(d.get("bytes_down") or 0),
            duration_ms=int(d.get("duration_ms") or 0),
        )

    @property
    def allowed(self) -> bool:
        """Whether the connection or request was let through."""
        return self.decision == "allow"


@dataclass(frozen=True)
class AuditRecord:
    """One line of sandboxd's audit record: an API request (``kind`` api,
    ``action`` its route), a tool call (tool, the tool's name) or a
    lifecycle event (event, its type such as sandbox.paused or
    egress.denied). ``token_id`` is a short hash of the token, never the
    token; ``args_sha256`` and ``args_bytes`` describe the arguments without
    them; ``prev`` is the SHA-256 of the record before it in its replica's
    chain."""

    seq: int
    time: Optional[_dt.datetime]
    kind: str
    action: str
    outcome: str
    replica: str = ""
    prev: str = ""
    tenant: str = ""
    token_id: str = ""
    request_id: str = ""
    run: str = ""
    conversation: str = ""
    sandbox: str = ""
    route: str = ""
    level: str = ""
    args_sha256: str = ""
    args_bytes: int = 0
    status: int = 0
    duration_ms: float = 0.0
    approval: str = ""
    detail: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "AuditRecord":
        return cls(
            seq=int(d.get("seq") or 0),
            time=parse_time(d.get("time")),
            kind=str(d.get("kind", "")),
            action=str(d.get("action", "")),
            outcome=str(d.get("outcome", "")),
            replica=str(d.get("replica", "")),
            prev=str(d.get("prev", "")),
            tenant=str(d.get("tenant", "")),
            token_id=str(d.get("token_id", "")),
            request_id=str(d.get("request_id", "")),
            run=str(d.get("run", "")),
            conversation=str(d.get("conversation", "")),
            sandbox=str(d.get("sandbox", "")),
            route=str(d.get("route", "")),
            level=str(d.get("level", "")),
            args_sha256=str(d.get("args_sha256", "")),
            args_bytes=int(d.get("args_bytes") or 0),
            status=int(d.get("status") or 0),
            duration_ms=float(d.get("duration_ms") or 0),
            approval=str(d.get("approval", "")),
            detail=str(d.get("detail", "")),
        )


@dataclass(frozen=True)
class AuditPage:
    """A page of ``Client.audit``: its records, oldest first; ``next`` is
    the cursor of the next page ("" on the last); ``unreached`` names the
    replicas that did not answer (their records come on a later page)."""

    records: List[AuditRecord]
    next: str = ""
    unreached: List[str] = field(default_factory=list[str])


@dataclass(frozen=True)
class ToolSpec:
    """A tool definition ready to hand to a model."""

    name: str
    description: str
    level: str  # read, write or exec
    parallel_safe: bool
    input_schema: JSON

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ToolSpec":
        schema = d.get("input_schema")
        return cls(
            name=str(d.get("name", "")),
            description=str(d.get("description", "")),
            level=str(d.get("level", "")),
            parallel_safe=bool(d.get("parallel_safe", False)),
            input_schema=dict(_obj(schema)) if isinstance(schema, Mapping) else {"type": "object"},
        )

    def to_openai(self) -> JSON:
        """The tool as OpenAI's chat completions API takes it in ``tools``."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.input_schema},
        }

    def to_anthropic(self) -> JSON:
        """The tool as Anthropic's messages API takes it in ``tools``."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    def to_json(self) -> JSON:
        return {
            "name": self.name,
            "description": self.description,
            "level": self.level,
            "parallel_safe": self.parallel_safe,
            "input_schema": self.input_schema,
        }


@dataclass(frozen=True)
class UnavailableTools:
    """Tools a run does not see, and what would bring them in."""

    tools: List[str]
    reason: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "UnavailableTools":
        return cls(tools=[str(t) for t in _items(d.get("tools"))], reason=str(d.get("reason", "")))


@dataclass(frozen=True)
class Run:
    """One agent run in a conversation, with the tools it sees now."""

    id: str
    conversation: str
    surface: str
    tools: List[ToolSpec]
    unavailable: List[UnavailableTools] = field(default_factory=list[UnavailableTools])
    workdir: str = ""
    space: str = ""
    approval: str = ""
    vibe: bool = False
    parent: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Run":
        return cls(
            id=str(d.get("id", "")),
            conversation=str(d.get("conversation", "")),
            surface=str(d.get("surface", "")),
            tools=[ToolSpec.from_json(_obj(t)) for t in _items(d.get("tools"))],
            unavailable=[UnavailableTools.from_json(_obj(u)) for u in _items(d.get("unavailable"))],
            workdir=str(d.get("workdir", "")),
            space=str(d.get("space", "")),
            approval=str(d.get("approval", "")),
            vibe=bool(d.get("vibe", False)),
            parent=str(d.get("parent", "")),
        )

    def tool(self, name: str) -> Optional[ToolSpec]:
        """The run's tool of that name, or None."""
        return next((t for t in self.tools if t.name == name), None)


@dataclass(frozen=True)
class RunSummary:
    """One run in ``GET /v1/runs``."""

    id: str
    conversation: str
    surface: str
    workdir: str = ""
    space: str = ""
    approval: str = ""
    vibe: bool = False
    parent: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RunSummary":
        return cls(
            id=str(d.get("id", "")),
            conversation=str(d.get("conversation", "")),
            surface=str(d.get("surface", "")),
            workdir=str(d.get("workdir", "")),
            space=str(d.get("space", "")),
            approval=str(d.get("approval", "")),
            vibe=bool(d.get("vibe", False)),
            parent=str(d.get("parent", "")),
        )


@dataclass(frozen=True)
class Block:
    """One piece of a tool result: ``text``, or an ``image`` (base64 data)."""

    type: str
    text: str = ""
    mime_type: str = ""
    data: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Block":
        return cls(
            type=str(d.get("type", "")),
            text=str(d.get("text", "")),
            mime_type=str(d.get("mime_type", "")),
            data=str(d.get("data", "")),
        )

    def image_bytes(self) -> bytes:
        """The decoded image of an image block (b"" for a text block)."""
        return base64.b64decode(self.data) if self.data else b""

    def to_json(self) -> JSON:
        if self.type == "image":
            return {"type": "image", "mime_type": self.mime_type, "data": self.data}
        return {"type": self.type, "text": self.text}


@dataclass(frozen=True)
class ToolResult:
    """What a tool call returns to the model. ``is_error`` is for the model to
    read (bad arguments, a refused approval, ...), not an exception.
    ``execution_count`` is eval's cell number (0 from other tools)."""

    content: List[Block]
    is_error: bool = False
    execution_count: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ToolResult":
        return cls(
            content=[Block.from_json(_obj(b)) for b in _items(d.get("content"))],
            is_error=bool(d.get("is_error", False)),
            execution_count=int(d.get("execution_count") or 0),
        )

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return "\n".join(b.text for b in self.content if b.type == "text")

    def to_json(self) -> JSON:
        out: JSON = {"content": [b.to_json() for b in self.content], "is_error": self.is_error}
        if self.execution_count:
            out["execution_count"] = self.execution_count
        return out


@dataclass(frozen=True)
class OutputEvent:
    """Output a streamed tool call produced while it ran."""

    stream: str  # stdout or stderr
    text: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "OutputEvent":
        return cls(stream=str(d.get("stream", "")), text=str(d.get("text", "")))


ToolStreamEvent = Union[OutputEvent, ToolResult]
"""What a tool stream yields: OutputEvents, then exactly one ToolResult."""


@dataclass(frozen=True)
class QuestionOption:
    """One choice of a question; options are numbered from 1."""

    label: str
    description: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "QuestionOption":
        return cls(label=str(d.get("label", "")), description=str(d.get("description", "")))


@dataclass(frozen=True)
class Question:
    """A card on a space: ``kind`` is question or permission."""

    id: str
    space: str
    run: str
    kind: str
    question: str
    context: str = ""
    options: List[QuestionOption] = field(default_factory=list[QuestionOption])
    allow_free_text: bool = False
    multi_select: bool = False
    expires_at: Optional[_dt.datetime] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Question":
        return cls(
            id=str(d.get("id", "")),
            space=str(d.get("space", "")),
            run=str(d.get("run", "")),
            kind=str(d.get("kind", "")),
            question=str(d.get("question", "")),
            context=str(d.get("context", "")),
            options=[QuestionOption.from_json(_obj(o)) for o in _items(d.get("options"))],
            allow_free_text=bool(d.get("allow_free_text", False)),
            multi_select=bool(d.get("multi_select", False)),
            expires_at=parse_time(d.get("expires_at")),
        )


@dataclass(frozen=True)
class Resolution:
    """How a question ended (the data of a ``resolved`` event)."""

    id: str
    space: str
    status: str
    choices: List[int] = field(default_factory=list[int])
    text: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Resolution":
        return cls(
            id=str(d.get("id", "")),
            space=str(d.get("space", "")),
            status=str(d.get("status", "")),
            choices=[int(c) for c in _items(d.get("choices"))],
            text=str(d.get("text", "")),
        )


@dataclass(frozen=True)
class QuestionEvent:
    """One event of a space's stream: ``type`` is question (``question`` set)
    or resolved (``resolved`` set)."""

    type: str
    question: Optional[Question] = None
    resolved: Optional[Resolution] = None


@dataclass(frozen=True)
class AnswerResult:
    """The answer to ``POST /v1/questions/{id}/answer``: status is answered or
    skipped."""

    id: str
    status: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "AnswerResult":
        return cls(id=str(d.get("id", "")), status=str(d.get("status", "")))
