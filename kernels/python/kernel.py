"""sandboxd's Python kernel: a persistent namespace driven over fds 3 and 4.

The protocol is newline-delimited JSON. sandboxd writes requests on fd 3
({"type": "execute", "id", "code"} and {"type": "tool_result", "call", ...});
an execute may carry "env" (variables set for that cell only) and
"bundle": "full" (displays keep every MIME type, for the code interpreter
API, instead of the few the eval tool shows);
the kernel writes on fd 4: stream, display, tool_call and done messages, in
the order the cell produced them. stdin is /dev/null; an interrupt is a
SIGINT sent to this process, which raises KeyboardInterrupt in the cell and
keeps the namespace. Only the standard library is used; the sandboxd_*
modules beside this file show objects (sandboxd_rich, sandboxd_chart), stand
in for IPython where it is not installed (sandboxd_ipython), hook PIL's
show() (sandboxd_hooks) and rewrite magics (sandboxd_magics).
"""

import ast
import builtins
import io
import json
import linecache
import os
import signal
import sys
import textwrap
import threading
import time
import tokenize
import traceback

from sandboxd_bundle import full_bundle, full_raw
from sandboxd_rich import figure_bundle, figure_of, mime_bundle, patch_pil, reduce_bundle

PROTO_IN = 3
PROTO_OUT = 4
STREAM_CHUNK = 8192
# Unsent text older than this (seconds) is sent while a cell runs.
FLUSH_AFTER = 0.1


class Channel:
    """The protocol pipes. One lock serializes writers (user threads may print)."""

    def __init__(self):
        self.buf = b""
        self.lock = threading.Lock()
        # The id of the running cell: every message sent while it runs says
        # so, and sandboxd drops a message of another cell (one delivered
        # twice across a reconnect).
        self.cell = None

    def send(self, msg):
        if self.cell is not None and "cell" not in msg:
            msg = dict(msg, cell=self.cell)
        data = (json.dumps(msg, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        with self.lock:
            view = memoryview(data)
            while view:
                n = os.write(PROTO_OUT, view)
                view = view[n:]

    def recv(self):
        while b"\n" not in self.buf:
            chunk = os.read(PROTO_IN, 65536)
            if not chunk:
                raise EOFError("sandboxd closed the protocol pipe")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


class Output:
    """The cell's stdout and stderr text in the order it was written, sent as
    stream messages: buffered so a print loop is not one message per line,
    and flushed before any display or tool call so the order is kept."""

    def __init__(self, chan):
        self.chan = chan
        self.parts = []  # [name, text] runs
        self.size = 0
        self.since = 0.0  # when the oldest unsent text was written
        self.lock = threading.Lock()  # guards parts, size and since
        # Held from taking the runs until they are sent, so text the timer
        # flushes cannot overtake a display that follows it.
        self.sending = threading.Lock()
        threading.Thread(target=self.flush_late, name="sandboxd-output", daemon=True).start()

    def add(self, name, text):
        with self.lock:
            if not self.parts:
                self.since = time.monotonic()
            if self.parts and self.parts[-1][0] == name:
                self.parts[-1][1].append(text)
            else:
                self.parts.append([name, [text]])
            self.size += len(text)
            full = self.size >= STREAM_CHUNK
        if full:
            self.flush()

    def flush(self):
        with self.sending:
            with self.lock:
                parts, self.parts, self.size = self.parts, [], 0
            for name, texts in parts:
                self.chan.send({"type": "stream", "name": name, "text": "".join(texts)})

    def flush_late(self):
        """Sends text that waited FLUSH_AFTER while a cell runs, so a slow
        print loop reaches a streamed call as it prints, not at the end.
        Between cells text waits for the next one, which owns it."""
        while True:
            time.sleep(FLUSH_AFTER / 2)
            with self.lock:
                due = self.parts and time.monotonic() - self.since >= FLUSH_AFTER
            if due and self.chan.cell is not None:
                self.flush()


class Stream(io.TextIOBase):
    """sys.stdout / sys.stderr. Before Python-level text is queued, what
    subprocesses already wrote to the fds is picked up, so the two keep
    their order."""

    def __init__(self, kernel, name):
        self.kernel = kernel
        self.name = name

    def writable(self):
        return True

    @property
    def encoding(self):
        return "utf-8"

    def isatty(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        fds = self.kernel.fds
        if fds is not None and fds.waiting():
            fds.drain()
        self.kernel.output.add(self.name, s)
        return len(s)

    def flush(self):
        self.kernel.flush_streams()


class FdCapture:
    """Output written to fds 1 and 2 directly (subprocesses, os.system, C
    code) is read back through pipes by one thread and sent as stream text,
    so it lands in the cell that printed it. drain() runs at the end of a
    cell to pick up what is still in the pipes. Fatal interpreter errors go
    to the original stderr (kept as a spare fd), where the agent reads them."""

    def __init__(self, kernel, spare_stderr):
        self.kernel = kernel
        self.spare = spare_stderr  # the agent's stderr pipe: a copy of fd-level stderr goes there
        self.lock = threading.RLock()  # one reader of the pipes at a time
        self.pipes = {}
        for fd, name in ((1, "stdout"), (2, "stderr")):
            r, w = os.pipe()
            os.set_blocking(r, False)
            os.dup2(w, fd)
            os.close(w)
            self.pipes[r] = name
        import select

        self.poller = select.poll()  # one syscall tells whether a pipe holds data
        for r in self.pipes:
            self.poller.register(r, select.POLLIN)
        t = threading.Thread(target=self.loop, name="sandboxd-fd-capture", daemon=True)
        t.start()

    def loop(self):
        import select

        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        while True:
            ready, _, _ = select.select(list(self.pipes), [], [])
            self.drain(ready)

    def waiting(self):
        return bool(self.poller.poll(0))

    def drain(self, fds=None):
        with self.lock:
            for r in fds if fds is not None else list(self.pipes):
                chunks = []
                while True:
                    try:
                        chunk = os.read(r, 65536)
                    except BlockingIOError:
                        break
                    if not chunk:
                        break
                    chunks.append(chunk)
                if chunks:
                    data = b"".join(chunks)
                    self.kernel.output.add(self.pipes[r], data.decode("utf-8", "replace"))
                    if self.pipes[r] == "stdout":
                        continue
                    try:  # kept by the agent for sandboxd's report should the kernel die
                        os.write(self.spare, data[-4096:])
                    except OSError:
                        pass


def _no_input(*args, **kwargs):
    raise RuntimeError(
        "input() is not available in eval: the kernel has no stdin. "
        "Put the value in the code instead."
    )


class NoStdin(io.TextIOBase):
    """sys.stdin: reading fails at once with the input() sentence rather
    than returning an empty string that looks like real input."""

    def readable(self):
        return True

    def read(self, *args):
        _no_input()

    readline = read

    def fileno(self):
        return 0  # /dev/null, for code that hands stdin to a subprocess


class ToolError(Exception):
    """A sandboxd tool answered with is_error; the message is its text."""


class Kernel:
    def __init__(self):
        self.chan = Channel()
        self.ns = {"__name__": "__main__", "__builtins__": builtins}
        self.cell = 0
        self.calls = 0
        self.tool_lock = threading.Lock()
        self.loop = None  # made on the first top-level await (asyncio is slow to import)
        self.fds = None
        self.output = Output(self.chan)
        self.stdout = Stream(self, "stdout")
        self.stderr = Stream(self, "stderr")
        self.magics = None  # loaded with the first cell that needs a magic
        self.shown_figures = set()  # ids of the figures the running cell displayed itself
        self.full = False  # the running cell wants full bundles (bundle: "full")
        self.error_name = self.error_value = None  # the failed cell's exception, for done
        self.ns.update(display=self.display, tool=self.tool, ToolError=ToolError)
        sys.modules["__sandboxd_kernel__"] = self  # the matplotlib backend and the IPython shim find us here

    def load_magics(self):
        if self.magics is None:
            from sandboxd_magics import Magics

            self.magics = Magics(self)
            self.ns["__sandboxd__"] = self.magics
        return self.magics

    # ---- output -------------------------------------------------------

    def flush_streams(self):
        if self.fds is not None:
            self.fds.drain()
        self.output.flush()

    def send_bundle(self, bundle, main=False):
        self.flush_streams()
        msg = {"type": "display", "data": bundle}
        if main:
            msg["main"] = True
        self.chan.send(msg)

    def display(self, *objs, **kwargs):
        self.show(objs, False)

    def show(self, objs, main):
        for obj in objs:
            bundle = full_bundle(obj) if self.full else mime_bundle(obj)
            if bundle:
                self.send_bundle(bundle, main)
            fig = figure_of(obj)
            if fig is not None:
                # Shown as it is now: the figure is not sent again after
                # the cell unless it changes (stale) before then.
                fig.stale = False
                self.shown_figures.add(id(fig))

    def display_bundle(self, raw):
        """display(bundle, raw=True): a dict of mime type to data."""
        plain = raw.get("text/plain")
        if self.full:
            bundle = full_raw(raw)
        else:
            bundle = reduce_bundle(raw, plain if isinstance(plain, str) else "", not plain)
        if bundle:
            self.send_bundle(bundle)

    def emit_figures(self):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for num in list(plt.get_fignums()):
            fig = plt.figure(num)
            if id(fig) in self.shown_figures and not fig.stale:
                plt.close(fig)  # displayed in this cell already, and not changed since
                continue
            try:
                bundle = figure_bundle(fig, "<Figure %s>" % num, self.full)
            except Exception as e:  # a broken figure must not lose the cell's other output
                self.stderr.write("figure %s could not be drawn: %s\n" % (num, e))
            else:
                self.send_bundle(bundle)
            plt.close(fig)

    # ---- tool bridge --------------------------------------------------

    def tool(self, name, args=None):
        """Call one of sandboxd's tools (levels and approvals apply) and
        return its text; a tool error raises ToolError."""
        if not isinstance(name, str):
            raise TypeError("tool(name, args): name must be a tool name string such as 'read'")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise TypeError("tool(name, args): args must be a dict of the tool's arguments")
        self.flush_streams()
        with self.tool_lock:  # one exchange at a time, should user threads call tool()
            self.calls += 1
            call = self.calls
            self.chan.send({"type": "tool_call", "call": call, "name": name, "args": args})
            while True:
                msg = self.chan.recv()
                if msg.get("type") == "tool_result" and msg.get("call") == call:
                    break
        text = "\n".join(b.get("text", "") for b in msg.get("content") or [] if b.get("type") == "text")
        if msg.get("is_error"):
            raise ToolError(text)
        return text

    # ---- execution ----------------------------------------------------

    def run(self):
        import faulthandler

        spare = os.dup(2)
        faulthandler.enable(os.fdopen(spare, "w", closefd=False))
        self.fds = FdCapture(self, spare)
        import sandboxd_hooks
        import sandboxd_ipython

        sandboxd_ipython.install()
        # Exported notebooks call get_ipython().run_line_magic(...) without
        # importing it: in IPython it is a builtin.
        self.ns["get_ipython"] = sandboxd_ipython.get_ipython
        hooks = {"PIL.Image": lambda mod: patch_pil(mod, self)}
        # A real IPython (installed in the image, or by %pip) has no shell
        # here, and its display() would print reprs: it shows through ours.
        for name in ("IPython.core.display_functions", "IPython.core.display"):
            hooks[name] = sandboxd_ipython.adopt_display
        sandboxd_hooks.install(hooks)
        sys.stdout, sys.stderr = self.stdout, self.stderr
        builtins.input = _no_input
        sys.stdin = NoStdin()
        self.chan.send({"type": "hello", "language": "python", "version": sys.version.split()[0], "pid": os.getpid()})
        while True:
            try:
                msg = self.chan.recv()
            except KeyboardInterrupt:
                continue  # an interrupt that arrived after the cell ended
            except EOFError:
                return
            if msg.get("type") != "execute":
                continue
            self.chan.cell = msg.get("id")
            self.full = msg.get("bundle") == "full"
            saved = set_env(msg.get("env"))
            self.error_name = self.error_value = None
            try:
                status, error = self.execute(msg.get("code", ""))
            except KeyboardInterrupt:
                status, error = "interrupted", "KeyboardInterrupt"
                self.error_name, self.error_value = "KeyboardInterrupt", ""
            try:
                self.flush_streams()
            except KeyboardInterrupt:
                pass
            restore_env(saved)
            done = {"type": "done", "id": msg.get("id"), "status": status, "error": error,
                    "execution_count": self.cell}
            if status != "ok":
                done["ename"], done["evalue"] = self.error_name or "", self.error_value or ""
            self.chan.send(done)
            self.chan.cell = None
            self.full = False

    def execute(self, code):
        self.cell += 1
        self.shown_figures.clear()
        filename = "<cell-%d>" % self.cell
        # Code pasted from a function body or a docstring comes indented;
        # a notebook runs it as written (IPython strips the common indent).
        code = textwrap.dedent(code)
        # Tracebacks quote the cell as the user wrote it, magics and all:
        # a rewritten magic keeps its line number.
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        try:
            tree = self.parse(code, filename)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr) and not ends_with_semicolon(code):
                last = ast.Expression(tree.body.pop().value)
            flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            self.run_code(compile(tree, filename, "exec", flags=flags))
            if last is not None:
                value = self.run_code(compile(last, filename, "eval", flags=flags))
                if value is not None:
                    builtins._ = value
                    self.show((value,), True)
            self.emit_figures()
            return "ok", None
        except KeyboardInterrupt:
            self.note_error(sys.exc_info())
            self.emit_figures_quietly()
            return "interrupted", format_error(sys.exc_info(), filename)
        except BaseException:
            info = sys.exc_info()
            self.note_error(info)
            self.emit_figures_quietly()
            if isinstance(info[1], SystemExit):
                return "error", "SystemExit(%r): the kernel keeps running; use reset to restart it" % (info[1].code,)
            return "error", format_error(info, filename)

    def note_error(self, info):
        """Keeps the exception's class name and message for the done
        message (the code interpreter API reports them apart)."""
        etype, value = info[0], info[1]
        self.error_name = getattr(etype, "__name__", str(etype))
        try:
            self.error_value = str(value)
        except Exception:
            self.error_value = ""

    def parse(self, code, filename):
        """The cell's syntax tree; a cell that is not Python is tried once
        more with its magics rewritten (the user's SyntaxError stands when
        it has none)."""
        try:
            return ast.parse(code, filename, "exec")
        except SyntaxError as e:
            err = e
        rewritten = self.load_magics().rewrite(code)
        if rewritten is None:
            raise err.with_traceback(None)
        try:
            return ast.parse(rewritten, filename, "exec")
        except SyntaxError as e:
            lines = code.splitlines()
            if e.lineno and 0 < e.lineno <= len(lines) and lines[e.lineno - 1] != (e.text or "").rstrip("\n"):
                e.text, e.offset, e.end_offset = lines[e.lineno - 1] + "\n", None, None  # the user's line, not ours
            raise e.with_traceback(None)

    def emit_figures_quietly(self):
        try:
            self.emit_figures()
        except BaseException:
            pass

    def run_code(self, code):
        value = eval(code, self.ns)
        if code.co_flags & 0x80:  # CO_COROUTINE: the cell awaited at top level
            if self.loop is None:
                import asyncio

                self.loop = asyncio.new_event_loop()
            value = self.loop.run_until_complete(value)
        return value


def set_env(env):
    """Sets a cell's environment variables; returns what they replaced."""
    saved = {}
    if not isinstance(env, dict):
        return saved
    for k, v in env.items():
        if not isinstance(k, str) or not k or "=" in k or "\0" in k:
            continue
        saved[k] = os.environ.get(k)
        os.environ[k] = str(v).replace("\0", "")
    return saved


def restore_env(saved):
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def ends_with_semicolon(code):
    """True when the cell's last token (comments aside) is ';', as in IPython."""
    last = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER,
                                tokenize.INDENT, tokenize.DEDENT):
                last = tok
    except (tokenize.TokenError, SyntaxError):
        return False
    return last is not None and last.type == tokenize.OP and last.string == ";"


KERNEL_DIR = os.path.dirname(os.path.abspath(__file__))
# Frames of the machinery that runs a cell, never the user's: the kernel's
# own files, and the parser and import plumbing it goes through.
_STDLIB_PLUMBING = {"ast.py", "codeop.py", "runpy.py", "linecache.py"}


def _internal_frame(frame):
    name = frame.filename
    if name.startswith(KERNEL_DIR + os.sep) or name.startswith("<frozen importlib"):
        return True
    return os.path.basename(name) in _STDLIB_PLUMBING and os.path.dirname(name) == os.path.dirname(ast.__file__)


def format_error(info, filename):
    """The traceback as a notebook shows it: the user's frames and words,
    not the kernel's."""
    etype, value, tb = info
    if value is not None and getattr(type(value), "sandboxd_user_error", False):
        # A magic's own failure (%pip, %%bash): its sentence says it all.
        return str(value)
    te = traceback.TracebackException(etype, value, tb)
    if issubclass(etype, SyntaxError) and value is not None and value.filename == filename:
        # The cell did not parse: its line and caret, not the parser's frames.
        return "".join(te.format_exception_only()).rstrip()
    _strip(te, set())
    if not te.stack and te.__cause__ is None and (te.__context__ is None or te.__suppress_context__):
        return "".join(te.format_exception_only()).rstrip()
    return "".join(te.format()).rstrip()


def _strip(te, seen):
    """Drops the kernel's frames from te and the exceptions chained to it."""
    if te is None or id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if not _internal_frame(f)])
    _strip(te.__cause__, seen)
    _strip(te.__context__, seen)


def main():
    kernel_dir = os.path.dirname(os.path.abspath(__file__))
    if kernel_dir not in sys.path:
        sys.path.insert(0, kernel_dir)
    # The kernel dir is for our own modules only: user imports resolve from
    # the working directory first, as in a notebook.
    sys.path.insert(0, "")
    os.environ.setdefault("MPLBACKEND", "module://sandboxd_mpl")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    Kernel().run()


if __name__ == "__main__":
    main()
