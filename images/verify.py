"""Checks, inside a sandbox image, that every tool sandboxd relies on really works.

Run by images/verify.sh as `docker run --rm -i --network none IMAGE python3 - < verify.py`:
standard library only, no network. Language servers and the lldb adapter must answer a real
`initialize` request; versions must be the pinned ones where a version is pinned (argv).
Prints one line per check and exits 1 when any check fails.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

DEADLINE = 180.0  # seconds for any one check; a cold `go run` on 2 cores under load took over 60
failures = []


def report(name, ok, detail):
    print("%-4s %-32s %s" % ("ok" if ok else "FAIL", name, detail.strip().splitlines()[0][:100] if detail.strip() else ""), flush=True)
    if not ok:
        failures.append(name)


def run(name, argv, want=None, cwd=None, env=None):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=DEADLINE, cwd=cwd, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        report(name, False, str(e))
        return
    out = (p.stdout + p.stderr).strip()
    ok = p.returncode == 0 and (want is None or want in out)
    if ok and want:
        out = next(line for line in out.splitlines() if want in line)
    report(name, ok, out if ok else "exit %d, want %r: %s" % (p.returncode, want, out.replace("\n", " | ")))


def frame(msg):
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_frame(stream, deadline):
    """Reads one Content-Length framed JSON message (LSP and DAP share the framing)."""
    length = None
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError("no answer before the deadline")
        line = stream.readline()
        if not line:
            raise EOFError("the server closed its output")
        line = line.strip()
        if not line:
            if length is not None:
                break
            continue
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    return json.loads(stream.read(length))


def handshake(name, argv, request, accept, cwd):
    """Starts a stdio server, sends one request and waits for its response (skipping notifications)."""
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd)
    except OSError as e:
        report(name, False, str(e))
        return
    deadline = time.monotonic() + DEADLINE
    try:
        p.stdin.write(frame(request))
        p.stdin.flush()
        while True:
            msg = read_frame(p.stdout, deadline)
            if msg.get("id") == request.get("id", -1) or msg.get("request_seq") == request.get("seq", -1):
                ok, detail = accept(msg)
                report(name, ok, detail)
                return
    except Exception as e:  # any failure to talk is the check failing
        report(name, False, "%s: %s" % (type(e).__name__, e))
    finally:
        p.kill()
        p.wait()


def lsp(name, argv, cwd):
    req = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"processId": None, "rootUri": "file://" + cwd, "capabilities": {}}}

    def accept(msg):
        caps = (msg.get("result") or {}).get("capabilities")
        info = (msg.get("result") or {}).get("serverInfo") or {}
        return caps is not None, "initialize answered %s %s" % (info.get("name", ""), info.get("version", ""))

    handshake(name, argv, req, accept, cwd)


def dap(name, argv, cwd):
    req = {"seq": 1, "type": "request", "command": "initialize",
           "arguments": {"adapterID": "check", "linesStartAt1": True, "columnsStartAt1": True}}

    def accept(msg):
        return bool(msg.get("success")), "initialize answered success=%s" % msg.get("success")

    handshake(name, argv, req, accept, cwd)


def main(pins):
    work = tempfile.mkdtemp(prefix="verify-")
    with open(os.path.join(work, "go.mod"), "w") as f:
        f.write("module example.com/check\n\ngo 1.21\n")
    with open(os.path.join(work, "main.go"), "w") as f:
        f.write('package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("go ok") }\n')
    # C lives apart from the Go package: a .c file beside Go files would make it a cgo package.
    os.mkdir(os.path.join(work, "c"))
    with open(os.path.join(work, "c", "main.c"), "w") as f:
        f.write('#include <stdio.h>\nint main(void) { puts("c ok"); return 0; }\n')
    with open(os.path.join(work, "main.py"), "w") as f:
        f.write("print('py ok')\n")
    with open(os.path.join(work, "main.ts"), "w") as f:
        f.write("const x: number = 1;\nconsole.log(x);\n")

    run("go version", ["go", "version"], pins.get("go"))
    run("go build (offline)", ["go", "run", "."], "go ok", cwd=work)
    run("gopls version", ["gopls", "version"], pins.get("gopls"))
    run("dlv version", ["dlv", "version"], (pins.get("dlv") or "").lstrip("v") or None)
    run("node version", ["node", "--version"], "v18.")
    run("pyright version", ["pyright", "--version"], pins.get("pyright"))
    run("typescript-language-server", ["typescript-language-server", "--version"], pins.get("tsls"))
    run("tsc version", ["tsc", "--version"], pins.get("typescript"))
    run("python imports", ["python3", "-c",
        "import io, pandas, matplotlib, debugpy, pylsp\n"
        "import matplotlib.pyplot as plt\n"
        "plt.plot(pandas.Series([1, 2, 3])); b = io.BytesIO(); plt.savefig(b, format='png')\n"
        "assert b.getvalue()[:4] == b'\\x89PNG'\n"
        "print('pandas', pandas.__version__, 'matplotlib', matplotlib.__version__, 'debugpy', debugpy.__version__)"])
    run("python3 -m venv", ["python3", "-m", "venv", os.path.join(work, "venv")])
    run("cc (build-essential)", ["sh", "-c", "cc -o main main.c && ./main"], "c ok", cwd=os.path.join(work, "c"))
    run("clangd version", ["clangd", "--version"], "clangd version 16")
    run("lldb version", ["lldb", "--version"], "lldb version 16")
    run("git version", ["git", "--version"], "git version")
    run("ps (procps)", ["ps", "-p", "1"])

    lsp("lsp: gopls", ["gopls"], work)
    lsp("lsp: pyright-langserver", ["pyright-langserver", "--stdio"], work)
    lsp("lsp: typescript-language-server", ["typescript-language-server", "--stdio"], work)
    lsp("lsp: pylsp", ["pylsp"], work)
    lsp("lsp: clangd", ["clangd"], work)
    dap("dap: lldb-dap", ["lldb-dap"], work)
    dap("dap: lldb-vscode-16", ["lldb-vscode-16"], work)
    dap("dap: debugpy.adapter", ["python3", "-m", "debugpy.adapter"], work)

    if failures:
        print("%d check(s) failed: %s" % (len(failures), ", ".join(failures)), flush=True)
        sys.exit(1)
    print("all checks passed", flush=True)


if __name__ == "__main__":
    main(dict(a.split("=", 1) for a in sys.argv[1:]))
