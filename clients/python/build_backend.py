"""The client's PEP 517 build backend, in the standard library alone.

pyproject.toml names this module (backend-path "."), so that
`pip install --no-index --no-build-isolation ./clients/python` needs nothing
but Python and pip: no setuptools, no wheel package, no index. It builds

  - a pure-Python wheel (py3-none-any) of the package `sandboxd`, with the
    METADATA, WHEEL and RECORD files the wheel format (PEP 427, core
    metadata 2.1) asks for;
  - an sdist (PEP 517/625: NAME-VERSION.tar.gz with PKG-INFO) holding this
    backend too, so pip can build a wheel from it offline as well;
  - an editable wheel (PEP 660) whose .pth hook imports `sandboxd` from the
    source folder, and nothing else from that folder.

Archives are reproducible: entries sorted, times fixed (SOURCE_DATE_EPOCH
when set), owners and modes normalised.
"""

from __future__ import annotations

import base64
import csv
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "sandboxd"
TAG = "py3-none-any"
GENERATOR = "sandboxd build_backend"

# Files of the source folder that go into the sdist besides the package.
SDIST_FILES = ["pyproject.toml", "README.md", "build_backend.py"]
SDIST_DIRS = [PACKAGE, "tests", "examples"]
# Never packed: interpreter caches and what other build tools leave behind.
SKIP_DIRS = {"__pycache__", "build", "dist", ".mypy_cache", ".pytest_cache"}
SKIP_SUFFIXES = (".pyc", ".pyo", ".egg-info")

# The oldest time a zip entry can carry (1980-01-01).
_ZIP_EPOCH = 315532800


class BuildError(Exception):
    """What is wrong with the source folder, and what to do about it."""


# --- the PEP 517 and PEP 660 hooks ---------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    meta = read_project()
    dist_info = _dist_info(meta)
    target = os.path.join(metadata_directory, dist_info)
    os.makedirs(target, exist_ok=True)
    for name, data in _metadata_files(meta):
        with open(os.path.join(target, name), "wb") as f:
            f.write(data)
    return dist_info


def prepare_metadata_for_build_editable(metadata_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    return prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    meta = read_project()
    files = [(arc, _read(os.path.join(ROOT, arc))) for arc in _walk(PACKAGE)]
    if not any(arc == PACKAGE + "/__init__.py" for arc, _ in files):
        raise BuildError(f"{ROOT} has no {PACKAGE}/__init__.py; build from the client's own folder (clients/python)")
    return _write_wheel(wheel_directory, meta, files)


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    meta = read_project()
    source = os.path.join(ROOT, PACKAGE)
    if not os.path.isfile(os.path.join(source, "__init__.py")):
        raise BuildError(f"{source} has no __init__.py; an editable install needs the client's source folder")
    # A finder for the one package rather than the folder on sys.path: the
    # folder also holds tests/ and this module, which must not become
    # importable everywhere.
    hook = (
        '"""Imports the package `%s` from its source folder (an editable install)."""\n'
        "import importlib.util\n"
        "import sys\n"
        "\n"
        "SOURCE = %r\n"
        "\n"
        "\n"
        "class _Finder:\n"
        "    @classmethod\n"
        "    def find_spec(cls, name, path=None, target=None):\n"
        "        if name != %r:\n"
        "            return None\n"
        "        init = SOURCE + '/__init__.py'\n"
        "        return importlib.util.spec_from_file_location(name, init, submodule_search_locations=[SOURCE])\n"
        "\n"
        "\n"
        "if not any(f is _Finder for f in sys.meta_path):\n"
        "    sys.meta_path.append(_Finder)\n"
    ) % (PACKAGE, source.replace(os.sep, "/"), PACKAGE)
    module = f"_{PACKAGE}_editable"
    files = [
        (module + ".py", hook.encode()),
        (f"_{PACKAGE}_editable.pth", f"import {module}\n".encode()),
    ]
    return _write_wheel(wheel_directory, meta, files)


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    meta = read_project()
    base = f"{_dist_name(meta['name'])}-{meta['version']}"
    arcs = [f for f in SDIST_FILES if os.path.isfile(os.path.join(ROOT, f))]
    for d in SDIST_DIRS:
        arcs += _walk(d)
    missing = [f for f in SDIST_FILES if f not in arcs]
    if missing:
        raise BuildError(f"{ROOT} lacks {', '.join(missing)}; an sdist needs them to be built again")
    members = [("PKG-INFO", _metadata(meta))] + [(arc, _read(os.path.join(ROOT, arc))) for arc in sorted(arcs)]
    name = base + ".tar.gz"
    mtime = _build_time()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for arc, data in members:
            info = tarfile.TarInfo(f"{base}/{arc}")
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    # gzip's own header carries a time too: fix it for a reproducible file.
    with open(os.path.join(sdist_directory, name), "wb") as out:
        with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=mtime) as gz:
            gz.write(raw.getvalue())
    return name


# --- project metadata -----------------------------------------------------------


def read_project() -> Dict[str, Any]:
    """The [project] table of pyproject.toml, checked against the package."""
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        text = _read(path).decode("utf-8")
    except OSError as e:
        raise BuildError(f"cannot read {path}: {e}; build from the client's folder (clients/python)") from e
    doc = parse_toml(text)
    meta = doc.get("project")
    if not isinstance(meta, dict):
        raise BuildError(f"{path} has no [project] table; restore it from the repository")
    for key in ("name", "version"):
        if not isinstance(meta.get(key), str) or not meta[key]:
            raise BuildError(f"{path}: project.{key} is missing or not a string; set it")
    if _dist_name(meta["name"]) != PACKAGE:
        raise BuildError(f"{path}: project.name is {meta['name']!r} but this backend builds the package {PACKAGE!r}")
    if meta.get("dependencies"):
        raise BuildError(f"{path}: project.dependencies lists {meta['dependencies']}; the client uses the standard library only")
    init = os.path.join(ROOT, PACKAGE, "__init__.py")
    m = re.search(r'^__version__ = "([^"]+)"$', _read(init).decode("utf-8"), re.M)
    if m is None or m.group(1) != meta["version"]:
        found = m.group(1) if m else "no __version__"
        raise BuildError(f"{init} says {found} but {path} says version {meta['version']}; make them equal")
    return meta


def _metadata(meta: Dict[str, Any]) -> bytes:
    """Core metadata 2.1: METADATA in the wheel, PKG-INFO in the sdist."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {meta['name']}",
        f"Version: {meta['version']}",
    ]
    if meta.get("description"):
        lines.append(f"Summary: {meta['description']}")
    if meta.get("requires-python"):
        lines.append(f"Requires-Python: {meta['requires-python']}")
    for c in meta.get("classifiers", []):
        lines.append(f"Classifier: {c}")
    body = ""
    readme = meta.get("readme")
    if readme:
        if not isinstance(readme, str):
            raise BuildError("pyproject.toml: project.readme must be a file name (a string) for this backend")
        lines.append("Description-Content-Type: text/markdown" if readme.endswith(".md") else "Description-Content-Type: text/plain")
        body = _read(os.path.join(ROOT, readme)).decode("utf-8")
    return ("\n".join(lines) + "\n\n" + body).encode("utf-8")


def _metadata_files(meta: Dict[str, Any]) -> List[Tuple[str, bytes]]:
    wheel = f"Wheel-Version: 1.0\nGenerator: {GENERATOR}\nRoot-Is-Purelib: true\nTag: {TAG}\n"
    return [("METADATA", _metadata(meta)), ("WHEEL", wheel.encode())]


def _dist_name(name: str) -> str:
    """The name as file names spell it (PEP 503 normalised, - as _)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _dist_info(meta: Dict[str, Any]) -> str:
    return f"{_dist_name(meta['name'])}-{meta['version']}.dist-info"


# --- archives --------------------------------------------------------------------


def _write_wheel(wheel_directory: str, meta: Dict[str, Any], files: List[Tuple[str, bytes]]) -> str:
    dist_info = _dist_info(meta)
    entries = sorted(files) + [(f"{dist_info}/{n}", d) for n, d in _metadata_files(meta)]
    record = io.StringIO()
    w = csv.writer(record, lineterminator="\n")
    for arc, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        w.writerow([arc, f"sha256={digest}", len(data)])
    w.writerow([f"{dist_info}/RECORD", "", ""])
    entries.append((f"{dist_info}/RECORD", record.getvalue().encode()))

    name = f"{_dist_name(meta['name'])}-{meta['version']}-{TAG}.whl"
    stamp = time.gmtime(max(_build_time(), _ZIP_EPOCH))[:6]
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            info = zipfile.ZipInfo(arc, date_time=stamp)
            info.external_attr = (0o100644 & 0xFFFF) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return name


def _walk(top: str) -> List[str]:
    """The files under top (relative to ROOT, / separated), sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(SKIP_SUFFIXES))
        for f in filenames:
            if f.endswith(SKIP_SUFFIXES):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
            out.append(rel.replace(os.sep, "/"))
    return sorted(out)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _build_time() -> int:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    if epoch:
        try:
            return int(epoch)
        except ValueError:
            raise BuildError(f"SOURCE_DATE_EPOCH is {epoch!r}, not a whole number of seconds; unset it or fix it") from None
    return _ZIP_EPOCH


# --- pyproject.toml ---------------------------------------------------------------


def parse_toml(text: str) -> Dict[str, Any]:
    """pyproject.toml as a dict: tomllib where Python has it (3.11+), else
    parse_toml_subset."""
    try:
        import tomllib  # type: ignore[import-not-found]
    except ImportError:
        return parse_toml_subset(text)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BuildError(f"pyproject.toml is not valid TOML: {e}") from e


_KEY = r"[A-Za-z0-9_-]+"
_STRING = r'"(?:[^"\\]|\\.)*"'


def parse_toml_subset(text: str) -> Dict[str, Any]:
    """The part of TOML this project's pyproject.toml uses, for Pythons
    without tomllib: [tables] (dotted), comments, and keys whose values are
    basic strings, booleans or arrays of strings (one or several lines).
    Anything else is refused, naming the line."""
    doc: Dict[str, Any] = {}
    table = doc
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        n, line = i + 1, _strip_comment(lines[i]).strip()
        i += 1
        if not line:
            continue
        m = re.fullmatch(r"\[\s*(%s(?:\s*\.\s*%s)*)\s*\]" % (_KEY, _KEY), line)
        if m:
            table = doc
            for part in m.group(1).split("."):
                table = table.setdefault(part.strip(), {})
                if not isinstance(table, dict):
                    raise BuildError(f"pyproject.toml line {n}: [{m.group(1)}] redefines a key as a table")
            continue
        m = re.fullmatch(r"(%s)\s*=\s*(.+)" % _KEY, line)
        if not m:
            raise BuildError(f"pyproject.toml line {n}: {line!r} is not a key = value line this backend reads without tomllib")
        key, value = m.group(1), m.group(2).strip()
        if value.startswith("["):
            # An array may run over several lines, up to its closing bracket.
            while not _closes_array(value) and i < len(lines):
                value += " " + _strip_comment(lines[i]).strip()
                i += 1
            table[key] = _parse_array(value, n)
        else:
            table[key] = _parse_scalar(value, n)
    return doc


def _strip_comment(line: str) -> str:
    quoted = False
    for j, c in enumerate(line):
        if c == '"' and (j == 0 or line[j - 1] != "\\"):
            quoted = not quoted
        elif c == "#" and not quoted:
            return line[:j]
    return line


def _closes_array(value: str) -> bool:
    return re.fullmatch(r"\[\s*(?:%s\s*,\s*)*(?:%s\s*)?\]" % (_STRING, _STRING), value.strip()) is not None


def _parse_array(value: str, n: int) -> List[str]:
    if not _closes_array(value):
        raise BuildError(f"pyproject.toml line {n}: the array {value!r} is not a list of double-quoted strings")
    return [_unquote(s, n) for s in re.findall(_STRING, value)]


def _parse_scalar(value: str, n: int) -> Any:
    if value in ("true", "false"):
        return value == "true"
    if re.fullmatch(_STRING, value):
        return _unquote(value, n)
    raise BuildError(f"pyproject.toml line {n}: the value {value!r} is not a double-quoted string, a boolean or an array")


def _unquote(s: str, n: int) -> str:
    body = s[1:-1]
    out, j = [], 0
    escapes = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
    while j < len(body):
        c = body[j]
        if c == "\\":
            nxt = body[j + 1 : j + 2]
            if nxt in escapes:
                out.append(escapes[nxt])
                j += 2
                continue
            if nxt == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", body[j + 2 : j + 6]):
                out.append(chr(int(body[j + 2 : j + 6], 16)))
                j += 6
                continue
            raise BuildError(f"pyproject.toml line {n}: unsupported escape in {s}")
        out.append(c)
        j += 1
    return "".join(out)
