"""The client against a real sandboxd (SANDBOXD_URL, SANDBOXD_TOKEN), with a
sandbox of SANDBOXD_TEST_IMAGE (default sandboxd-sandbox:latest). The Go
test e2e/pyclient_test.go starts the daemon and runs these; without
SANDBOXD_URL they skip."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.dirname(HERE)  # clients/python
sys.path.insert(0, PACKAGE_DIR)  # the checkout's package, however the tests are discovered

import sandboxd  # noqa: E402
from sandboxd import OutputEvent, ToolResult  # noqa: E402

URL = os.environ.get("SANDBOXD_URL", "")
TOKEN = os.environ.get("SANDBOXD_TOKEN", "")
IMAGE = os.environ.get("SANDBOXD_TEST_IMAGE", "sandboxd-sandbox:latest")
STEP = 120.0  # seconds any one call may take on a loaded machine


@unittest.skipUnless(URL, "set SANDBOXD_URL and SANDBOXD_TOKEN to a running sandboxd (e2e/pyclient_test.go does)")
class AgainstDaemon(unittest.TestCase):
    client: sandboxd.Client
    sandbox: sandboxd.Sandbox
    agent_run: sandboxd.Run
    conversation: str
    space: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.client = sandboxd.Client(URL, TOKEN, timeout=STEP)
        suffix = uuid.uuid4().hex[:8]
        cls.conversation = "py-" + suffix
        cls.space = "py-desk-" + suffix
        cls.sandbox = cls.client.create_sandbox(cls.conversation, image=IMAGE)
        try:
            cls.agent_run = cls.client.create_run(cls.conversation, space=cls.space)
        except BaseException:
            cls.client.delete_sandbox(cls.sandbox.id)
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        try:
            cls.client.delete_run(cls.agent_run.id)
        finally:
            cls.client.delete_sandbox(cls.sandbox.id)
            cls.client.close()

    # --- sandboxes and runs ------------------------------------------------

    def test_sandbox_is_listed_and_read_back(self) -> None:
        self.assertEqual(self.sandbox.conversation, self.conversation)
        self.assertEqual(self.sandbox.backend, "docker")
        self.assertEqual(self.sandbox.image, IMAGE)
        self.assertEqual(self.sandbox.workspace, "/workspace")
        self.assertIsNotNone(self.sandbox.created_at)
        got = self.client.get_sandbox(self.sandbox.id)
        self.assertEqual((got.id, got.state), (self.sandbox.id, "running"))
        self.assertEqual([s.id for s in self.client.list_sandboxes(self.conversation)], [self.sandbox.id])
        self.assertIn(self.sandbox.id, [s.id for s in self.client.list_sandboxes()])

    def test_run_lists_its_tools(self) -> None:
        names = [t.name for t in self.agent_run.tools]
        for want in ("read", "write", "shell", "eval", "ask_user"):
            self.assertIn(want, names)
        listed = self.client.list_tools(self.agent_run.id)
        self.assertEqual([t.name for t in listed], names)
        got = self.client.get_run(self.agent_run.id)
        self.assertEqual((got.id, got.conversation, got.space, got.workdir), (self.agent_run.id, self.conversation, self.space, "/workspace"))
        self.assertIn(self.agent_run.id, [r.id for r in self.client.list_runs()])
        shell = got.tool("shell")
        assert shell is not None
        self.assertEqual(shell.level, "exec")
        self.assertEqual(shell.input_schema.get("type"), "object")
        self.assertIn("command", shell.input_schema.get("properties", {}))
        # Ready for the model SDKs as they are.
        oa = shell.to_openai()
        self.assertEqual((oa["type"], oa["function"]["name"]), ("function", "shell"))
        self.assertIs(oa["function"]["parameters"], shell.input_schema)
        self.assertEqual(shell.to_anthropic()["input_schema"], shell.input_schema)

    def test_run_options_are_echoed_and_a_deleted_run_is_gone(self) -> None:
        child = self.client.create_run(self.conversation, surface="readonly", workdir="sub", parent=self.agent_run.id)
        self.assertEqual((child.surface, child.parent, child.workdir), ("readonly", self.agent_run.id, "/workspace/sub"))
        self.assertNotIn("write", [t.name for t in child.tools])
        self.client.delete_run(child.id)
        with self.assertRaises(sandboxd.NotFound):
            self.client.get_run(child.id)

    # --- tool calls --------------------------------------------------------

    def test_write_then_read(self) -> None:
        w = self.client.call_tool(self.agent_run.id, "write", {"path": "notes/hello.txt", "content": "hello from python\n"})
        self.assertFalse(w.is_error, w.text)
        r = self.client.call_tool(self.agent_run.id, "read", {"path": "notes/hello.txt"})
        self.assertFalse(r.is_error, r.text)
        self.assertIn("hello from python", r.text)

    def test_audit_records_a_runs_calls(self) -> None:
        run = self.client.create_run(self.conversation)
        try:
            for i in range(3):
                w = self.client.call_tool(run.id, "write", {"path": f"audit/{i}.txt", "content": "secret-marker\n"})
                self.assertFalse(w.is_error, w.text)
            recs = list(self.client.audit_records(run=run.id, page_size=2))
        finally:
            self.client.delete_run(run.id)
        tools = [r for r in recs if r.kind == "tool"]
        self.assertEqual([(r.action, r.level, r.outcome) for r in tools], [("write", "write", "ok")] * 3, recs)
        self.assertEqual([r.sandbox for r in tools], [self.sandbox.id] * 3)
        self.assertTrue(all(len(r.args_sha256) == 64 and r.token_id for r in tools), tools)
        self.assertEqual(sorted(r.seq for r in recs), [r.seq for r in recs])
        self.assertIn("run.created", [r.action for r in recs if r.kind == "event"])

    def test_shell_output_streams_before_the_result(self) -> None:
        events: List[sandboxd.ToolStreamEvent] = []
        with self.client.stream_tool(self.agent_run.id, "shell", {"command": "echo first; sleep 2; echo second"}) as stream:
            for ev in stream:
                events.append(ev)
        self.assertIsInstance(events[-1], ToolResult, events)
        outputs = [e for e in events[:-1] if isinstance(e, OutputEvent)]
        self.assertEqual(len(outputs), len(events) - 1, events)
        first = next(i for i, e in enumerate(outputs) if "first" in e.text)
        second = next(i for i, e in enumerate(outputs) if "second" in e.text)
        # sandboxd joins the text of one stream that waits for the client, so two
        # events mean the first was sent while the command slept.
        self.assertLess(first, second, "the two outputs, a sleep apart, came as one event")
        self.assertEqual({e.stream for e in outputs}, {"stdout"})
        result = events[-1]
        assert isinstance(result, ToolResult)
        self.assertFalse(result.is_error)
        self.assertIn("exit status 0", result.text)
        self.assertIn("first", result.text)
        self.assertIn("second", result.text)
        self.assertIs(stream.result(), result)

    def test_call_tool_stream_hands_output_and_returns_the_result(self) -> None:
        seen: List[OutputEvent] = []
        res = self.client.call_tool_stream(self.agent_run.id, "shell", {"command": "printf 'a\\n'; printf 'b\\n' >&2"}, seen.append)
        self.assertEqual("".join(e.text for e in seen if e.stream == "stdout"), "a\n")
        self.assertEqual("".join(e.text for e in seen if e.stream == "stderr"), "b\n")
        self.assertIn("exit status 0", res.text)
        # A tool that prints nothing still answers its result.
        quiet = self.client.call_tool_stream(self.agent_run.id, "read", {"path": "notes-missing.txt"})
        self.assertTrue(quiet.is_error)

    def test_closing_a_tool_stream_ends_the_call(self) -> None:
        stream = self.client.stream_tool(self.agent_run.id, "shell", {"command": "echo $$ > victim.pid; echo started; sleep 300"})
        first = next(stream)
        self.assertIsInstance(first, OutputEvent)
        stream.close()
        self.assertEqual(list(stream), [])
        # The command is killed as when a plain call's client goes away; were
        # it not, this call would wait behind it past its timeout.
        deadline = time.monotonic() + STEP
        while True:
            res = self.client.call_tool(
                self.agent_run.id, "shell", {"command": "kill -0 $(cat victim.pid) 2>/dev/null && echo alive || echo gone"}
            )
            if "gone" in res.text:
                break
            self.assertLess(time.monotonic(), deadline, "the streamed command still runs after its stream was closed")
            time.sleep(0.5)

    def test_eval_keeps_its_state(self) -> None:
        a = self.client.call_tool(self.agent_run.id, "eval", {"code": "x = 21", "description": "set x"})
        self.assertFalse(a.is_error, a.text)
        b = self.client.call_tool(self.agent_run.id, "eval", {"code": "x * 2", "description": "double x"})
        self.assertFalse(b.is_error, b.text)
        self.assertIn("42", b.text)
        self.assertEqual(b.execution_count, a.execution_count + 1)

    def test_eval_image_is_an_image_block(self) -> None:
        cell = (
            "import struct, zlib\n"
            "from IPython.display import Image, display\n"
            "def _chunk(kind, data):\n"
            "    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff)\n"
            "_png = (b'\\x89PNG\\r\\n\\x1a\\n' + _chunk(b'IHDR', struct.pack('>IIBBBBB', 2, 1, 8, 2, 0, 0, 0))\n"
            "        + _chunk(b'IDAT', zlib.compress(b'\\x00\\xff\\x00\\x00\\x00\\x00\\xff')) + _chunk(b'IEND', b''))\n"
            "display(Image(data=_png))\n"
        )
        res = self.client.call_tool(self.agent_run.id, "eval", {"code": cell, "description": "a 2x1 PNG"})
        self.assertFalse(res.is_error, res.text)
        images = [b for b in res.content if b.type == "image"]
        self.assertEqual(len(images), 1, res.text)
        self.assertEqual(images[0].mime_type, "image/png")
        self.assertTrue(images[0].image_bytes().startswith(b"\x89PNG\r\n\x1a\n"), images[0].image_bytes()[:16])

    def test_bad_arguments_are_a_result_for_the_model(self) -> None:
        res = self.client.call_tool(self.agent_run.id, "read", {"nope": 1})
        self.assertTrue(res.is_error)
        self.assertIn("path", res.text)

    # --- network ------------------------------------------------------------

    def test_pause_hibernate_resume_keep_the_files(self) -> None:
        conv = "py-life-" + uuid.uuid4().hex[:8]
        sb = self.client.create_sandbox(conv, image=IMAGE, lifecycle=sandboxd.Lifecycle(hibernate_after_s=3600))
        try:
            self.assertEqual(sb.lifecycle, sandboxd.Lifecycle(hibernate_after_s=3600))
            run = self.client.create_run(conv)
            self.client.call_tool(run.id, "write", {"path": "kept.txt", "content": "kept"})
            paused = self.client.pause_sandbox(sb.id)
            self.assertEqual(paused.state, "paused")
            self.assertIsNotNone(paused.state_since)
            # A call resumes it first.
            self.assertIn("kept", self.client.call_tool(run.id, "read", {"path": "kept.txt"}).text)
            self.assertEqual(self.client.get_sandbox(sb.id).state, "running")
            self.assertEqual(self.client.hibernate_sandbox(sb.id).state, "hibernated")
            self.assertEqual(self.client.resume_sandbox(sb.id).state, "running")
            self.assertIn("kept", self.client.call_tool(run.id, "read", {"path": "kept.txt"}).text)
            with self.assertRaises(sandboxd.InvalidArgument):
                self.client.create_sandbox(conv + "-bad", image=IMAGE, lifecycle=sandboxd.Lifecycle(pause_after_s=-1))
            snap = self.client.create_snapshot(sb.id, "py")
            self.assertEqual((snap.sandbox, snap.name), (sb.id, "py"))
            self.assertIn("not part of a snapshot", snap.note)
            self.assertIn(snap.id, [s.id for s in self.client.list_snapshots()])
            base, copies, failed = self.client.fork_sandbox(sb.id, [conv + "-copy"])
            try:
                self.assertEqual((len(copies), failed), (1, []))
                copy_run = self.client.create_run(conv + "-copy")
                self.assertIn("kept", self.client.call_tool(copy_run.id, "read", {"path": "kept.txt"}).text)
            finally:
                for c in copies:
                    self.client.delete_sandbox(c.id)
            for s in (snap, base):
                self.client.delete_snapshot(s.id)
            with self.assertRaises(sandboxd.NotFound):
                self.client.get_snapshot(snap.id)
        finally:
            self.client.delete_sandbox(sb.id)

    def test_network_of_a_sandbox_not_in_proxy(self) -> None:
        st = self.client.network(self.sandbox.id)
        self.assertEqual(st.network, self.sandbox.network)
        self.assertEqual(self.client.get_sandbox(self.sandbox.id).network, self.sandbox.network)
        if self.sandbox.network == "proxy":
            self.skipTest("this sandboxd makes proxy sandboxes by default (default_network); nothing to refuse")
        self.assertEqual((st.allow, st.layers, st.secrets), ([], [], []))
        with self.assertRaises(sandboxd.FailedPrecondition) as cm:
            self.client.set_network(self.sandbox.id, ["pypi.org"])
        self.assertEqual(cm.exception.status, 412)
        self.assertIn('"proxy"', str(cm.exception))
        self.assertEqual(self.client.egress(self.sandbox.id), [])

    def test_proxy_sandbox_policy_and_egress(self) -> None:
        conversation = self.conversation + "-proxy"
        if self.sandbox.backend == "host":
            # The host backend shares the machine's network, so it refuses a
            # policy it could not enforce.
            with self.assertRaises(sandboxd.InvalidArgument) as cm:
                self.client.create_sandbox(conversation, image=IMAGE, network="proxy", egress_allow=["pypi.org"])
            self.assertIn("the host backend cannot take a sandbox off the network", str(cm.exception))
            return
        sb = self.client.create_sandbox(conversation, image=IMAGE, network="proxy", egress_allow=["pypi.org"])
        self.addCleanup(self.client.delete_sandbox, sb.id)
        self.assertEqual(sb.network, "proxy")
        self.assertEqual(self.client.get_sandbox(sb.id).network, "proxy")

        st = self.client.network(sb.id)
        self.assertEqual((st.network, st.allow, st.deny), ("proxy", ["pypi.org"], []))
        self.assertEqual([x.name for x in st.layers], ["deployment", "tenant", "sandbox"])
        own = st.layer("sandbox")
        assert own is not None
        self.assertEqual((own.allow, own.restricts), (["pypi.org"], True))
        if not any(x.restricts for x in st.layers[:2]):
            # Where the operator names nothing, nothing is allowed: the
            # sandbox's own list opens nothing by itself.
            self.assertEqual((st.allowed, st.not_effective), ([], ["pypi.org"]))

        def offered(status: "sandboxd.NetworkStatus") -> str:
            return "allowed: " + ", ".join(status.allowed) if status.allowed else "nothing is allowed"

        run = self.client.create_run(conversation)
        self.addCleanup(self.client.delete_run, run.id)
        refused = self.client.call_tool(run.id, "shell", {"command": "curl -sS --fail-with-body http://not-allowed.test/hello"})
        self.assertIn("sandboxd: egress to not-allowed.test:80 is not allowed for this sandbox; " + offered(st), refused.text)

        st = self.client.set_network(sb.id, ["github.com", "*.githubusercontent.com"], deny=["gist.github.com"])
        self.assertEqual((st.allow, st.deny), (["github.com", "*.githubusercontent.com"], ["gist.github.com"]))
        again = self.client.network(sb.id)
        self.assertEqual((again.allow, again.deny), (st.allow, st.deny))
        own = again.layer("sandbox")
        assert own is not None
        self.assertEqual((own.allow, own.deny), (st.allow, st.deny))
        # The program sees the new policy at once: the refusal offers it.
        refused = self.client.call_tool(run.id, "shell", {"command": "curl -sS --fail-with-body http://pypi.org/simple/"})
        self.assertIn("sandboxd: egress to pypi.org:80 is not allowed for this sandbox; " + offered(again), refused.text)
        self.assertNotIn("pypi.org", again.allowed)

        recs = self.client.egress(sb.id, limit=10)
        self.assertEqual([(r.host, r.port, r.decision) for r in recs[:2]], [("pypi.org", 80, "deny"), ("not-allowed.test", 80, "deny")])
        for r in recs[:2]:
            self.assertEqual((r.kind, r.sandbox, r.conversation, r.allowed), ("http", sb.id, conversation, False))
            self.assertTrue(r.reason, r)
            self.assertIsNotNone(r.time)
        assert recs[0].time is not None and recs[1].time is not None
        self.assertGreaterEqual(recs[0].time, recs[1].time)
        self.assertEqual(len(self.client.egress(sb.id, limit=1)), 1)
        with self.assertRaises(sandboxd.InvalidArgument) as cm:
            self.client.egress(sb.id, limit=5000)
        self.assertIn("1 to 1000", str(cm.exception))

    # --- errors ------------------------------------------------------------

    def test_unknown_run_is_not_found(self) -> None:
        with self.assertRaises(sandboxd.NotFound) as cm:
            self.client.call_tool("run_does-not-exist", "read", {"path": "x"})
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        self.assertIn("run_does-not-exist", str(cm.exception))
        with self.assertRaises(sandboxd.NotFound):
            self.client.stream_tool("run_does-not-exist", "shell", {"command": "true"})
        with self.assertRaises(sandboxd.NotFound):
            self.client.get_sandbox("no-such-sandbox")
        with self.assertRaises(sandboxd.NotFound) as cm:
            self.client.call_tool(self.agent_run.id, "no_such_tool", {})
        self.assertIn("no_such_tool", str(cm.exception))

    def test_bad_token_is_unauthorized(self) -> None:
        with sandboxd.Client(URL, "sbx_not-a-real-token", timeout=STEP) as bad:
            with self.assertRaises(sandboxd.Unauthorized) as cm:
                bad.list_sandboxes()
            self.assertEqual(cm.exception.status, 401)
            self.assertIn("token", str(cm.exception))
            with self.assertRaises(sandboxd.Unauthorized):
                bad.watch_questions(self.space)

    def test_bad_requests_are_invalid_argument(self) -> None:
        with self.assertRaises(sandboxd.InvalidArgument) as cm:
            self.client.call_tool(self.agent_run.id, "read", "[1, 2]")
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(sandboxd.InvalidArgument) as cm:
            self.client.create_run(self.conversation, approval="ask")
        self.assertIn("space", str(cm.exception))

    def test_second_sandbox_is_a_conflict(self) -> None:
        with self.assertRaises(sandboxd.Conflict) as cm:
            self.client.create_sandbox(self.conversation, image=IMAGE)
        self.assertIn(self.sandbox.id, str(cm.exception))

    def test_no_daemon_is_unavailable(self) -> None:
        with sandboxd.Client("http://127.0.0.1:9", TOKEN, timeout=5) as gone:
            with self.assertRaises(sandboxd.Unavailable) as cm:
                gone.healthz()
        self.assertIn("does not answer", str(cm.exception))

    def test_a_call_past_its_timeout_is_deadline_exceeded(self) -> None:
        with self.assertRaises(sandboxd.DeadlineExceeded):
            self.client.call_tool(self.agent_run.id, "shell", {"command": "sleep 5"}, timeout=1)
        with self.assertRaises(sandboxd.DeadlineExceeded):
            with self.client.stream_tool(self.agent_run.id, "shell", {"command": "echo go; sleep 5"}, timeout=30, idle_timeout=1) as s:
                s.result()

    # --- questions ---------------------------------------------------------

    def test_ask_user_answered_through_the_space_stream(self) -> None:
        asked: List[Optional[ToolResult]] = [None]
        failed: List[BaseException] = []

        def ask() -> None:
            try:
                asked[0] = self.client.call_tool(
                    self.agent_run.id,
                    "ask_user",
                    {
                        "question": "Which database should the service use?",
                        "context": "the config loader is being rewritten",
                        "options": [{"label": "Postgres"}, {"label": "SQLite", "description": "for tests"}],
                        "allow_free_text": True,
                    },
                )
            except BaseException as e:  # reported on the test's thread
                failed.append(e)

        with self.client.watch_questions(self.space, idle_timeout=60) as stream:
            asker = threading.Thread(target=ask, daemon=True)
            asker.start()
            q = stream.next_question()
            self.assertEqual((q.space, q.run, q.kind), (self.space, self.agent_run.id, "question"))
            self.assertEqual(q.question, "Which database should the service use?")
            self.assertEqual([o.label for o in q.options], ["Postgres", "SQLite"])
            self.assertEqual(q.options[1].description, "for tests")
            self.assertIn(q.id, [p.id for p in self.client.questions(self.space)])
            ans = self.client.answer_question(q.id, choices=[2], text="keep it small")
            self.assertEqual((ans.id, ans.status), (q.id, "answered"))
            ev = next(stream)
            while ev.type != "resolved":
                ev = next(stream)
            assert ev.resolved is not None
            self.assertEqual((ev.resolved.id, ev.resolved.status, ev.resolved.choices), (q.id, "answered", [2]))
            asker.join(STEP)
            self.assertFalse(asker.is_alive(), "ask_user did not return after the answer")
        if failed:
            raise failed[0]
        res = asked[0]
        assert res is not None
        self.assertFalse(res.is_error, res.text)
        self.assertIn("2. SQLite", res.text)
        self.assertIn("keep it small", res.text)
        with self.assertRaises(sandboxd.Conflict):
            self.client.answer_question(q.id, choices=[1])

    def test_closing_the_stream_from_another_thread_ends_iteration(self) -> None:
        stream = self.client.watch_questions(self.space + "-quiet")
        threading.Timer(0.5, stream.close).start()
        started = time.monotonic()
        self.assertEqual(list(stream), [])
        self.assertLess(time.monotonic() - started, STEP)

    # --- packaging and the example ------------------------------------------

    def test_pip_install_without_an_index(self) -> None:
        pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True)
        if pip.returncode != 0:
            self.skipTest(f"{sys.executable} has no pip ({pip.stderr.strip()[:200]}); install python3-pip to run this test")
        target = tempfile.mkdtemp(prefix="sandboxd-pip-")
        src = tempfile.mkdtemp(prefix="sandboxd-src-")
        try:
            # A copy, so the build leaves nothing in the checkout.
            tree = os.path.join(src, "python")
            shutil.copytree(PACKAGE_DIR, tree, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
            out = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--disable-pip-version-check",
                 "--target", target, tree],
                capture_output=True, text=True, timeout=STEP,
            )
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            self.assertTrue(os.path.exists(os.path.join(target, "sandboxd", "py.typed")))
            check = subprocess.run(
                [sys.executable, "-c", "import sandboxd, sys; print(sandboxd.__file__); sandboxd.Client().healthz()"],
                capture_output=True, text=True, timeout=STEP, cwd=target,
                env={**os.environ, "PYTHONPATH": target, "SANDBOXD_URL": URL, "SANDBOXD_TOKEN": TOKEN},
            )
            self.assertEqual(check.returncode, 0, check.stderr)
            self.assertTrue(check.stdout.strip().startswith(target), check.stdout)
        finally:
            shutil.rmtree(target, ignore_errors=True)
            shutil.rmtree(src, ignore_errors=True)

    def test_example_agent_loop_runs(self) -> None:
        out = subprocess.run(
            [sys.executable, os.path.join(PACKAGE_DIR, "examples", "agent_loop.py")],
            capture_output=True, text=True, timeout=4 * STEP,
            env={**os.environ, "PYTHONPATH": PACKAGE_DIR, "SANDBOXD_URL": URL, "SANDBOXD_TOKEN": TOKEN, "SANDBOXD_IMAGE": IMAGE},
        )
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("fib(20) = 6765", out.stdout)
        self.assertIn("done:", out.stdout)


if __name__ == "__main__":
    unittest.main()
