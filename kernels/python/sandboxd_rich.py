"""How the eval kernel shows an object: a MIME bundle built the way IPython
builds one (_repr_mimebundle_, then the _repr_*_ methods), with special
cases for pandas, matplotlib figures and PIL images, and reduced to what
sandboxd renders: image/png, image/jpeg, text/markdown and text/plain (plus
the chart text beside a figure's PNG). Only the standard library is
imported here; pandas, matplotlib and PIL are looked at only when the user
has imported them.
"""

import base64
import io
import json
import re
import sys

DATAFRAME_ROWS = 60
# The key of the compact text sandboxd shows beside a chart's PNG, for a
# reader that cannot see images.
CHART_MIME = "text/x-sandboxd-chart"
# An SVG's source is shown as text only when it is short enough to read.
SVG_TEXT_MAX = 4096

_METHODS = (
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
)


def mime_bundle(obj):
    """A bundle for obj as a notebook would show it, or None for None."""
    df = dataframe_bundle(obj)
    if df is not None:
        return df
    fig = figure_of(obj)
    if fig is not None:
        return figure_bundle(fig, "<%s>" % type(obj).__name__)
    pil = pil_bundle(obj)
    if pil is not None:
        return pil
    raw = {}
    if not isinstance(obj, type):
        raw = _repr_mimebundle(obj)
        for attr, mime in _METHODS:
            if mime in raw:
                continue
            if mime == "image/jpeg" and "image/png" in raw:
                continue  # one image is shown; do not encode it twice
            data = _call_repr(obj, attr)
            if data is not None:
                raw[mime] = data
    plain = _plain(obj)
    return reduce_bundle(raw, plain, _default_repr(obj, plain))


def reduce_bundle(raw, plain, plain_is_default):
    """The parts of raw that sandboxd shows, as strings; when the plain repr
    says nothing (object.__repr__), the richest text stands in for it."""
    out = {}
    for mime in ("image/png", "image/jpeg"):
        data = raw.get(mime)
        if isinstance(data, str):
            # Jupyter's bundles carry binary data as base64 text, which
            # IPython wraps in lines (IPython 8's Image ends with "\n").
            packed = "".join(data.split())
            if _is_base64(packed):
                out[mime] = packed
                continue
            data = data.encode("latin-1", "replace")
        if isinstance(data, (bytes, bytearray)) and data:
            out[mime] = base64.b64encode(bytes(data)).decode("ascii")
    md = raw.get("text/markdown")
    if isinstance(md, str) and md:
        out["text/markdown"] = md
    text = raw.get("text/plain") if isinstance(raw.get("text/plain"), str) else plain
    if plain_is_default or not text:
        alt = _alternative_text(raw)
        if alt:
            text = alt
    if text:
        out["text/plain"] = text
    return out


def _alternative_text(raw):
    for mime in ("text/latex", "text/html"):
        v = raw.get(mime)
        if isinstance(v, str) and v.strip():
            return v
    if "application/json" in raw:
        try:
            return json.dumps(raw["application/json"], indent=2, ensure_ascii=False, default=str)
        except Exception:
            pass
    svg = raw.get("image/svg+xml")
    if isinstance(svg, bytes):
        svg = svg.decode("utf-8", "replace")
    if isinstance(svg, str) and svg:
        if len(svg) <= SVG_TEXT_MAX:
            return svg
        return "<SVG image, %d characters; shown as an image only where PNG or JPEG is offered>" % len(svg)
    return None


def _repr_mimebundle(obj):
    fn = getattr(obj, "_repr_mimebundle_", None)
    if not callable(fn):
        return {}
    try:
        data = fn(include=None, exclude=None)
    except TypeError:
        try:
            data = fn()
        except Exception:
            return {}
    except Exception:
        return {}
    if isinstance(data, tuple):
        data = data[0]
    return dict(data) if isinstance(data, dict) else {}


def _call_repr(obj, attr):
    fn = getattr(obj, attr, None)
    if not callable(fn):
        return None
    try:
        data = fn()
    except Exception:
        return None
    if isinstance(data, tuple):  # (data, metadata)
        data = data[0] if data else None
    return data


def _plain(obj):
    try:
        return repr(obj)
    except Exception as e:
        return "<%s object: repr failed: %s>" % (type(obj).__name__, e)


# What object.__repr__ and IPython's display objects say: nothing about the value.
_DEFAULT_REPR = re.compile(r"^<[\w.]+ object( at 0x[0-9a-fA-F]+)?>$")


def _default_repr(obj, plain):
    return type(obj).__repr__ is object.__repr__ or bool(_DEFAULT_REPR.match(plain))


def _is_base64(s):
    try:
        base64.b64decode(s, validate=True)
        return True
    except Exception:
        return False


# ---- pandas ----------------------------------------------------------------


def dataframe_bundle(obj):
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


# ---- matplotlib --------------------------------------------------------------


def figure_of(obj):
    """The matplotlib Figure obj is or belongs to (an Axes is shown as its figure)."""
    mod = sys.modules.get("matplotlib.figure")
    fig_type = getattr(mod, "Figure", None) if mod else None
    if fig_type is None:
        return None
    if isinstance(obj, fig_type):
        return obj
    return None


def figure_bundle(fig, plain, full=False):
    """A figure's PNG and, beside it, what it shows as text; with full, its
    repr as text and its chart as data too (the code interpreter API)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    bundle = {"text/plain": plain, "image/png": base64.b64encode(buf.getvalue()).decode("ascii")}
    if full:
        bundle["text/plain"] = _plain(fig)
        try:
            from sandboxd_bundle import CHART_DATA_MIME, json_text
            from sandboxd_chartdata import chart_data

            bundle[CHART_DATA_MIME] = json_text(chart_data(fig))
        except Exception:  # the picture matters more than its data
            pass
        return bundle
    try:
        from sandboxd_chart import describe

        text = describe(fig)
    except Exception as e:  # the picture matters more than its summary
        text = "[chart: could not be described: %s]" % e
    if text:
        bundle[CHART_MIME] = text
    return bundle


# ---- PIL ---------------------------------------------------------------------


def pil_bundle(obj):
    mod = sys.modules.get("PIL.Image")
    img_type = getattr(mod, "Image", None) if mod else None
    if img_type is None or not isinstance(obj, img_type):
        return None
    return {"text/plain": _plain(obj), "image/png": base64.b64encode(pil_png(obj)).decode("ascii")}


def pil_png(img):
    """img as PNG bytes; modes PNG cannot hold (CMYK, float, ...) are converted."""
    buf = io.BytesIO()
    try:
        img.save(buf, format="PNG")
    except (OSError, ValueError, KeyError):
        buf = io.BytesIO()
        conv = img.convert("RGBA" if "A" in img.getbands() else "RGB")
        conv.save(buf, format="PNG")
    return buf.getvalue()


def patch_pil(module, kernel):
    """Image.show() opens a viewer on a desktop; in a cell it shows the
    image in the cell's output."""
    img_type = getattr(module, "Image", None)
    if img_type is None or getattr(img_type.show, "__sandboxd__", False):
        return

    def show(self, title=None, **kwargs):
        kernel.display(self)

    show.__sandboxd__ = True
    show.__doc__ = img_type.show.__doc__
    img_type.show = show
