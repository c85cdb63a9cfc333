"""sandboxd's Python kernel: a persistent namespace driven over fds 3 and 4.

The protocol is newline-delimited JSON. sandboxd writes requests on fd 3
({"type": "execute", "id", "code"} and {"type": "tool_result", "call", ...});
the kernel writes on fd 4: stream, display, tool_call and done messages, in
the order the cell produced them. stdin is /dev/null; an interrupt is a
SIGINT sent to this process, which raises KeyboardInterrupt in the cell and
keeps the namespace. Only the standard library is used.
"""

import ast
import base64
import builtins
import io
import json
import linecache
import os
import signal
import sys
import textwrap
import threading
import tokenize
import traceback

PROTO_IN = 3
PROTO_OUT = 4
STREAM_CHUNK = 8192
DATAFRAME_ROWS = 60


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
        self.lock = threading.Lock()  # guards parts and size

    def add(self, name, text):
        with self.lock:
            if self.parts and self.parts[-1][0] == name:
                self.parts[-1][1].append(text)
            else:
                self.parts.append([name, [text]])
            self.size += len(text)
            full = self.size >= STREAM_CHUNK
        if full:
            self.flush()

    def flush(self):
        with self.lock:
            parts, self.parts, self.size = self.parts, [], 0
        for name, texts in parts:
            self.chan.send({"type": "stream", "name": name, "text": "".join(texts)})


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
        self.ns.update(display=self.display, tool=self.tool, ToolError=ToolError)
        sys.modules["__sandboxd_kernel__"] = self  # the matplotlib backend finds us here

    # ---- output -------------------------------------------------------

    def flush_streams(self):
        if self.fds is not None:
            self.fds.drain()
        self.output.flush()

    def send_bundle(self, bundle):
        self.flush_streams()
        self.chan.send({"type": "display", "data": bundle})

    def display(self, *objs, **kwargs):
        for obj in objs:
            bundle = mime_bundle(obj)
            if bundle:
                self.send_bundle(bundle)

    def emit_figures(self):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for num in list(plt.get_fignums()):
            fig = plt.figure(num)
            buf = io.BytesIO()
            try:
                fig.savefig(buf, format="png", bbox_inches="tight")
            except Exception as e:  # a broken figure must not lose the cell's other output
                self.stderr.write("figure %s could not be drawn: %s\n" % (num, e))
            else:
                self.send_bundle({
                    "text/plain": "<Figure %s>" % num,
                    "image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                })
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
            try:
                status, error = self.execute(msg.get("code", ""))
            except KeyboardInterrupt:
                status, error = "interrupted", "KeyboardInterrupt"
            try:
                self.flush_streams()
            except KeyboardInterrupt:
                pass
            self.chan.send({"type": "done", "id": msg.get("id"), "status": status, "error": error})
            self.chan.cell = None

    def execute(self, code):
        self.cell += 1
        filename = "<cell-%d>" % self.cell
        # Code pasted from a function body or a docstring comes indented;
        # a notebook runs it as written (IPython strips the common indent).
        code = textwrap.dedent(code)
        try:
            try:
                tree = ast.parse(code, filename, "exec")
            except SyntaxError:
                if self.magics is None:
                    from sandboxd_magics import Magics

                    self.magics = Magics(self)
                    self.ns["__sandboxd__"] = self.magics
                rewritten = self.magics.rewrite(code)
                if rewritten is None:
                    raise
                code = rewritten
                tree = ast.parse(code, filename, "exec")
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr) and not ends_with_semicolon(code):
                last = ast.Expression(tree.body.pop().value)
            flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            self.run_code(compile(tree, filename, "exec", flags=flags))
            if last is not None:
                value = self.run_code(compile(last, filename, "eval", flags=flags))
                if value is not None:
                    builtins._ = value
                    self.display(value)
            self.emit_figures()
            return "ok", None
        except KeyboardInterrupt:
            self.emit_figures_quietly()
            return "interrupted", format_error(sys.exc_info(), filename)
        except BaseException:
            info = sys.exc_info()
            self.emit_figures_quietly()
            if isinstance(info[1], SystemExit):
                return "error", "SystemExit(%r): the kernel keeps running; use reset to restart it" % (info[1].code,)
            return "error", format_error(info, filename)

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


def format_error(info, filename):
    """The traceback as a notebook shows it: the user's frames, not ours."""
    etype, value, tb = info
    te = traceback.TracebackException(etype, value, tb)
    if issubclass(etype, SyntaxError) and value is not None and value.filename == filename:
        # The cell did not parse: its line and caret, not the parser's frames.
        return "".join(te.format_exception_only()).rstrip()
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if not f.filename.startswith(KERNEL_DIR + os.sep)])
    if not te.stack:
        return "".join(te.format_exception_only()).rstrip()
    return "".join(te.format()).rstrip()


def mime_bundle(obj):
    """A MIME bundle for obj, the way a notebook would show it."""
    bundle = {}
    df = dataframe_text(obj)
    if df is not None:
        return df
    for attr, mime in (("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg")):
        fn = getattr(obj, attr, None)
        if callable(fn) and not isinstance(obj, type):
            try:
                data = fn()
            except Exception:
                data = None
            if isinstance(data, tuple):
                data = data[0]
            if isinstance(data, str):
                data = data.encode("latin-1", "replace")
            if data:
                bundle[mime] = base64.b64encode(data).decode("ascii")
    fn = getattr(obj, "_repr_markdown_", None)
    if callable(fn) and not isinstance(obj, type):
        try:
            md = fn()
        except Exception:
            md = None
        if isinstance(md, tuple):
            md = md[0]
        if md:
            bundle["text/markdown"] = md
    fig_type = _figure_type()
    if fig_type is not None and isinstance(obj, fig_type):
        buf = io.BytesIO()
        obj.savefig(buf, format="png", bbox_inches="tight")
        bundle["image/png"] = base64.b64encode(buf.getvalue()).decode("ascii")
    try:
        bundle["text/plain"] = repr(obj)
    except Exception as e:
        bundle["text/plain"] = "<%s object: repr failed: %s>" % (type(obj).__name__, e)
    return bundle


def _figure_type():
    fig = sys.modules.get("matplotlib.figure")
    return getattr(fig, "Figure", None) if fig else None


def dataframe_text(obj):
    pd = sys.modules.get("pandas")
    if pd is None:
        return None
    if isinstance(obj, pd.Series):
        obj = obj.to_frame()
    if not isinstance(obj, pd.DataFrame):
        return None
    rows = len(obj)
    shown = obj if rows <= DATAFRAME_ROWS else obj.head(DATAFRAME_ROWS)
    note = "" if rows <= DATAFRAME_ROWS else "\n\n[%d rows x %d columns; first %d shown]" % (rows, obj.shape[1], DATAFRAME_ROWS)
    bundle = {"text/plain": shown.to_string() + note}
    try:
        bundle["text/markdown"] = shown.to_markdown() + note
    except ImportError:  # no tabulate: a plain markdown table of our own
        bundle["text/markdown"] = markdown_table(shown) + note
    return bundle


def markdown_table(df):
    def cell(v):
        return str(v).replace("|", "\\|").replace("\n", " ")

    names = [cell(df.index.name or "")] + [cell(c) for c in df.columns]
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for idx, row in zip(df.index, df.itertuples(index=False, name=None)):
        lines.append("| " + " | ".join([cell(idx)] + [cell(v) for v in row]) + " |")
    return "\n".join(lines)


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
