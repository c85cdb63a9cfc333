#!/usr/bin/env python3
"""A sandboxd background worker (vibe_spawn) that searches the workspace.

sandboxd starts it with the brief on stdin and, in its environment,
SANDBOXD_URL, SANDBOXD_RUN (the worker's own child run) and SANDBOXD_TOKEN
(valid for that run only). Every search goes through sandboxd's tools over
HTTP, so the run's levels and approvals apply to it exactly as to the agent
that spawned it. Its stdout is its result.

The first non-empty line of the brief is what to look for. Where the
ast_grep tool is wired it is searched as code (a pattern such as
`dispose($X)`) in one language: --language LANG on the command line, else a
brief line `language: LANG`, else the language most of the workspace's files
are written in (by extension). A pattern ast_grep refuses (one that does not
parse in that language, say) ends the worker with status 1 and ast_grep's
reason on stderr, rather than a text search that would quietly answer
something else. --text (or a brief line `text: yes`) searches as plain text
with grep through the shell tool, which is also what happens where ast_grep
is not wired.

Config:  workers: {fast: {command: [python3, /path/to/grep-worker.py, --language, go]}}
Only the Python standard library is used.
"""
import argparse
import json
import os
import re
import shlex
import sys
import urllib.error
import urllib.request

URL = os.environ.get("SANDBOXD_URL", "").rstrip("/")
RUN = os.environ.get("SANDBOXD_RUN", "")
TOKEN = os.environ.get("SANDBOXD_TOKEN", "")
TIMEOUT_S = 300

# File extensions of the grammars ast_grep has (tools/astgrep/engine/lang.go).
LANGUAGES = {
    "go": [".go"],
    "python": [".py", ".pyi"],
    "javascript": [".js", ".mjs", ".cjs", ".jsx"],
    "typescript": [".ts", ".mts", ".cts"],
    "tsx": [".tsx"],
    "rust": [".rs"],
    "java": [".java"],
    "c": [".c", ".h"],
    "cpp": [".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx", ".c++", ".h++"],
    "ruby": [".rb", ".rake", ".gemspec"],
    "bash": [".sh", ".bash"],
    "dart": [".dart"],
}
LANGUAGE_OF = {ext: lang for lang, exts in LANGUAGES.items() for ext in exts}

# Counts the workspace's files by extension, skipping what is never source.
COUNT_EXTENSIONS = (
    "find . -type d \\( -name .git -o -name node_modules -o -name .venv -o -name vendor -o -name .workers \\) -prune "
    "-o -type f -name '*.*' -print | sed 's/.*\\././' | sort | uniq -c | sort -rn | head -50"
)


def fail(sentence):
    """Ends the worker as failed: vibe_wait shows this on stderr."""
    print(f"grep-worker: {sentence}", file=sys.stderr)
    sys.exit(1)


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
        fail(f"sandboxd answered {e.code} to {method} {path}: {detail}")
    except OSError as e:
        fail(f"sandboxd at {URL} does not answer ({e}); the worker cannot search without it")


def call(tool, args):
    """Calls one tool of this worker's run; returns (text, is_error)."""
    res = request("POST", f"/v1/runs/{RUN}/tools/{tool}", args)
    text = "".join(b.get("text", "") for b in res.get("content", []))
    return text, bool(res.get("is_error"))


def infer_language(tools):
    """The language most of the workspace's files are in, or None."""
    if "shell" not in tools:
        return None
    text, failed = call("shell", {"command": COUNT_EXTENSIONS})
    if failed:
        fail(f"the workspace's files cannot be listed to pick a language: {text.strip()}; pass --language")
    counts = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\s*(\d+)\s+(\.\S+)", line)
        if m and m.group(2).lower() in LANGUAGE_OF:
            lang = LANGUAGE_OF[m.group(2).lower()]
            counts[lang] = counts.get(lang, 0) + int(m.group(1))
    if not counts:
        return None
    return max(sorted(counts), key=lambda l: counts[l])


def brief_options(lines):
    """`key: value` lines after the first line of the brief."""
    opts = {}
    for line in lines[1:]:
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("language", "text"):
            opts[key.strip().lower()] = value.strip()
    return opts


def grep(pattern, tools, why):
    if "shell" not in tools:
        fail(f"{why}, and the shell tool is not available to this worker's run either, so nothing can search")
    cmd = f"grep -rnI --exclude-dir=.git --exclude-dir=.workers -F -e {shlex.quote(pattern)} . || true"
    text, failed = call("shell", {"command": cmd})
    if failed:
        fail(f"grep through the shell tool failed: {text.strip()}")
    print(f"grep matches for {pattern!r} ({why}):\n{text.strip()}")


def main():
    ap = argparse.ArgumentParser(description="A sandboxd worker that searches the workspace; the brief comes on stdin.")
    ap.add_argument("--language", help="the language ast_grep parses the pattern and files as (default: inferred)")
    ap.add_argument("--text", action="store_true", help="search as plain text with grep")
    flags = ap.parse_args()
    if not (URL and RUN and TOKEN):
        fail("SANDBOXD_URL, SANDBOXD_RUN and SANDBOXD_TOKEN must be set; sandboxd sets them when it starts a worker")

    lines = [l.strip() for l in sys.stdin.read().splitlines() if l.strip()]
    if not lines:
        fail("the brief is empty: its first line should be what to search for")
    pattern = lines[0]
    opts = brief_options(lines)
    tools = {t["name"] for t in request("GET", f"/v1/runs/{RUN}/tools")}

    if flags.text or opts.get("text", "").lower() in ("yes", "true", "1"):
        return grep(pattern, tools, "a text search was asked for")
    if "ast_grep" not in tools:
        return grep(pattern, tools, "ast_grep is not available to this run")

    language = flags.language or opts.get("language") or infer_language(tools)
    if not language:
        fail("no file in the workspace is in a language ast_grep knows, so the pattern cannot be searched as code; "
             "pass --language LANG, or --text for a plain-text search")
    language = language.lower()
    text, failed = call("ast_grep", {"pattern": pattern, "language": language})
    if failed:
        fail(f"ast_grep refused {pattern!r} as {language}: {text.strip()}")
    print(f"ast_grep matches for {pattern!r} in {language}:\n{text.strip()}")


if __name__ == "__main__":
    main()
