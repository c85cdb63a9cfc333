"""Offline checks of the in-tree build backend (build_backend.py): the wheel
and sdist it writes are what pip and the wheel format expect, builds repeat
byte for byte, and a broken source folder is refused in one sentence. The
install itself, in a fresh environment without setuptools, is
e2e/pyclient_test.go's TestPythonClientInstallsOffline."""

from __future__ import annotations

import base64
import csv
import email.parser
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.dirname(HERE)  # clients/python
sys.path.insert(0, PACKAGE_DIR)  # the checkout's package and backend, however the tests are discovered

import build_backend  # noqa: E402
import sandboxd  # noqa: E402

STEP = 120.0  # seconds a build in a child process may take on a loaded machine
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def _sha256(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


class Wheel(unittest.TestCase):
    def setUp(self) -> None:
        self.out = tempfile.mkdtemp(prefix="sandboxd-wheel-")
        self.addCleanup(shutil.rmtree, self.out, True)

    def build(self) -> str:
        name = build_backend.build_wheel(self.out)
        return os.path.join(self.out, name)

    def test_file_name_and_contents(self) -> None:
        path = self.build()
        self.assertEqual(os.path.basename(path), f"sandboxd-{sandboxd.__version__}-py3-none-any.whl")
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
        dist_info = f"sandboxd-{sandboxd.__version__}.dist-info"
        want = {f"sandboxd/{f}" for f in os.listdir(os.path.join(PACKAGE_DIR, "sandboxd")) if f.endswith(".py")}
        want |= {"sandboxd/py.typed", f"{dist_info}/METADATA", f"{dist_info}/WHEEL", f"{dist_info}/RECORD"}
        self.assertEqual(names, want)

    def test_record_lists_every_file_with_its_hash_and_size(self) -> None:
        with zipfile.ZipFile(self.build()) as z:
            record_name = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
            rows = list(csv.reader(io.StringIO(z.read(record_name).decode())))
            self.assertEqual({r[0] for r in rows}, set(z.namelist()))
            for path, digest, size in rows:
                with self.subTest(path=path):
                    if path == record_name:
                        self.assertEqual((digest, size), ("", ""))
                        continue
                    data = z.read(path)
                    self.assertEqual(digest, _sha256(data))
                    self.assertEqual(int(size), len(data))

    def test_metadata_and_wheel_files(self) -> None:
        with zipfile.ZipFile(self.build()) as z:
            dist_info = f"sandboxd-{sandboxd.__version__}.dist-info"
            meta = email.parser.Parser().parsestr(z.read(f"{dist_info}/METADATA").decode())
            wheel = email.parser.Parser().parsestr(z.read(f"{dist_info}/WHEEL").decode())
        self.assertEqual(meta["Metadata-Version"], "2.1")
        self.assertEqual(meta["Name"], "sandboxd")
        self.assertEqual(meta["Version"], sandboxd.__version__)
        self.assertEqual(meta["Requires-Python"], ">=3.9")
        self.assertIn("Typing :: Typed", meta.get_all("Classifier"))
        self.assertEqual(meta["Description-Content-Type"], "text/markdown")
        with open(os.path.join(PACKAGE_DIR, "README.md"), encoding="utf-8") as f:
            self.assertEqual(meta.get_payload(), f.read())
        self.assertEqual(wheel["Wheel-Version"], "1.0")
        self.assertEqual(wheel["Root-Is-Purelib"], "true")
        self.assertEqual(wheel.get_all("Tag"), ["py3-none-any"])

    def test_builds_repeat_byte_for_byte(self) -> None:
        first = self.build()
        with open(first, "rb") as f:
            a = f.read()
        os.remove(first)
        with open(self.build(), "rb") as f:
            self.assertEqual(f.read(), a)

    def test_editable_wheel_imports_only_the_package(self) -> None:
        name = build_backend.build_editable(self.out)
        with zipfile.ZipFile(os.path.join(self.out, name)) as z:
            names = sorted(n for n in z.namelist() if ".dist-info/" not in n)
            self.assertEqual(names, ["_sandboxd_editable.pth", "_sandboxd_editable.py"])
            self.assertEqual(z.read("_sandboxd_editable.pth"), b"import _sandboxd_editable\n")
            z.extractall(os.path.join(self.out, "site"))
        # What site.py does with the .pth line, in a process started away
        # from the checkout and without site-packages (-S: an installed
        # sandboxd would be found first): sandboxd comes from the source
        # folder, tests and the backend do not.
        code = ("import _sandboxd_editable, sandboxd, sandboxd.client; print(sandboxd.__file__); "
                "import importlib.util as u; print(u.find_spec('tests'), u.find_spec('build_backend'))")
        out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=STEP,
                             cwd=self.out, env={**ENV, "PYTHONPATH": os.path.join(self.out, "site")})
        self.assertEqual(out.returncode, 0, out.stderr)
        file, specs = out.stdout.splitlines()
        self.assertEqual(os.path.realpath(file), os.path.realpath(os.path.join(PACKAGE_DIR, "sandboxd", "__init__.py")))
        self.assertEqual(specs, "None None")


class Sdist(unittest.TestCase):
    def setUp(self) -> None:
        self.out = tempfile.mkdtemp(prefix="sandboxd-sdist-")
        self.addCleanup(shutil.rmtree, self.out, True)

    def test_sdist_holds_the_backend_and_rebuilds_the_same_wheel(self) -> None:
        name = build_backend.build_sdist(self.out)
        base = f"sandboxd-{sandboxd.__version__}"
        self.assertEqual(name, base + ".tar.gz")
        with tarfile.open(os.path.join(self.out, name)) as tar:
            names = tar.getnames()
            for want in ("PKG-INFO", "pyproject.toml", "README.md", "build_backend.py", "sandboxd/__init__.py",
                         "sandboxd/py.typed", "tests/test_build.py", "examples/agent_loop.py"):
                self.assertIn(f"{base}/{want}", names)
            self.assertFalse([n for n in names if "__pycache__" in n or n.endswith(".pyc")], names)
            # The "data" filter where Python has it (3.12+, backported to
            # some 3.9-3.11 releases): it refuses links and absolute paths.
            tar.extractall(self.out, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))

        # The unpacked sdist builds on its own (as pip builds a wheel from
        # it), into the same bytes as the checkout's wheel.
        wheels = os.path.join(self.out, "wheels")
        os.mkdir(wheels)
        got = subprocess.run([sys.executable, "-c", "import sys, build_backend; print(build_backend.build_wheel(sys.argv[1]))", wheels],
                             capture_output=True, text=True, timeout=STEP, cwd=os.path.join(self.out, base), env=ENV)
        self.assertEqual(got.returncode, 0, got.stderr)
        with open(os.path.join(wheels, got.stdout.strip()), "rb") as f:
            from_sdist = f.read()
        with open(os.path.join(self.out, build_backend.build_wheel(self.out)), "rb") as f:
            self.assertEqual(from_sdist, f.read())


class SourceChecks(unittest.TestCase):
    def test_pyproject_reads_the_same_without_tomllib(self) -> None:
        with open(os.path.join(PACKAGE_DIR, "pyproject.toml"), encoding="utf-8") as f:
            text = f.read()
        doc = build_backend.parse_toml_subset(text)
        self.assertEqual(doc["build-system"]["build-backend"], "build_backend")
        self.assertEqual(doc["build-system"]["backend-path"], ["."])
        self.assertEqual(doc["project"]["version"], sandboxd.__version__)
        try:
            import tomllib  # type: ignore[import-not-found]
        except ImportError:
            self.skipTest("this Python has no tomllib (3.11+) to compare with")
        self.assertEqual(doc, tomllib.loads(text))

    def test_toml_beyond_the_subset_is_refused_naming_the_line(self) -> None:
        for text, want in [
            ("[project]\nname = 'single-quoted'\n", "line 2"),
            ("[project]\n\nversion = 1\n", "line 3"),
            ("a = [\"x\", 2]\n", "line 1"),
        ]:
            with self.subTest(text=text):
                with self.assertRaises(build_backend.BuildError) as cm:
                    build_backend.parse_toml_subset(text)
                self.assertIn(want, str(cm.exception))

    def test_a_version_mismatch_is_refused(self) -> None:
        tree = os.path.join(tempfile.mkdtemp(prefix="sandboxd-src-"), "python")
        self.addCleanup(shutil.rmtree, os.path.dirname(tree), True)
        shutil.copytree(PACKAGE_DIR, tree, ignore=shutil.ignore_patterns("__pycache__"))
        path = os.path.join(tree, "pyproject.toml")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(f'version = "{sandboxd.__version__}"', 'version = "9.9.9"'))
        got = subprocess.run([sys.executable, "-c", "import build_backend; build_backend.build_wheel('.')"],
                             capture_output=True, text=True, timeout=STEP, cwd=tree, env=ENV)
        self.assertNotEqual(got.returncode, 0)
        self.assertIn(f"says {sandboxd.__version__} but", got.stderr)
        self.assertIn("version 9.9.9; make them equal", got.stderr)
        self.assertFalse([f for f in os.listdir(tree) if f.endswith(".whl")])


if __name__ == "__main__":
    unittest.main()
