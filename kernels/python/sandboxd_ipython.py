"""A small stand-in for IPython, for notebook code typed by reflex
(`from IPython.display import display, Markdown`), used only where IPython
is not installed: the finder goes last on sys.meta_path, so a real IPython
(installed before or with %pip later) always wins.

It provides the packages IPython, IPython.display, IPython.core,
IPython.core.display, IPython.core.getipython and IPython.core.pylabtools
(matplotlib looks there once get_ipython() answers). Display objects map
onto the eval kernel's display(); get_ipython() returns a shell whose
common attributes run the kernel's magics or do nothing harmful.
"""

import importlib.abc
import importlib.machinery
import json as _json
import os
import sys

__version__ = "8.0.0+sandboxd.shim"
version_info = (8, 0, 0, "sandboxd-shim")


def _kernel():
    return sys.modules.get("__sandboxd_kernel__")


# ---- display -------------------------------------------------------------


def display(*objs, include=None, exclude=None, metadata=None, transient=None, display_id=None,
            raw=False, clear=False, **kwargs):
    """Show each object in the cell's output, as IPython's display() does.
    With raw=True each object is a MIME bundle (a dict of mime type to data)."""
    k = _kernel()
    if k is not None:
        for obj in objs:
            if raw and isinstance(obj, dict):
                k.display_bundle(obj)
            else:
                k.display(obj)
    if display_id is not None:
        return DisplayHandle(display_id)
    return None


def update_display(obj, display_id=None, **kwargs):
    """Shows obj again: eval's output is a transcript, not a live page."""
    display(obj)


def clear_output(wait=False):
    """Does nothing: a cell's output is never cleared in eval."""


class DisplayHandle:
    def __init__(self, display_id=None):
        self.display_id = display_id

    def display(self, obj, **kwargs):
        display(obj)

    def update(self, obj, **kwargs):
        display(obj)


def _raw_display(mime, wrap):
    def show(*objs, raw=False, metadata=None, **kwargs):
        for obj in objs:
            if raw:
                display({mime: obj, "text/plain": obj if isinstance(obj, str) else ""}, raw=True)
            else:
                display(wrap(obj) if wrap is not None and isinstance(obj, (str, bytes)) else obj)

    return show


class DisplayObject:
    """An object shown through one of its _repr_*_ methods."""

    def __init__(self, data=None, url=None, filename=None, metadata=None):
        if data is not None and isinstance(data, str) and filename is None and url is None:
            if data.startswith(("http://", "https://")):
                url, data = data, None
            elif _is_file(data):
                filename, data = data, None
        self.data = data
        self.url = url
        self.filename = filename
        self.metadata = metadata
        if filename is not None:
            self.reload()

    def reload(self):
        if self.filename is not None:
            mode = "rb" if self._binary else "r"
            with open(self.filename, mode) as f:
                self.data = f.read()

    _binary = False

    def _text(self):
        if self.data is None and self.url is not None:
            return "<%s from %s: eval does not fetch URLs; download it and pass the data or a file name>" % (
                type(self).__name__, self.url)
        if isinstance(self.data, bytes):
            return self.data.decode("utf-8", "replace")
        return "" if self.data is None else str(self.data)


def _is_file(s):
    try:
        return len(s) < 4096 and "\n" not in s and os.path.isfile(s)
    except (OSError, ValueError):
        return False


class TextDisplayObject(DisplayObject):
    pass


class Markdown(TextDisplayObject):
    def _repr_markdown_(self):
        return self._text()


class HTML(TextDisplayObject):
    def __init__(self, data=None, url=None, filename=None, metadata=None):
        super().__init__(data, url, filename, metadata)

    def _repr_html_(self):
        return self._text()

    def __html__(self):
        return self._text()


class Latex(TextDisplayObject):
    def _repr_latex_(self):
        return self._text()


class Math(TextDisplayObject):
    def _repr_latex_(self):
        s = self._text().strip().strip("$")
        return "$$%s$$" % s


class Pretty(TextDisplayObject):
    def __repr__(self):
        return self._text()


class Code(TextDisplayObject):
    def __init__(self, data=None, url=None, filename=None, language=None):
        self.language = language
        super().__init__(data, url, filename)
        if language is None and self.filename:
            self.language = os.path.splitext(self.filename)[1].lstrip(".") or None

    def _repr_markdown_(self):
        return "```%s\n%s\n```" % (self.language or "", self._text().rstrip("\n"))


class Javascript(TextDisplayObject):
    def __repr__(self):
        return "<Javascript, not run in eval>\n" + self._text()


class SVG(DisplayObject):
    def _repr_svg_(self):
        return self._text()


class JSON(DisplayObject):
    def __init__(self, data=None, url=None, filename=None, expanded=False, metadata=None, root="root", **kwargs):
        if isinstance(data, (dict, list)):
            super().__init__(None, url, filename, metadata)
            self.data = data
        else:
            super().__init__(data, url, filename, metadata)
            if isinstance(self.data, (str, bytes)) and self.data:
                self.data = _json.loads(self.data)

    def _repr_json_(self):
        return self.data


_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8"


class Image(DisplayObject):
    """An image from bytes or a file name (PNG or JPEG; other formats are
    converted to PNG where PIL is installed)."""

    _binary = True

    def __init__(self, data=None, url=None, filename=None, format=None, embed=None, width=None, height=None,
                 retina=False, unconfined=False, metadata=None, alt=None):
        if isinstance(data, (bytes, bytearray)):
            super().__init__(None, url, filename, metadata)
            self.data = bytes(data)
        else:
            super().__init__(data, url, filename, metadata)
        self.format = (format or "").lower().replace("jpg", "jpeg")
        self.width, self.height, self.alt = width, height, alt

    def _kind(self):
        d = self.data
        if not isinstance(d, bytes):
            return None
        if d.startswith(_PNG):
            return "png"
        if d.startswith(_JPEG):
            return "jpeg"
        return self.format or "other"

    def _converted(self):
        try:
            import io
            from PIL import Image as PILImage
            from sandboxd_rich import pil_png

            return pil_png(PILImage.open(io.BytesIO(self.data)))
        except Exception:
            return None

    def _repr_png_(self):
        kind = self._kind()
        if kind == "png":
            return self.data
        if kind not in (None, "jpeg"):
            return self._converted()
        return None

    def _repr_jpeg_(self):
        return self.data if self._kind() == "jpeg" else None

    def __repr__(self):
        if self.data is None:
            return self._text() or "<Image: no data>"
        return "<Image: %s, %d bytes>" % (self._kind(), len(self.data))


class Audio(DisplayObject):
    _binary = True

    def __init__(self, data=None, filename=None, url=None, embed=None, rate=None, autoplay=False, **kwargs):
        super().__init__(data if not isinstance(data, (list, tuple)) else None, url, filename)

    def __repr__(self):
        return "<Audio: eval cannot play sound; save it to a file instead>"


class Video(Audio):
    def __repr__(self):
        return "<Video: eval cannot play video; save it to a file instead>"


class FileLink:
    def __init__(self, path, url_prefix="", result_html_prefix="", result_html_suffix="<br>"):
        self.path = path

    def __repr__(self):
        return os.path.abspath(self.path)


class FileLinks(FileLink):
    def __repr__(self):
        root = self.path
        return "\n".join(os.path.join(root, n) for n in sorted(os.listdir(root)))


class IFrame:
    def __init__(self, src, width, height, **kwargs):
        self.src = src

    def __repr__(self):
        return "<IFrame of %s: eval shows no pages>" % self.src


display_markdown = _raw_display("text/markdown", Markdown)
display_html = _raw_display("text/html", HTML)
display_latex = _raw_display("text/latex", Latex)
display_json = _raw_display("application/json", None)
display_svg = _raw_display("image/svg+xml", SVG)
display_png = _raw_display("image/png", Image)
display_jpeg = _raw_display("image/jpeg", Image)
display_pretty = _raw_display("text/plain", Pretty)
display_javascript = _raw_display("application/javascript", Javascript)


def set_matplotlib_formats(*formats, **kwargs):
    """Does nothing: eval always sends figures as PNG."""


# ---- get_ipython -----------------------------------------------------------


class _Events:
    def __init__(self):
        self.callbacks = {}

    def register(self, event, fn):
        """Kept, never called: eval has no pre/post-run events."""
        self.callbacks.setdefault(event, []).append(fn)

    def unregister(self, event, fn):
        fns = self.callbacks.get(event, [])
        if fn in fns:
            fns.remove(fn)


class InteractiveShell:
    """What get_ipython() returns: the magics run through eval's own, the
    rest does nothing. It is not a Jupyter kernel (config has no
    IPKernelApp), so libraries pick their plain-terminal output."""

    def __init__(self):
        self.events = _Events()
        self.config = {}
        self.kernel = None
        self.display_pub = None

    @property
    def user_ns(self):
        k = _kernel()
        return k.ns if k is not None else {}

    user_global_ns = user_ns

    def _magics(self):
        k = _kernel()
        if k is None:
            raise RuntimeError("get_ipython(): not running in the eval kernel")
        return k.load_magics()

    def run_line_magic(self, magic_name, line, _stack_depth=1):
        return self._run_magic("%" + magic_name + (" " + line if line else ""))

    def run_cell_magic(self, magic_name, line, cell):
        return self._run_magic("%%" + magic_name + (" " + line if line else "") + "\n" + cell)

    def magic(self, arg_s):
        return self._run_magic("%" + arg_s.lstrip("%"))

    def _run_magic(self, text):
        code = self._magics().rewrite(text)
        if code is None:
            raise ValueError("%r is not a magic" % text)
        ns = self.user_ns
        try:
            compiled = compile(code.strip(), "<magic>", "eval")
        except SyntaxError:
            exec(compile(code, "<magic>", "exec"), ns)
            return None
        return eval(compiled, ns)

    def system(self, cmd):
        self._magics().system(cmd)

    system_raw = system

    def getoutput(self, cmd, split=True):
        out = self._magics().getoutput(cmd)
        return out if split else "\n".join(out)

    def push(self, variables, interactive=True):
        if isinstance(variables, dict):
            self.user_ns.update(variables)

    def ev(self, expr):
        return eval(expr, self.user_ns)

    def ex(self, cmd):
        exec(cmd, self.user_ns)

    def enable_gui(self, gui=None):
        pass

    def enable_matplotlib(self, gui=None):
        return (gui, "module://sandboxd_mpl")

    def set_next_input(self, text, replace=False):
        pass

    def register_magic_function(self, func, magic_kind="line", magic_name=None):
        pass


_shell = None


def get_ipython():
    global _shell  # one shell per kernel process, as IPython has
    if _shell is None:
        _shell = InteractiveShell()
    return _shell


# ---- the modules -------------------------------------------------------------

_DISPLAY_NAMES = [
    "display", "update_display", "clear_output", "DisplayHandle", "DisplayObject", "TextDisplayObject",
    "Markdown", "HTML", "Latex", "Math", "Pretty", "Code", "Javascript", "SVG", "JSON", "Image", "Audio",
    "Video", "FileLink", "FileLinks", "IFrame", "display_markdown", "display_html", "display_latex",
    "display_json", "display_svg", "display_png", "display_jpeg", "display_pretty", "display_javascript",
    "set_matplotlib_formats",
]

# module name -> (is a package, {attribute: source name in this module})
_MODULES = {
    # IPython.display is the module, as in IPython: `from IPython import
    # display; display.clear_output(); display.display(x)` is common.
    "IPython": (True, dict({n: n for n in ("get_ipython", "InteractiveShell")},
                           __version__="__version__", version_info="version_info")),
    "IPython.display": (False, {n: n for n in _DISPLAY_NAMES}),
    "IPython.core": (True, {}),
    "IPython.core.display": (False, {n: n for n in _DISPLAY_NAMES}),
    "IPython.core.display_functions": (False, {n: n for n in ("display", "update_display", "clear_output", "DisplayHandle")}),
    "IPython.core.getipython": (False, {"get_ipython": "get_ipython"}),
    "IPython.core.interactiveshell": (False, {"InteractiveShell": "InteractiveShell"}),
    "IPython.core.pylabtools": (False, {}),
}


class ShimFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the shim's modules; installed last on sys.meta_path."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _MODULES:
            return None
        is_pkg = _MODULES[fullname][0]
        spec = importlib.machinery.ModuleSpec(fullname, self, is_package=is_pkg)
        if is_pkg:
            spec.submodule_search_locations = []
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        own = sys.modules[__name__]
        _, names = _MODULES[module.__name__]
        for attr, src in names.items():
            setattr(module, attr, getattr(own, src))
        module.__doc__ = "eval's stand-in for IPython (not installed here): display and get_ipython only."
        if module.__name__ == "IPython.core.pylabtools":
            module.backend2gui = {}
        module.__sandboxd_shim__ = True
        if module.__name__ == "IPython":
            # `import IPython; IPython.display.display(x)` works in IPython.
            import importlib

            module.display = importlib.import_module("IPython.display")


# Reprs and tracebacks name the classes where IPython has them.
for _name in _DISPLAY_NAMES:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = "IPython.core.display"
InteractiveShell.__module__ = "IPython.core.interactiveshell"


def adopt_display(module):
    """Points a real IPython module's display() at the kernel's, and makes
    its clear_output() a no-op (it would print terminal escapes)."""
    if getattr(module, "__sandboxd_shim__", False):
        return
    for name, fn in (("display", display), ("clear_output", clear_output), ("update_display", update_display)):
        if getattr(module, name, None) is not None:
            setattr(module, name, fn)


def install():
    """Adds the finder last, once."""
    if not any(isinstance(f, ShimFinder) for f in sys.meta_path):
        sys.meta_path.append(ShimFinder())
