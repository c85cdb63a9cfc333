#!/usr/bin/env python3
"""A sandboxd background worker (vibe_spawn) that searches the workspace.

sandboxd starts it with the brief on stdin and, in its environment,
SANDBOXD_URL, SANDBOXD_RUN (the worker's own child run) and SANDBOXD_TOKEN
(valid for that run only). Every search goes through sandboxd's tools over
HTTP, so the run's levels and approvals apply to it exactly as to the agent
that spawned it. Its stdout is its result.

The first non-empty line of the brief is what to look for. It is searched
as code with ast_grep where that tool is wired (a pattern such as
`dispose($X)`), and as plain text with grep through the shell tool
otherwise, or when the pattern does not parse as code.

Config:  workers: {fast: {command: [python3, /path/to/grep-worker.py]}}
Only the Python standard library is used.
"""
import json
import os
import shlex
import sys
import urllib.error
import urllib.request

URL = os.environ["SANDBOXD_URL"].rstrip("/")
RUN = os.environ["SANDBOXD_RUN"]
TOKEN = os.environ["SANDBOXD_TOKEN"]
TIMEOUT_S = 300


def request(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + TOKEN)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors="replace")
        try:
            detail = json.loads(detail)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            pass
        sys.exit(f"sandboxd answered {e.code} to {method} {path}: {detail}")


def call(tool, args):
    """Calls one tool of this worker's run; returns (text, is_error)."""
    res = request("POST", f"/v1/runs/{RUN}/tools/{tool}", args)
    text = "".join(b.get("text", "") for b in res.get("content", []))
    return text, bool(res.get("is_error"))


def main():
    brief = sys.stdin.read()
    lines = [l.strip() for l in brief.splitlines() if l.strip()]
    if not lines:
        sys.exit("the brief is empty: its first line should be what to search for")
    pattern = lines[0]
    tools = {t["name"] for t in request("GET", f"/v1/runs/{RUN}/tools")}

    if "ast_grep" in tools:
        text, failed = call("ast_grep", {"pattern": pattern})
        if not failed:
            print(f"ast_grep matches for {pattern!r}:\n{text.strip()}")
            return
    if "shell" not in tools:
        sys.exit("neither ast_grep nor shell is available to this worker's run")
    cmd = f"grep -rnI --exclude-dir=.git -F -e {shlex.quote(pattern)} . || true"
    text, failed = call("shell", {"command": cmd})
    if failed:
        sys.exit(f"the search failed: {text}")
    print(f"grep matches for {pattern!r}:\n{text.strip()}")


if __name__ == "__main__":
    main()
