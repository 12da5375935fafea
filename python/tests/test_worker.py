"""Unit tests of xce_worker against an in-memory stand-in for the cluster
(python3 -m unittest discover -s python/tests, run by `make test`)."""

import base64
import io
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from xce_worker import client as xclient  # noqa: E402
from xce_worker.client import Aborted, Client, XceError, handle_of, not_primary_addr, parse_peers  # noqa: E402
from xce_worker.command import shell  # noqa: E402
from xce_worker.worker import MAX_ERROR, Runner, bound  # noqa: E402


class FakeCluster:
    """The job operations of one primary, in memory: claims (with their
    acks), acks, heartbeats, retries and fails under the validity rule (a
    handle names the job's current claim), and a long poll that answers
    empty after a short wait."""

    def __init__(self, lease=30, refuse_heartbeats=False):
        self.mu = threading.Condition()
        self.jobs = {}
        self.next_id = 1
        self.lease = lease
        self.refuse_heartbeats = refuse_heartbeats
        self.calls = []  # (method, body)
        self.aborted = False

    def submit(self, payload):
        with self.mu:
            i = self.next_id
            self.next_id += 1
            self.jobs[i] = {"state": "pending", "claims": 0, "attempts": 0, "payload": payload, "error": ""}
            self.mu.notify_all()
            return i

    def abort(self):
        with self.mu:
            self.aborted = True
            self.mu.notify_all()

    def count(self, method):
        with self.mu:
            return sum(1 for m, _ in self.calls if m == method)

    def _current(self, h):
        j = self.jobs.get(int(h["id"]))
        return j if j and j["state"] == "processing" and j["claims"] == h["attempt"] else None

    def call(self, method, body, mutation=True, timeout=None, abortable=False):
        with self.mu:
            self.calls.append((method, body))
            if abortable and self.aborted:
                raise Aborted("shutting down")
            if method == "Claim":
                oks = []
                for h in body.get("ack", []):
                    j = self._current(h)
                    oks.append(j is not None)
                    if j:
                        j["state"] = "acked"
                end = time.monotonic() + min(body.get("waitMs", 0) / 1000, 0.05)
                while True:
                    for i, j in sorted(self.jobs.items()):
                        if j["state"] == "pending":
                            j["state"] = "processing"
                            j["claims"] += 1
                            j["attempts"] += 1
                            job = {"id": str(i), "payload": base64.b64encode(j["payload"]).decode(),
                                   "claims": j["claims"], "attempts": j["attempts"],
                                   "stamps": {"visibilityTimeoutS": self.lease}}
                            return {"jobs": [job], "oks": oks}
                    left = end - time.monotonic()
                    if left <= 0 or (abortable and self.aborted):
                        if abortable and self.aborted:
                            raise Aborted("shutting down")
                        return {"oks": oks}
                    self.mu.wait(left)
            if method == "AckBatch":
                oks = []
                for h in body["handles"]:
                    j = self._current(h)
                    oks.append(j is not None)
                    if j:
                        j["state"] = "acked"
                return {"oks": oks}
            j = self._current(body["handle"])
            if j is None or (method == "Heartbeat" and self.refuse_heartbeats):
                raise XceError("failed_precondition", "handle refused")
            if method == "Retry":
                j["state"], j["error"] = "pending", body["error"]
                self.mu.notify_all()
            elif method == "Fail":
                j["state"], j["error"] = "dead", body["error"]
            return {}


class Harness:
    def __init__(self, test, cluster, handler, **kw):
        self.logs = []
        self.results = []
        self.rmu = threading.Lock()
        self.runner = Runner(cluster, "node001", log=self.log, on_result=self.result, wait=1.0, **kw)
        self.runner.handle("q", handler)
        self.rc = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        test.addCleanup(self.finish)

    def log(self, msg):
        with self.rmu:
            self.logs.append(msg)

    def result(self, job, outcome, text):
        with self.rmu:
            self.results.append((int(job["id"]), outcome, text))

    def _run(self):
        self.rc = self.runner.run()

    def wait_results(self, n, within=10.0):
        end = time.monotonic() + within
        while time.monotonic() < end:
            with self.rmu:
                if len(self.results) >= n:
                    return list(self.results)
            time.sleep(0.01)
        raise AssertionError(f"fewer than {n} results within {within} s: {self.results}")

    def finish(self, within=10.0):
        self.runner.stop()
        self.thread.join(within)
        if self.thread.is_alive():
            raise AssertionError(f"run() did not return within {within} s of stop()")
        return self.rc


class RunnerTest(unittest.TestCase):
    def test_acks_ride_on_the_next_claim_and_are_logged_when_taken(self):
        c = FakeCluster()
        ids = [c.submit(b"x") for _ in range(5)]
        h = Harness(self, c, lambda job, ctx: None, concurrency=2)
        res = h.wait_results(5)
        self.assertEqual(sorted(r[0] for r in res), ids)
        self.assertTrue(all(r[1] == "acked" for r in res), res)
        self.assertEqual(h.finish(), 0)
        self.assertEqual(c.count("AckBatch"), 0, "every ack rode on a claim")
        with c.mu:
            acking = [b for m, b in c.calls if m == "Claim" and b.get("ack")]
            self.assertTrue(all(j["state"] == "acked" for j in c.jobs.values()))
        self.assertEqual(sum(len(b["ack"]) for b in acking), 5)
        self.assertTrue(all(b["waitMs"] == 0 for b in acking), "a claim carrying acks must not wait")
        for i in ids:
            self.assertIn(f"job {i}: acked", h.logs)

    def test_a_failing_command_is_retried_with_its_last_stderr_line(self):
        c = FakeCluster()
        i = c.submit(b"x")
        out, err = io.StringIO(), io.StringIO()
        h = Harness(self, c, shell('echo one >&2; echo two >&2; [ "$XCE_ATTEMPT" = 2 ] || exit 3', out, err))
        res = h.wait_results(2)
        self.assertEqual(res[0], (i, "retried", "exit 3: two"))
        self.assertEqual(res[1][:2], (i, "acked"))
        self.assertIn("one\ntwo\n", err.getvalue())

    def test_output_passes_through_line_by_line(self):
        c = FakeCluster()
        c.submit(b"payload\n")
        out, err = io.StringIO(), io.StringIO()
        h = Harness(self, c, shell("read x; echo \"got $x\"; echo \"job $XCE_JOB_ID\" >&2", out, err))
        h.wait_results(1)
        self.assertEqual(out.getvalue(), "got payload\n")
        self.assertEqual(err.getvalue(), "job 1\n")

    def test_exit_100_dead_letters(self):
        c = FakeCluster()
        i = c.submit(b"x")
        h = Harness(self, c, shell("echo hopeless >&2; exit 100", io.StringIO(), io.StringIO()))
        self.assertEqual(h.wait_results(1)[0], (i, "failed", "exit 100: hopeless"))
        self.assertEqual(c.jobs[i]["state"], "dead")

    def test_an_exception_is_retried_with_bounded_text(self):
        c = FakeCluster()
        i = c.submit(b"x")

        def boom(job, ctx):
            if job["attempts"] == 1:
                raise RuntimeError("x" * 5000)

        h = Harness(self, c, boom)
        res = h.wait_results(2)
        self.assertEqual(res[0][:2], (i, "retried"))
        self.assertTrue(res[0][2].startswith("RuntimeError: xxx"))
        retry = [b for m, b in c.calls if m == "Retry"][0]
        self.assertLessEqual(len(retry["error"].encode()), MAX_ERROR)
        self.assertEqual(res[1][:2], (i, "acked"))

    def test_heartbeats_keep_a_long_job_and_a_refused_one_kills_it(self):
        c = FakeCluster(lease=1)
        c.submit(b"x")
        h = Harness(self, c, shell("sleep 1", io.StringIO(), io.StringIO()))
        self.assertEqual(h.wait_results(1)[0][1], "acked")
        self.assertGreaterEqual(c.count("Heartbeat"), 2, "a heartbeat every third of the lease")

        c = FakeCluster(refuse_heartbeats=True)
        c.submit(b"x")
        t0 = time.monotonic()
        h = Harness(self, c, shell("sleep 30", io.StringIO(), io.StringIO()), heartbeat=0.1)
        self.assertEqual(h.wait_results(1)[0][1], "claim lost")
        self.assertLess(time.monotonic() - t0, 10, "the command was not killed")
        self.assertEqual(c.count("Retry") + c.count("AckBatch"), 0)

    def test_drain_lets_a_running_command_finish(self):
        c = FakeCluster()
        i = c.submit(b"x")
        h = Harness(self, c, shell("sleep 0.5", io.StringIO(), io.StringIO()), drain=10)
        while c.count("Claim") == 0 or c.jobs[i]["state"] != "processing":
            time.sleep(0.01)
        self.assertEqual(h.finish(), 0)
        self.assertEqual(h.results, [(i, "acked", "")])
        self.assertEqual(c.count("AckBatch"), 1, "the last ack goes in an AckBatch")

    def test_drain_deadline_kills_and_hands_back(self):
        c = FakeCluster()
        i = c.submit(b"x")
        h = Harness(self, c, shell("sleep 30", io.StringIO(), io.StringIO()), drain=0.3)
        while c.jobs[i]["state"] != "processing":
            time.sleep(0.01)
        time.sleep(0.1)
        t0 = time.monotonic()
        self.assertEqual(h.finish(), 0)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(h.results[0][:2], (i, "released"))
        self.assertEqual(c.jobs[i]["state"], "pending")
        self.assertIn("drain deadline", c.jobs[i]["error"])

    def test_a_claim_refused_for_good_ends_run(self):
        class Refusing(FakeCluster):
            def call(self, method, body, **kw):
                raise XceError("invalid_argument", 'unknown queue "q"')

        r = Runner(Refusing(), "node001", log=lambda m: None)
        r.handle("q", lambda j, c: None)
        self.assertEqual(r.run(), 1)
        self.assertEqual(r.error.code, "invalid_argument")

    def test_bad_setup(self):
        for kw in ({"host": ""}, {"concurrency": 0}, {"wait": 21}, {"drain": -1}):
            args = {"host": "h", **kw}
            with self.assertRaises(ValueError):
                Runner(FakeCluster(), **args)
        r = Runner(FakeCluster(), "h")
        r.handle("q", lambda j, c: None)
        with self.assertRaises(ValueError):
            r.handle("q", lambda j, c: None)


class ClientTest(unittest.TestCase):
    def test_submit_sends_the_payload_and_returns_the_id(self):
        cl = Client.__new__(Client)
        cl.addrs, cl.last, cl.timeout = ["127.0.0.1:1"], "127.0.0.1:1", 1
        cl._mu, cl._abortable, cl._aborted = threading.Lock(), set(), False
        sent = []

        def post(addr, method, body, timeout, abortable):
            sent.append((method, body))
            return {"ids": ["1099511627777"], "jobs": [{"id": "1099511627777"}]}

        cl._post = post
        self.assertEqual(cl.submit("batch", "hello", priority=3, delay=5), (1099511627777, False))
        self.assertEqual(sent, [("Submit", {"queue": "batch", "payload": base64.b64encode(b"hello").decode(),
                                            "priority": 3, "delay": 5})])

    def test_a_lost_answer_is_outcome_unknown_and_not_resent(self):
        cl = Client.__new__(Client)
        cl.addrs, cl.last, cl.timeout = ["a:1", "b:2"], "a:1", 1
        sent = []

        def post(addr, method, body, timeout, abortable):
            sent.append(addr)
            raise ConnectionResetError("reset")

        cl._post = post
        with self.assertRaises(xclient.OutcomeUnknown):
            cl.submit("batch", b"x")
        self.assertEqual(sent, ["a:1"])

    def test_not_primary_is_followed(self):
        cl = Client.__new__(Client)
        cl.addrs, cl.last, cl.timeout = ["a:1", "b:2", "c:3"], "a:1", 1
        sent = []

        def post(addr, method, body, timeout, abortable):
            sent.append(addr)
            if addr != "c:3":
                raise XceError("unavailable", "Not primary", addr, "c:3")
            return {"ids": ["7"]}

        cl._post = post
        self.assertEqual(cl.submit("batch", b"x").id, 7)
        self.assertEqual(sent, ["a:1", "c:3"])
        self.assertEqual(cl.last, "c:3")

    def test_not_primary_detail_and_peers(self):
        # NotPrimary{node: "n1", primary_name: "n0", primary_addr: "127.0.0.1:7601"}
        raw = b"\x0a\x02n1\x12\x02n0\x1a\x0e127.0.0.1:7601"
        det = [{"type": "xce.v1.NotPrimary", "value": base64.b64encode(raw).decode().rstrip("=")}]
        self.assertEqual(not_primary_addr(det), "127.0.0.1:7601")
        self.assertEqual(not_primary_addr([]), "")
        self.assertEqual(parse_peers("n0=a:1, n1=b:2"), ["a:1", "b:2"])
        for bad in ("", "n0=nohost", "n0=a:x"):
            with self.assertRaises(ValueError):
                parse_peers(bad)

    def test_bound(self):
        self.assertEqual(bound("short"), "short")
        s = bound("é" * 2000)
        self.assertLessEqual(len(s.encode()), MAX_ERROR)
        self.assertTrue(s.endswith("..."))
        self.assertEqual(handle_of({"id": "5", "claims": 2}), {"id": "5", "attempt": 2, "claimTerm": "0", "claimLsn": "0"})


if __name__ == "__main__":
    unittest.main()
