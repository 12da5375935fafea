"""Unit tests of the client's keyed submits against a fake node: a real
HTTP server in this process that speaks the API's Connect JSON (over
plain HTTP: the client's TLS is swapped for a plain connection), keeps
jobs and idempotency keys as the cluster does, and answers each request
as its script says: answered, the answer lost (the connection dropped,
with the submit applied or not), code unknown, no primary, a refusal.
The client's waits between repeats are recorded instead of slept."""

import http.client
import json
import os
import socket
import sys
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from xce_worker.client import Client, NoPrimary, OutcomeUnknown, Submitted, SubmittedBatch, XceError  # noqa: E402

# The waits of a keyed submit sent 8 times: 100 ms doubling to at most 2 s.
ALL_WAITS = [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]

# Connect's HTTP status per code.
STATUS = {"unknown": 500, "unavailable": 503, "already_exists": 409, "invalid_argument": 400}


class FakeNode:
    """A primary's submits over HTTP. script: one action per request, in
    order, then "answer" for the rest: "answer" (apply it and answer),
    "apply-lose" (apply it, drop the connection: a durable write whose
    answer was lost), "lose" (drop it unapplied), "unknown" (answer code
    unknown), "no-primary" (answer unavailable, naming no primary), or
    ("refuse", code)."""

    def __init__(self, test, script=()):
        self.mu = threading.Lock()
        self.script = list(script)
        self.requests = []  # (method, body) as received
        self.jobs = {}  # id -> payload (base64)
        self.keys = {}  # (queue, key) -> (id, what the submit asked for)
        self.next_id = 1
        node = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                node._serve(self)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.addr = f"127.0.0.1:{self.server.server_address[1]}"
        # A short poll: shutdown() waits for it.
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()
        test.addCleanup(self.close)

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def sent(self):
        with self.mu:
            return list(self.requests)

    def _serve(self, h):
        body = json.loads(h.rfile.read(int(h.headers["Content-Length"])))
        method = h.path.rsplit("/", 1)[-1]
        with self.mu:
            self.requests.append((method, body))
            action = self.script.pop(0) if self.script else "answer"
            if action in ("answer", "apply-lose"):
                status, rep = self._apply(method, body)
            elif action == "unknown":
                status, rep = 500, {"code": "unknown", "message": "the write's outcome is not known"}
            elif action == "no-primary":
                status, rep = 503, {"code": "unavailable", "message": "no primary known"}
            elif isinstance(action, tuple) and action[0] == "refuse":
                status, rep = STATUS[action[1]], {"code": action[1], "message": "refused by the script"}
            elif action != "lose":
                raise ValueError(f"unknown action {action!r}")
        if action in ("lose", "apply-lose"):
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        data = json.dumps(rep).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _apply(self, method, body):
        """The cluster's rule: a held key with the same payload and options
        answers its job, deduplicated; with others it refuses the whole
        submit (already_exists) before any job is made."""
        if method == "Submit":
            payloads, keys = [body["payload"]], [body.get("idempotencyKey", "")]
        elif method == "SubmitBatch":
            payloads = body["payloads"]
            keys = body.get("idempotencyKeys") or [""] * len(payloads)
        else:
            return 400, {"code": "invalid_argument", "message": f"the fake serves no {method}"}
        queue = body["queue"]
        opts = sorted((k, v) for k, v in body.items() if k not in ("payload", "payloads", "idempotencyKey", "idempotencyKeys"))
        for p, k in zip(payloads, keys):
            held = self.keys.get((queue, k)) if k else None
            if held and held[1] != (p, opts):
                return 409, {"code": "already_exists", "message": f"idempotency key {k!r} holds job {held[0]} of another submit"}
        ids, dedup = [], []
        for p, k in zip(payloads, keys):
            held = self.keys.get((queue, k)) if k else None
            if held:
                ids.append(held[0])
                dedup.append(True)
                continue
            i = self.next_id
            self.next_id += 1
            self.jobs[i] = p
            if k:
                self.keys[(queue, k)] = (i, (p, opts))
            ids.append(i)
            dedup.append(False)
        rep = {"ids": [str(i) for i in ids]}
        if any(dedup):
            rep["deduplicated"] = dedup
        if method == "Submit" and not dedup[0]:
            rep["jobs"] = [{"id": str(ids[0]), "queue": queue}]
        return 200, rep


class PlainClient(Client):
    """The client as it is but for TLS: plain HTTP to the fake node."""

    @staticmethod
    def _tls(ca, cert, key):
        return None

    def _connection(self, host, port, timeout):
        return http.client.HTTPConnection(host, port, timeout=timeout)


def client_of(node, **kw):
    cl = PlainClient(f"n0={node.addr}", "", "", "", timeout=5, **kw)
    cl.waits = []
    cl._sleep = cl.waits.append
    return cl


def rounded(waits):
    return [round(w, 9) for w in waits]


class KeyedSubmitTest(unittest.TestCase):
    def test_a_keyed_submit_is_repeated_until_answered(self):
        node = FakeNode(self, ["apply-lose", "no-primary", "unknown", "answer"])
        cl = client_of(node)
        self.assertEqual(cl.submit("batch", b"frame 7", priority=2, idempotency_key="order-7"), Submitted(1, True))
        sent = node.sent()
        self.assertEqual(len(sent), 4)
        self.assertTrue(all(m == "Submit" and b["idempotencyKey"] == "order-7" and b["priority"] == 2 for m, b in sent), sent)
        self.assertEqual(rounded(cl.waits), ALL_WAITS[:3])
        self.assertEqual(list(node.jobs), [1], "the repeats enqueued a job")

        # A fresh key is answered at once, not deduplicated.
        self.assertEqual(cl.submit("batch", b"frame 8", idempotency_key="order-8"), Submitted(2, False))
        self.assertEqual(len(node.sent()), 5)

    def test_a_keyed_batch_is_repeated_and_its_flags_are_per_id(self):
        node = FakeNode(self, ["answer", "apply-lose", "no-primary", "answer"])
        cl = client_of(node)
        self.assertEqual(cl.submit("batch", b"a", idempotency_key="ka"), Submitted(1, False))
        rep = cl.submit_batch("batch", [b"a", "b"], idempotency_keys=["ka", "kb"])
        self.assertEqual(rep, SubmittedBatch([1, 2], [True, True]))
        self.assertEqual([m for m, _ in node.sent()], ["Submit"] + ["SubmitBatch"] * 3)
        self.assertTrue(all(b["idempotencyKeys"] == ["ka", "kb"] for m, b in node.sent()[1:]))
        self.assertEqual(rounded(cl.waits), ALL_WAITS[:2])

        # Answered at once: one id an earlier submit's, one new.
        rep = cl.submit_batch("batch", [b"b", b"c"], idempotency_keys=["kb", "kc"])
        self.assertEqual(rep, SubmittedBatch([2, 3], [True, False]))
        self.assertEqual(sorted(node.jobs), [1, 2, 3])

    def test_a_keyed_submit_gives_up_after_8_sends_as_outcome_unknown(self):
        # The script's ninth request would be answered: the bound is 8.
        node = FakeNode(self, ["lose", "unknown"] * 4)
        cl = client_of(node)
        with self.assertRaises(OutcomeUnknown) as e:
            cl.submit("batch", b"x", idempotency_key="k")
        self.assertIn("the last of 8 attempts", str(e.exception))
        self.assertEqual(len(node.sent()), 8)
        self.assertEqual(rounded(cl.waits), ALL_WAITS)
        self.assertEqual(node.jobs, {})

        # keyed_attempts bounds it: 1 is sent once, its outcome unknown.
        node = FakeNode(self, ["lose", "lose"])
        cl = client_of(node, keyed_attempts=1)
        with self.assertRaises(OutcomeUnknown):
            cl.submit("batch", b"x", idempotency_key="k")
        self.assertEqual((len(node.sent()), cl.waits), (1, []))

    def test_no_primary_throughout_is_no_primary_not_outcome_unknown(self):
        node = FakeNode(self, ["no-primary"] * 8)
        cl = client_of(node)
        with self.assertRaises(NoPrimary) as e:
            cl.submit("batch", b"x", idempotency_key="k")
        self.assertEqual(e.exception.code, "unavailable")
        self.assertEqual(len(node.sent()), 8)
        self.assertEqual(rounded(cl.waits), ALL_WAITS)

    def test_a_submit_without_a_key_is_sent_once(self):
        node = FakeNode(self, ["apply-lose", "no-primary"])
        cl = client_of(node)
        with self.assertRaises(OutcomeUnknown):
            cl.submit("batch", b"x")
        with self.assertRaises(NoPrimary):
            cl.submit("batch", b"y")
        sent = node.sent()
        self.assertEqual(len(sent), 2)
        self.assertTrue(all("idempotencyKey" not in b for _, b in sent), sent)
        self.assertEqual(cl.waits, [])
        self.assertEqual(list(node.jobs), [1], "the lost submit was applied once")

    def test_a_batch_with_a_payload_without_a_key_is_sent_once(self):
        node = FakeNode(self, ["lose", "lose"])
        cl = client_of(node)
        with self.assertRaises(OutcomeUnknown):
            cl.submit_batch("batch", [b"a", b"b"], idempotency_keys=["ka", ""])
        with self.assertRaises(OutcomeUnknown):
            cl.submit_batch("batch", [b"a", b"b"])
        sent = node.sent()
        self.assertEqual([b.get("idempotencyKeys") for _, b in sent], [["ka", ""], None])
        self.assertEqual(cl.waits, [])

        # One key per payload, or none: a miscount is refused unsent.
        with self.assertRaisesRegex(ValueError, "1 keys for 2 payloads"):
            cl.submit_batch("batch", [b"a", b"b"], idempotency_keys=["ka"])
        self.assertEqual(len(node.sent()), 2)

    def test_a_definite_refusal_ends_a_keyed_submit_at_once(self):
        node = FakeNode(self)
        cl = client_of(node)
        self.assertEqual(cl.submit("batch", b"first", idempotency_key="k"), Submitted(1, False))
        with self.assertRaises(XceError) as e:
            cl.submit("batch", b"another payload", idempotency_key="k")
        self.assertNotIsInstance(e.exception, NoPrimary)
        self.assertEqual(e.exception.code, "already_exists")
        self.assertEqual(len(node.sent()), 2)
        self.assertEqual(cl.waits, [])

    def test_an_unknown_outcome_then_a_refusal_is_outcome_unknown(self):
        # The first send is lost; while the client waits another client
        # takes the key with another payload, so the repeat is refused.
        node = FakeNode(self, ["lose"])
        cl, other = client_of(node), client_of(node)

        def wait(seconds):
            cl.waits.append(seconds)
            if len(cl.waits) == 1:
                other.submit("batch", b"theirs", idempotency_key="k")

        cl._sleep = wait
        with self.assertRaises(OutcomeUnknown) as e:
            cl.submit("batch", b"mine", idempotency_key="k")
        self.assertIsInstance(e.exception.__cause__, XceError)
        self.assertEqual(e.exception.__cause__.code, "already_exists")
        self.assertIn("the last of 2 attempts", str(e.exception))
        self.assertEqual(len(node.sent()), 3)
        self.assertEqual(rounded(cl.waits), ALL_WAITS[:1])

        # The same once no primary answers the rest of the attempts.
        node = FakeNode(self, ["unknown"] + ["no-primary"] * 7)
        cl = client_of(node)
        with self.assertRaises(OutcomeUnknown) as e:
            cl.submit("batch", b"x", idempotency_key="k2")
        self.assertIsInstance(e.exception.__cause__, NoPrimary)
        self.assertEqual(len(node.sent()), 8)

    def test_bad_keys_are_refused_unsent(self):
        node = FakeNode(self)
        cl = client_of(node)
        with self.assertRaises(TypeError):
            cl.submit("batch", b"x", idempotency_key=7)
        with self.assertRaises(TypeError):
            cl.submit_batch("batch", [b"x"], idempotency_keys=[None])
        with self.assertRaises(TypeError):
            cl.submit("batch", 5)
        with self.assertRaisesRegex(TypeError, "want a list of payloads"):
            cl.submit_batch("batch", "one payload")
        for kw in ({"keyed_attempts": 0}, {"keyed_retry_base": 0}):
            with self.assertRaises(ValueError):
                client_of(node, **kw)
        self.assertEqual(node.sent(), [])


if __name__ == "__main__":
    unittest.main()
