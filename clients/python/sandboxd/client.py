"""The client of sandboxd's HTTP API v1 (DESIGN.md section 3)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union, cast

from ._http import LineReader, Transport, read_body
from .errors import Internal, InvalidArgument, error_from_answer
from .streams import QuestionStream, ToolStream
from .types import (
    AnswerResult,
    AuditPage,
    AuditRecord,
    EgressRecord,
    Lifecycle,
    NetworkStatus,
    OutputEvent,
    Question,
    Resources,
    Run,
    RunSummary,
    Sandbox,
    Snapshot,
    ToolResult,
    ToolSpec,
)

DEFAULT_TIMEOUT = 300.0
"""Seconds a call may take by default: a tool call may run a long command."""

DEFAULT_STREAM_IDLE_TIMEOUT = 60.0
"""Seconds a stream may stay silent; sandboxd sends a heartbeat every 15 s
by default (limits.stream_heartbeat, questions' heartbeat)."""

Args = Union[Mapping[str, Any], str, bytes, None]


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _encode_args(args: Args) -> bytes:
    if args is None:
        return b"{}"
    if isinstance(args, bytes):
        return args
    if isinstance(args, str):
        return args.encode("utf-8")
    try:
        return json.dumps(args).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise InvalidArgument(f"the tool arguments cannot be encoded as JSON: {e}; pass a dict of JSON values", status=0) from e


def _rules(name: str, v: Optional[Iterable[str]]) -> List[str]:
    """v as a list of strings; a lone string is refused, since iterating it
    would send its letters as rules."""
    if v is None:
        return []
    if isinstance(v, (str, bytes)):
        raise InvalidArgument(f"{name} is a list of strings, not one string; pass [{str(v)!r}]", status=0)
    out = list(v)
    for x in cast(List[object], out):  # the hint is not checked at run time
        if not isinstance(x, str):
            raise InvalidArgument(f"{name} holds {x!r}, which is not a string; pass strings such as \"pypi.org\"", status=0)
    return out


def _as_obj(doc: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise Internal(f"{what}: the answer is not a JSON object", status=200)
    return cast(Mapping[str, Any], doc)


class Client:
    """Calls one sandboxd. Safe for concurrent use from several threads;
    connections are kept alive and reused.

    ``base_url`` and ``token`` default to the environment's SANDBOXD_URL and
    SANDBOXD_TOKEN. ``timeout`` bounds each call (seconds, the whole answer);
    every method takes its own ``timeout`` too.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        token: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        stream_idle_timeout: float = DEFAULT_STREAM_IDLE_TIMEOUT,
        user_agent: str = "sandboxd-python/0.1",
    ) -> None:
        url = base_url if base_url is not None else os.environ.get("SANDBOXD_URL", "")
        if not url:
            raise InvalidArgument("no sandboxd address: pass base_url or set SANDBOXD_URL (e.g. http://127.0.0.1:7788)", status=0)
        if timeout <= 0 or stream_idle_timeout <= 0:
            raise InvalidArgument("timeout and stream_idle_timeout must be positive numbers of seconds", status=0)
        self._transport = Transport(url)
        self.base_url = self._transport.base_url
        self._token = token if token is not None else os.environ.get("SANDBOXD_TOKEN", "")
        self.timeout = timeout
        self.stream_idle_timeout = stream_idle_timeout
        self._user_agent = user_agent

    def close(self) -> None:
        """Closes the kept-alive connections."""
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ----------------------------------------------------------

    def _headers(self, accept: str, has_body: bool) -> Dict[str, str]:
        h = {"Accept": accept, "User-Agent": self._user_agent}
        if has_body:
            h["Content-Type"] = "application/json"
        if self._token:
            h["Authorization"] = "Bearer " + self._token
        return h

    def _do(
        self,
        method: str,
        path: str,
        body: Optional[Any] = None,
        *,
        want: int,
        timeout: Optional[float],
        raw: Optional[bytes] = None,
    ) -> Any:
        """Sends a request and returns the decoded JSON of a ``want`` answer
        (None for an empty body); any other status raises its error."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode("utf-8"))
        ans = self._transport.request(
            method, path, data, self._headers("application/json", data is not None), timeout or self.timeout
        )
        if ans.status != want:
            raise error_from_answer(ans.status, ans.body, ans.headers)
        if not ans.body:
            return None
        try:
            return json.loads(ans.body)
        except ValueError as e:
            raise Internal(f"{method} {path}: the answer is not the expected JSON: {e}", status=ans.status) from e

    def _list(self, v: Any) -> List[Mapping[str, Any]]:
        items: List[Any] = cast(List[Any], v) if isinstance(v, list) else []
        return [cast(Mapping[str, Any], x) for x in items if isinstance(x, Mapping)]

    # --- health ------------------------------------------------------------

    def healthz(self, *, timeout: Optional[float] = None) -> None:
        """Raises unless sandboxd answers."""
        self._do("GET", "/healthz", want=200, timeout=timeout)

    def readyz(self, *, timeout: Optional[float] = None) -> None:
        """Raises (Unavailable) unless sandboxd and its engine are ready."""
        self._do("GET", "/readyz", want=200, timeout=timeout)

    # --- sandboxes ---------------------------------------------------------

    def create_sandbox(
        self,
        conversation: str,
        *,
        image: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        resources: Optional[Resources] = None,
        network: Optional[str] = None,
        workspace_host_path: Optional[str] = None,
        egress_allow: Optional[Sequence[str]] = None,
        egress_deny: Optional[Sequence[str]] = None,
        secrets: Optional[Sequence[str]] = None,
        lifecycle: Optional[Lifecycle] = None,
        snapshot: Optional[str] = None,
        runtime: Optional[str] = None,
        read_only_root: Optional[bool] = None,
        timeout: Optional[float] = None,
    ) -> Sandbox:
        """Creates the conversation's sandbox. Conflict when the
        conversation already has a live sandbox.

        ``network`` is "none" (no network; the default unless the config
        names another), "bridge" (the engine's network) or "proxy": no route
        out, and programs in the sandbox reach out only through sandboxd's
        HTTP(S) proxy (HTTP_PROXY, HTTPS_PROXY and ALL_PROXY are set for
        them), which lets a connection through only when the deployment's,
        the tenant's and the sandbox's policies all allow it, and records
        each decision (see :meth:`network`, :meth:`egress`). Proxy needs a
        container backend; the host backend refuses it (InvalidArgument).

        For "proxy" only (with another network they are InvalidArgument):
        ``egress_allow`` and ``egress_deny`` are the sandbox's own rules
        ("pypi.org", "*.npmjs.org", "github.com:443", "10.0.0.0/8"), which
        narrow the tenant's policy and never widen it; ``secrets`` names the
        tenant's secrets sandboxd adds to requests bound for their hosts
        (the values never enter the sandbox).

        ``workspace_host_path`` makes a host directory the workspace (it
        must lie under the config's allowed_host_paths).

        ``lifecycle`` says what idleness does to the sandbox (a key left at
        0 takes the tenant's default, config lifecycle). ``snapshot`` makes
        it from one of the tenant's snapshots (its files and image).

        ``runtime`` is "runc" or "gvisor" (among those the tenant may use;
        None: the tenant's default); ``read_only_root`` makes the root file
        system read-only, the workspace, /tmp and home staying writable
        (None: the tenant's default, off)."""
        allow, deny = _rules("egress_allow", egress_allow), _rules("egress_deny", egress_deny)
        names = _rules("secrets", secrets)
        body: Dict[str, Any] = {"conversation": conversation}
        if image:
            body["image"] = image
        if env:
            body["env"] = dict(env)
        if resources is not None and resources.to_json():
            body["resources"] = resources.to_json()
        if network:
            body["network"] = network
        if runtime:
            body["runtime"] = runtime
        if read_only_root is not None:
            body["read_only_root"] = read_only_root
        if workspace_host_path:
            body["workspace"] = {"host_path": workspace_host_path}
        if allow or deny:
            body["egress"] = {k: v for k, v in (("allow", allow), ("deny", deny)) if v}
        if names:
            body["secrets"] = names
        if lifecycle is not None and lifecycle.to_json():
            body["lifecycle"] = lifecycle.to_json()
        if snapshot:
            body["snapshot"] = snapshot
        return Sandbox.from_json(self._do("POST", "/v1/sandboxes", body, want=201, timeout=timeout))

    def list_sandboxes(self, conversation: Optional[str] = None, *, timeout: Optional[float] = None) -> List[Sandbox]:
        """The tenant's sandboxes, of one conversation when it is given."""
        path = "/v1/sandboxes"
        if conversation:
            path += "?conversation=" + urllib.parse.quote(conversation, safe="")
        return [Sandbox.from_json(d) for d in self._list(self._do("GET", path, want=200, timeout=timeout))]

    def get_sandbox(self, sandbox_id: str, *, timeout: Optional[float] = None) -> Sandbox:
        return Sandbox.from_json(self._do("GET", "/v1/sandboxes/" + _q(sandbox_id), want=200, timeout=timeout))

    def delete_sandbox(self, sandbox_id: str, *, timeout: Optional[float] = None) -> None:
        """Stops everything in the sandbox and removes it."""
        self._do("DELETE", "/v1/sandboxes/" + _q(sandbox_id), want=204, timeout=timeout)

    def pause_sandbox(self, sandbox_id: str, *, timeout: Optional[float] = None) -> Sandbox:
        """Freezes every process of the sandbox (kept in memory, no CPU);
        the next call, or :meth:`resume_sandbox`, resumes it."""
        return self._lifecycle(sandbox_id, "pause", timeout)

    def hibernate_sandbox(self, sandbox_id: str, *, timeout: Optional[float] = None) -> Sandbox:
        """Stops every process of the sandbox and frees its memory, keeping
        its files; the next call, or :meth:`resume_sandbox`, starts it
        again. Kernels and processes do not survive it."""
        return self._lifecycle(sandbox_id, "hibernate", timeout)

    def resume_sandbox(self, sandbox_id: str, *, timeout: Optional[float] = None) -> Sandbox:
        """Brings a paused or hibernated sandbox back to running."""
        return self._lifecycle(sandbox_id, "resume", timeout)

    def create_snapshot(self, sandbox_id: str, name: str = "", *, timeout: Optional[float] = None) -> Snapshot:
        """Takes a snapshot of the sandbox's files at one consistent point
        (processes and memory are not part of it)."""
        path = "/v1/sandboxes/" + _q(sandbox_id) + "/snapshots"
        body = {"name": name} if name else {}
        return Snapshot.from_json(self._do("POST", path, body, want=201, timeout=timeout))

    def list_snapshots(self, *, timeout: Optional[float] = None) -> List[Snapshot]:
        """The tenant's snapshots, newest first."""
        return [Snapshot.from_json(d) for d in self._list(self._do("GET", "/v1/snapshots", want=200, timeout=timeout))]

    def get_snapshot(self, snapshot_id: str, *, timeout: Optional[float] = None) -> Snapshot:
        return Snapshot.from_json(self._do("GET", "/v1/snapshots/" + _q(snapshot_id), want=200, timeout=timeout))

    def delete_snapshot(self, snapshot_id: str, *, timeout: Optional[float] = None) -> None:
        """Removes a snapshot; sandboxes made from it keep their files."""
        self._do("DELETE", "/v1/snapshots/" + _q(snapshot_id), want=204, timeout=timeout)

    def fork_sandbox(
        self, sandbox_id: str, conversations: Sequence[str], *, timeout: Optional[float] = None
    ) -> Tuple[Snapshot, List[Sandbox], List[Tuple[str, str]]]:
        """Makes one sandbox per conversation from one consistent point of
        the sandbox. Returns the snapshot they started from, the sandboxes
        made, and (conversation, error message) for each copy that failed."""
        path = "/v1/sandboxes/" + _q(sandbox_id) + "/fork"
        d = cast(Mapping[str, Any], self._do("POST", path, {"conversations": list(conversations)}, want=201, timeout=timeout) or {})
        failed: List[Tuple[str, str]] = []
        for f in self._list(d.get("failed")):
            err = cast(Mapping[str, Any], f.get("error") or {})
            failed.append((str(f.get("conversation", "")), str(err.get("message", ""))))
        snap = cast(Mapping[str, Any], d.get("snapshot") or {})
        return Snapshot.from_json(snap), [Sandbox.from_json(x) for x in self._list(d.get("sandboxes"))], failed

    def _lifecycle(self, sandbox_id: str, verb: str, timeout: Optional[float]) -> Sandbox:
        path = "/v1/sandboxes/" + _q(sandbox_id) + "/" + verb
        return Sandbox.from_json(self._do("POST", path, {}, want=200, timeout=timeout))

    def network(self, sandbox_id: str, *, timeout: Optional[float] = None) -> NetworkStatus:
        """The sandbox's network mode and, for "proxy", its egress policy
        level by level, the hosts it may reach, its secrets' names and its
        open connections."""
        path = "/v1/sandboxes/" + _q(sandbox_id) + "/network"
        return NetworkStatus.from_json(_as_obj(self._do("GET", path, want=200, timeout=timeout), "GET " + path))

    def set_network(
        self,
        sandbox_id: str,
        allow: Sequence[str],
        deny: Sequence[str] = (),
        *,
        timeout: Optional[float] = None,
    ) -> NetworkStatus:
        """Replaces a proxy sandbox's own allow and deny lists and returns
        the new status: new connections follow at once, open ones the new
        policy refuses are cut, and the change outlives a restart of
        sandboxd. Rules an outer level refuses are listed in
        ``not_effective``. FailedPrecondition for a sandbox whose network is
        not "proxy"; InvalidArgument for a rule sandboxd cannot read."""
        body = {"allow": _rules("allow", allow), "deny": _rules("deny", deny)}
        path = "/v1/sandboxes/" + _q(sandbox_id) + "/network"
        return NetworkStatus.from_json(_as_obj(self._do("PUT", path, body, want=200, timeout=timeout), "PUT " + path))

    def egress(self, sandbox_id: str, limit: Optional[int] = None, *, timeout: Optional[float] = None) -> List[EgressRecord]:
        """A proxy sandbox's recent egress decisions, newest first: ``limit``
        of them (1 to 1000; sandboxd's default is 100). sandboxd keeps the
        last 1000 per sandbox in memory; a sandbox not in "proxy" has
        none."""
        path = "/v1/sandboxes/" + _q(sandbox_id) + "/egress"
        if limit is not None:
            n = cast(object, limit)  # the hint is not checked at run time
            if isinstance(n, bool) or not isinstance(n, int):
                raise InvalidArgument(f"limit is {limit!r}; pass a whole number from 1 to 1000, or None for the default", status=0)
            path += "?limit=" + str(limit)
        return [EgressRecord.from_json(d) for d in self._list(self._do("GET", path, want=200, timeout=timeout))]

    # --- audit -------------------------------------------------------------

    def audit(
        self,
        *,
        since: Optional[_dt.datetime] = None,
        until: Optional[_dt.datetime] = None,
        run: Optional[str] = None,
        sandbox: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> AuditPage:
        """One page of the tenant's audit record, oldest first: requests,
        tool calls and lifecycle events, narrowed by the actions' start
        (``since`` inclusive, ``until`` exclusive; aware datetimes), a run,
        a sandbox; ``limit`` 1 to 1000 (sandboxd's default is 100). Pass the
        page's ``next`` as ``cursor`` for the next one, or use
        ``audit_records``."""
        q: Dict[str, str] = {}
        for name, t in (("since", since), ("until", until)):
            if t is None:
                continue
            v = cast(object, t)  # the hint is not checked at run time
            if not isinstance(v, _dt.datetime) or v.tzinfo is None:
                raise InvalidArgument(f"{name} is {t!r}; pass a datetime with its time zone (datetime.timezone.utc)", status=0)
            q[name] = t.astimezone(_dt.timezone.utc).isoformat().replace("+00:00", "Z")
        if limit is not None:
            n = cast(object, limit)  # the hint is not checked at run time
            if isinstance(n, bool) or not isinstance(n, int):
                raise InvalidArgument(f"limit is {limit!r}; pass a whole number from 1 to 1000, or None for the default", status=0)
            q["limit"] = str(limit)
        for name, v in (("run", run), ("sandbox", sandbox), ("cursor", cursor)):
            if v:
                q[name] = v
        path = "/v1/audit" + ("?" + urllib.parse.urlencode(q) if q else "")
        d = self._do("GET", path, want=200, timeout=timeout)
        if not isinstance(d, dict):
            raise Internal(f"GET {path}: the answer is not an audit page", status=200)
        page = cast(Mapping[str, Any], d)
        return AuditPage(
            records=[AuditRecord.from_json(r) for r in self._list(page.get("records"))],
            next=str(page.get("next") or ""),
            unreached=[str(u) for u in cast(List[Any], page.get("unreached") or [])],
        )

    def audit_records(
        self,
        *,
        since: Optional[_dt.datetime] = None,
        until: Optional[_dt.datetime] = None,
        run: Optional[str] = None,
        sandbox: Optional[str] = None,
        page_size: int = 1000,
        timeout: Optional[float] = None,
    ) -> Iterator[AuditRecord]:
        """Every audit record the filters select, oldest first, a page of
        ``page_size`` at a time."""
        cursor: Optional[str] = None
        while True:
            page = self.audit(since=since, until=until, run=run, sandbox=sandbox, limit=page_size, cursor=cursor, timeout=timeout)
            yield from page.records
            if not page.next:
                return
            cursor = page.next

    # --- runs --------------------------------------------------------------

    def create_run(
        self,
        conversation: str,
        *,
        surface: Optional[str] = None,
        workdir: Optional[str] = None,
        vibe: bool = False,
        space: Optional[str] = None,
        approval: Optional[str] = None,
        parent: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Run:
        """Opens a run in a conversation. ``surface`` is "default", "plan" or
        "readonly"; ``workdir`` defaults to /workspace (relative is taken
        from it); ``space`` is where its questions go; ``approval`` is
        "auto" (default) or "ask" (needs a space); ``parent`` is the
        spawning run; ``vibe`` enables background workers."""
        body: Dict[str, Any] = {"conversation": conversation}
        for k, v in (("surface", surface), ("workdir", workdir), ("space", space), ("approval", approval), ("parent", parent)):
            if v:
                body[k] = v
        if vibe:
            body["vibe"] = True
        return Run.from_json(self._do("POST", "/v1/runs", body, want=201, timeout=timeout))

    def get_run(self, run_id: str, *, timeout: Optional[float] = None) -> Run:
        """The run with the tools it sees now and, in ``unavailable``, those
        it does not and why."""
        return Run.from_json(self._do("GET", "/v1/runs/" + _q(run_id), want=200, timeout=timeout))

    def list_runs(self, *, timeout: Optional[float] = None) -> List[RunSummary]:
        """The tenant's live runs."""
        return [RunSummary.from_json(d) for d in self._list(self._do("GET", "/v1/runs", want=200, timeout=timeout))]

    def delete_run(self, run_id: str, *, timeout: Optional[float] = None) -> None:
        """Ends the run, its children and its workers."""
        self._do("DELETE", "/v1/runs/" + _q(run_id), want=204, timeout=timeout)

    def list_tools(self, run_id: str, *, timeout: Optional[float] = None) -> List[ToolSpec]:
        """The tools the run may call."""
        path = "/v1/runs/" + _q(run_id) + "/tools"
        return [ToolSpec.from_json(d) for d in self._list(self._do("GET", path, want=200, timeout=timeout))]

    # --- tool calls --------------------------------------------------------

    def call_tool(self, run_id: str, name: str, args: Args = None, *, timeout: Optional[float] = None) -> ToolResult:
        """Calls a tool with ``args`` (a dict, or JSON text). A result with
        ``is_error`` is for the model to read, not an exception; a tool the
        run does not see raises NotFound."""
        path = "/v1/runs/" + _q(run_id) + "/tools/" + _q(name)
        doc = self._do("POST", path, want=200, timeout=timeout, raw=_encode_args(args))
        if not isinstance(doc, Mapping):
            raise Internal(f"POST {path}: the answer is not a tool result", status=200)
        return ToolResult.from_json(cast(Mapping[str, Any], doc))

    def stream_tool(
        self,
        run_id: str,
        name: str,
        args: Args = None,
        *,
        timeout: Optional[float] = None,
        idle_timeout: Optional[float] = None,
    ) -> ToolStream:
        """Calls a tool with its output streamed (``Accept:
        text/event-stream``). Iterate the answer: OutputEvent as the tool
        prints, then the ToolResult. What fails before anything streamed
        (401, 404, bad JSON, ...) raises here. ``timeout`` bounds the whole
        call, ``idle_timeout`` each silence (heartbeats count)."""
        path = "/v1/runs/" + _q(run_id) + "/tools/" + _q(name)
        what = "POST " + path
        total = timeout or self.timeout
        deadline = time.monotonic() + total
        conn, sock, resp, headers = self._transport.open_stream(
            "POST", path, _encode_args(args), self._headers("text/event-stream", True), total
        )
        ctype = headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "text/event-stream":
            # Answered before anything streamed: exactly a plain call's answer.
            try:
                data = read_body(resp, sock, deadline, "POST", path, total)
            finally:
                conn.close()
            if resp.status != 200:
                raise error_from_answer(resp.status, data, headers)
            try:
                doc = json.loads(data)
            except ValueError as e:
                raise Internal(f"{what}: the answer is not the expected JSON: {e}", status=200) from e
            return ToolStream(what, None, ToolResult.from_json(doc))
        lines = LineReader(conn, sock, resp, what, idle_timeout or self.stream_idle_timeout, deadline, total)
        return ToolStream(what, lines)

    def call_tool_stream(
        self,
        run_id: str,
        name: str,
        args: Args = None,
        on_output: Optional[Callable[[OutputEvent], None]] = None,
        *,
        timeout: Optional[float] = None,
        idle_timeout: Optional[float] = None,
    ) -> ToolResult:
        """stream_tool that hands each OutputEvent to ``on_output`` as it
        arrives and returns the result."""
        with self.stream_tool(run_id, name, args, timeout=timeout, idle_timeout=idle_timeout) as stream:
            for ev in stream:
                if isinstance(ev, OutputEvent):
                    if on_output is not None:
                        on_output(ev)
                else:
                    return ev
            return stream.result()

    # --- questions ---------------------------------------------------------

    def questions(self, space: str, *, timeout: Optional[float] = None) -> List[Question]:
        """The open questions of a space."""
        path = "/v1/spaces/" + _q(space) + "/questions"
        return [Question.from_json(d) for d in self._list(self._do("GET", path, want=200, timeout=timeout))]

    def watch_questions(
        self,
        space: str,
        *,
        idle_timeout: Optional[float] = None,
        timeout: Optional[float] = None,
    ) -> QuestionStream:
        """Opens the space's stream of questions (an iterator of
        QuestionEvent); while it is open a human is connected to the space.
        Returns once sandboxd has accepted it. ``idle_timeout`` bounds each
        silence (heartbeats count); ``timeout``, when given, the whole
        stream."""
        path = "/v1/spaces/" + _q(space) + "/questions"
        connect = min(timeout, self.timeout) if timeout else self.timeout
        deadline = time.monotonic() + timeout if timeout else None
        conn, sock, resp, headers = self._transport.open_stream(
            "GET", path, None, self._headers("text/event-stream", False), connect
        )
        ctype = headers.get("Content-Type", "").split(";")[0].strip().lower()
        if resp.status != 200 or ctype != "text/event-stream":
            try:
                data = read_body(resp, sock, time.monotonic() + connect, "GET", path, connect)
            finally:
                conn.close()
            if resp.status != 200:
                raise error_from_answer(resp.status, data, headers)
            raise Internal(f"GET {path}: sandboxd answered {ctype or 'no content type'}, not an event stream", status=200)
        lines = LineReader(conn, sock, resp, "GET " + path, idle_timeout or self.stream_idle_timeout, deadline, timeout)
        return QuestionStream("GET " + path, lines)

    def answer_question(
        self,
        question_id: str,
        choices: Optional[Iterable[int]] = None,
        text: Optional[str] = None,
        *,
        skip: bool = False,
        timeout: Optional[float] = None,
    ) -> AnswerResult:
        """Answers a question with option numbers (from 1) and/or free text,
        or skips it. Conflict when it was already answered."""
        body: Dict[str, Any] = {}
        if skip:
            body["skip"] = True
        else:
            if choices:
                body["choices"] = [int(c) for c in choices]
            if text:
                body["text"] = text
        path = "/v1/questions/" + _q(question_id) + "/answer"
        return AnswerResult.from_json(self._do("POST", path, body, want=200, timeout=timeout) or {})
