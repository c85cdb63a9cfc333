"""IPython idioms typed by reflex, rewritten to plain Python.

A cell is rewritten only when it does not parse as Python, and only lines
that start with '%' or '!' (after indentation) are touched, so valid code is
never changed. Each magic becomes a call on the kernel's __sandboxd__ object.
"""

import importlib
import os
import re
import subprocess
import sys
import time
import timeit

SUPPORTED = "%pip, %cd, !cmd, x = !cmd, %%bash, %%sh, %time, %%time, %timeit, %%timeit, %env, %%writefile, %matplotlib inline"

_ASSIGN_SHELL = re.compile(r"^(\s*)([A-Za-z_][\w.,\s\[\]]*?)\s*=\s*!(.*)$")
_LINE_MAGIC = re.compile(r"^(\s*)%(\w+)\s*(.*)$")
_SHELL = re.compile(r"^(\s*)!(.*)$")


class MagicError(Exception):
    """A magic failed as the user would put it: the kernel shows the message
    alone, without a traceback or this class's name."""

    sandboxd_user_error = True


class Magics:
    def __init__(self, kernel):
        self.kernel = kernel

    # ---- rewriting ----------------------------------------------------

    def rewrite(self, code):
        """Plain Python for a cell with magics, or None when it has none."""
        lines = code.split("\n")
        first = lines[0].strip() if lines else ""
        if first.startswith("%%"):
            parts = first[2:].split(None, 1)
            name = parts[0] if parts else ""
            arg = parts[1] if len(parts) > 1 else ""
            body = "\n".join(lines[1:])
            if name in ("bash", "sh"):
                return "__sandboxd__.bash(%r)" % body
            if name == "timeit":
                return "__sandboxd__.timeit(%r, %r)" % (body, arg)
            if name == "time":
                return "__sandboxd__.time(%r)" % body
            if name == "writefile":
                return "__sandboxd__.writefile(%r, %r)" % (arg, body)
            return "__sandboxd__.unknown(%r)" % ("%%" + name)
        changed = False
        out = []
        for line in lines:
            new = self.rewrite_line(line)
            if new is not None:
                changed = True
                line = new
            out.append(line)
        return "\n".join(out) if changed else None

    def rewrite_line(self, line):
        m = _ASSIGN_SHELL.match(line)
        if m and not m.group(2).strip().endswith(("=", "!", "<", ">")):
            return "%s%s = __sandboxd__.getoutput(%s)" % (m.group(1), m.group(2).strip(), self.expand(m.group(3)))
        m = _SHELL.match(line)
        if m:
            return "%s__sandboxd__.system(%s)" % (m.group(1), self.expand(m.group(2)))
        m = _LINE_MAGIC.match(line)
        if not m:
            return None
        indent, name, arg = m.group(1), m.group(2), m.group(3).strip()
        if name == "pip":
            return "%s__sandboxd__.pip(%s)" % (indent, self.expand(arg))
        if name == "cd":
            return "%s__sandboxd__.cd(%s)" % (indent, self.expand(arg))
        if name == "env":
            return "%s__sandboxd__.env(%r)" % (indent, arg)
        if name == "time":
            return "%s__sandboxd__.time(%r, True)" % (indent, arg)
        if name == "timeit":
            return "%s__sandboxd__.timeit(%r, '')" % (indent, arg)
        if name == "matplotlib":
            return indent + "pass"
        return "%s__sandboxd__.unknown(%r)" % (indent, "%" + name)

    @staticmethod
    def expand(text):
        """An f-string-like expression: {expr} and $name take values from the
        namespace, as IPython does in shell lines."""
        text = re.sub(r"\$([A-Za-z_]\w*)", r"{\1}", text)
        return "f" + repr(text)

    # ---- the magics ---------------------------------------------------

    def unknown(self, name):
        raise MagicError("%s is not a magic eval knows; use one of %s, or write plain Python" % (name, SUPPORTED))

    def _run(self, cmd, capture=False):
        self.kernel.flush_streams()
        proc = subprocess.run(cmd, shell=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT if capture else subprocess.PIPE,
                              cwd=os.getcwd(), executable="/bin/bash" if os.path.exists("/bin/bash") else None)
        out = proc.stdout.decode("utf-8", "replace")
        if capture:
            return proc.returncode, out
        sys.stdout.write(out)
        if proc.stderr:
            sys.stderr.write(proc.stderr.decode("utf-8", "replace"))
        return proc.returncode, out

    def system(self, cmd):
        code, _ = self._run(cmd)
        if code != 0:
            sys.stderr.write("[exit status %d]\n" % code)

    def getoutput(self, cmd):
        _, out = self._run(cmd, capture=True)
        return out.splitlines()

    def bash(self, body):
        code, _ = self._run(body)
        if code != 0:
            raise MagicError("%%%%bash: the cell exited with status %d" % code)

    def cd(self, path):
        path = os.path.expanduser(path.strip().strip("'\"") or "~")
        os.chdir(path)
        print(os.getcwd())

    def env(self, arg):
        if not arg:
            for k in sorted(os.environ):
                print("%s=%s" % (k, os.environ[k]))
            return
        if "=" in arg:
            k, v = arg.split("=", 1)
        else:
            parts = arg.split(None, 1)
            if len(parts) == 1:
                return os.environ.get(parts[0])
            k, v = parts
        os.environ[k.strip()] = v.strip()
        print("env: %s=%s" % (k.strip(), v.strip()))

    def writefile(self, arg, body):
        parts = arg.split()
        append = "-a" in parts or "--append" in parts
        names = [p for p in parts if not p.startswith("-")]
        if len(names) != 1:
            raise MagicError("%%writefile: give one file name, such as %%writefile script.py")
        with open(names[0], "a" if append else "w") as f:
            f.write(body if body.endswith("\n") else body + "\n")
        print("%s %s" % ("Appending to" if append else "Writing", names[0]))

    def time(self, code, line=False):
        ns = self.kernel.ns
        start, cpu = time.perf_counter(), time.process_time()
        try:
            if line:
                try:
                    compiled = compile(code, "<time>", "eval")
                except SyntaxError:
                    exec(compile(code, "<time>", "exec"), ns)
                    return None
                return eval(compiled, ns)
            exec(compile(code, "<time>", "exec"), ns)
        finally:
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            print("CPU times: %s\nWall time: %s" % (_fmt(cpu), _fmt(wall)))

    def timeit(self, code, setup_line):
        setup = "pass"
        if setup_line:
            setup = setup_line  # %%timeit's first line is setup code
        timer = timeit.Timer(code, setup=setup, globals=self.kernel.ns)
        number, _ = timer.autorange()
        runs = [t / number for t in timer.repeat(repeat=5, number=number)]
        mean = sum(runs) / len(runs)
        sd = (sum((r - mean) ** 2 for r in runs) / len(runs)) ** 0.5
        print("%s ± %s per loop (mean ± std. dev. of %d runs, %d loops each)" % (_fmt(mean), _fmt(sd), len(runs), number))

    def pip(self, args):
        """Run pip for this interpreter, then make the next import see what changed."""
        before = _distributions()
        env = dict(os.environ)
        # Debian's python refuses pip into the system site-packages (PEP 668);
        # a kernel in a throwaway sandbox is exactly where that is wanted.
        env.setdefault("PIP_BREAK_SYSTEM_PACKAGES", "1")
        env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        self.kernel.flush_streams()
        proc = subprocess.run([sys.executable, "-m", "pip"] + _split(args), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        sys.stdout.write(proc.stdout.decode("utf-8", "replace"))
        importlib.invalidate_caches()
        after = _distributions()
        touched = {name for name in set(before) | set(after) if before.get(name) != after.get(name)}
        if "install" in args or "uninstall" in args:
            touched |= {_norm(a) for a in _split(args) if not a.startswith("-")}
        purged = _purge(touched, after, before)
        if purged:
            print("(reloaded on next import: %s)" % ", ".join(sorted(purged)))
        if proc.returncode != 0:
            words = _split(args)
            what = "%pip " + words[0] if words else "%pip"
            raise MagicError("%s failed: pip exited with status %d; see its output above" % (what, proc.returncode))


def _fmt(seconds):
    for unit, scale in (("s", 1), ("ms", 1e3), ("µs", 1e6), ("ns", 1e9)):
        if seconds * scale >= 1 or unit == "ns":
            return "%.3g %s" % (seconds * scale, unit)


def _split(args):
    import shlex

    return shlex.split(args)


def _norm(name):
    return re.split(r"[<>=!~\[ ]", name, 1)[0].replace("-", "_").lower()


def _distributions():
    """{normalized name: (version, top-level modules)} of the installed distributions."""
    import importlib.metadata as md

    out = {}
    for dist in md.distributions():
        name = dist.metadata.get("Name")
        if not name:
            continue
        tops = set()
        txt = dist.read_text("top_level.txt")
        if txt:
            tops |= {t.strip() for t in txt.split() if t.strip()}
        for f in dist.files or []:
            first = str(f).split("/", 1)[0]
            if first.endswith(".py"):
                tops.add(first[:-3])
            elif "." not in first and first != "__pycache__":
                tops.add(first)
        out[_norm(name)] = (dist.version, frozenset(tops))
    return out


def _purge(names, after, before):
    """Drop the modules of the named distributions from sys.modules."""
    tops = set()
    for n in names:
        for table in (after, before):
            if n in table:
                tops |= table[n][1]
        tops.add(n)
    purged = set()
    for mod in list(sys.modules):
        root = mod.split(".", 1)[0]
        if root in tops and not mod.startswith("sandboxd_"):
            del sys.modules[mod]
            purged.add(root)
    return purged
