"""Full MIME bundles, for cells run through the code interpreter API
(bundle: "full"): every representation an object offers, as IPython's
display formatter collects them, rather than the few the eval tool shows.
Binary data is base64 text; JSON-valued types (application/json, a
DataFrame's data, a figure's chart data) are JSON text that sandboxd
decodes. Only the standard library is imported here.
"""

import base64
import datetime
import json
import math
import sys

from sandboxd_rich import _METHODS, _call_repr, _plain, _repr_mimebundle, dataframe_bundle, figure_bundle, figure_of, pil_bundle

# The DataFrame's columns as lists, as E2B's code interpreter returns them.
DATA_MIME = "application/vnd.sandboxd.data+json"
# The figure's chart as data (type, axes, series).
CHART_DATA_MIME = "application/vnd.sandboxd.chart+json"
JSON_MIME = "application/json"
# A DataFrame's data is sent whole up to this many cells (rows x columns);
# a bigger one is sent without it, and says so in its text.
DATA_MAX_CELLS = 200000
BINARY = ("image/png", "image/jpeg", "application/pdf")


def full_bundle(obj):
    """Every representation of obj, as strings, or None for nothing."""
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(obj, (pd.DataFrame, pd.Series)):
        return dataframe_full(obj, pd)
    fig = figure_of(obj)
    if fig is not None:
        return figure_bundle(fig, _plain(obj), True)
    pil = pil_bundle(obj)
    if pil is not None:
        return pil
    raw = {}
    if not isinstance(obj, type):
        raw = _repr_mimebundle(obj)
        for attr, mime in _METHODS:
            if mime not in raw:
                data = _call_repr(obj, attr)
                if data is not None:
                    raw[mime] = data
    raw.setdefault("text/plain", _plain(obj))
    return full_raw(raw)


def full_raw(raw):
    """A raw bundle (mime type to data) made into strings."""
    out = {}
    for mime, data in raw.items():
        if not isinstance(mime, str) or data is None:
            continue
        if mime in BINARY:
            if isinstance(data, str):
                data = "".join(data.split())  # already base64, perhaps wrapped
            elif isinstance(data, (bytes, bytearray)):
                data = base64.b64encode(bytes(data)).decode("ascii")
            else:
                continue
        elif mime == JSON_MIME or mime.endswith("+json"):
            try:
                data = json_text(data)
            except (TypeError, ValueError):
                continue
        elif isinstance(data, (bytes, bytearray)):
            data = bytes(data).decode("utf-8", "replace")
        elif not isinstance(data, str):
            data = str(data)
        out[mime] = data
    return out


def dataframe_full(obj, pd):
    frame = obj.to_frame() if isinstance(obj, pd.Series) else obj
    out = {"text/plain": _plain(obj)}
    try:
        out["text/html"] = frame._repr_html_()
    except Exception:
        pass
    if frame.shape[0] * max(frame.shape[1], 1) <= DATA_MAX_CELLS:
        try:
            cols = frame.to_dict(orient="list")
            out[DATA_MIME] = json_text({str(k): v for k, v in cols.items()})
        except (TypeError, ValueError):
            pass
    else:
        out["text/plain"] += "\n[data omitted: %d rows x %d columns is over %d cells]" % (frame.shape[0], frame.shape[1], DATA_MAX_CELLS)
    if "text/html" not in out:
        md = dataframe_bundle(frame)
        if md:
            out["text/markdown"] = md.get("text/markdown", "")
    return out


def json_text(value):
    """value as strict JSON: numpy scalars made plain, NaN and infinities
    null, dates in ISO form, anything else its str()."""
    return json.dumps(_plainify(value, 0), ensure_ascii=False, allow_nan=False)


def _plainify(v, depth):
    if depth > 50:
        return str(v)
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): _plainify(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plainify(x, depth + 1) for x in v]
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    iso = getattr(v, "isoformat", None)
    if callable(iso):  # pandas Timestamp
        try:
            return iso()
        except Exception:
            pass
    item = getattr(v, "item", None)
    if callable(item):  # a numpy scalar
        try:
            return _plainify(item(), depth + 1)
        except Exception:
            pass
    tolist = getattr(v, "tolist", None)
    if callable(tolist):  # a numpy array
        try:
            return _plainify(tolist(), depth + 1)
        except Exception:
            pass
    return str(v)
