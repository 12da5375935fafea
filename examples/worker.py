#!/usr/bin/env python3
"""An xce worker in Python, with the standard library only.

It long-polls the cluster for jobs of one queue (Claim with waitMs), runs a
shell command for each job with the payload on its stdin, heartbeats the
claim while the command runs, and acks the job when the command exits 0 or
hands it back with Retry (the command's last stderr line as the error)
when it does not. The acks go out with the next claim (its "ack" field:
one call, one durable write for both), or in one AckBatch on exit. It talks Connect's JSON protocol over HTTP/1.1 with
mutual TLS (docs/client-api.md):

    python3 examples/worker.py --peers n0=127.0.0.1:7601,n1=127.0.0.1:7602 \\
        --ca .dev/certs/ca.crt --cert .dev/certs/worker.crt \\
        --key .dev/certs/worker.key --queue batch --host node01 \\
        --command 'sh -c "cat >/dev/null; sleep 1"'

Any node answers: a standby forwards job operations to the primary; a node
that cannot (no primary known) answers `unavailable`, and the worker tries
the primary it names, then the other nodes. A mutation whose answer never
came (a timeout, a reset, code `unknown`) may have been applied: a claim is
then left to expire, an ack or retry is not repeated (the job's claim
lapses and it is handed out again), so nothing is done twice by this
worker's choice.
"""

import argparse
import base64
import json
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

SERVICE = "xce.v1.Xce"


class XceError(Exception):
    """A Connect error answered by a node: code, message, the node."""

    def __init__(self, code, message, node=""):
        super().__init__(f"{code}: {message}" + (f" (from {node})" if node else ""))
        self.code = code
        self.message = message


class OutcomeUnknown(Exception):
    """A mutation was sent and its answer never came: it may be applied."""


def _varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return n, i


def not_primary_addr(details):
    """The primary's address from a xce.v1.NotPrimary error detail, or ""."""
    for d in details or []:
        if not d.get("type", "").endswith("xce.v1.NotPrimary"):
            continue
        raw = d.get("value", "")
        b = base64.b64decode(raw + "=" * (-len(raw) % 4))
        i, fields = 0, {}
        while i < len(b):
            key, i = _varint(b, i)
            if key & 7 != 2:  # NotPrimary holds strings only
                break
            size, i = _varint(b, i)
            fields[key >> 3] = b[i:i + size].decode("utf-8", "replace")
            i += size
        return fields.get(3, "")
    return ""


class Client:
    """Calls the Xce service on whichever node answers; remembers the last
    one that did."""

    def __init__(self, peers, ca, cert, key, timeout=10.0):
        self.addrs = [p.split("=", 1)[-1] for p in peers.split(",") if p]
        if not self.addrs:
            raise ValueError("--peers lists no node")
        self.ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        self.timeout = timeout
        self.last = self.addrs[0]

    def call(self, method, body, mutation=True, timeout=None):
        tried, addr = [], self.last
        while True:
            tried.append(addr)
            try:
                out = self._post(addr, method, body, timeout or self.timeout)
                self.last = addr
                return out
            except XceError as e:
                if e.code == "unknown" and mutation:
                    raise OutcomeUnknown(str(e)) from e
                if e.code != "unavailable":
                    raise
                nxt = getattr(e, "primary", "")
                why = e
            except (ConnectionError, socket.timeout, TimeoutError, urllib.error.URLError, ssl.SSLError) as e:
                sent = not isinstance(getattr(e, "reason", e), ConnectionRefusedError)
                if mutation and sent:
                    raise OutcomeUnknown(f"{method} to {addr}: {e}") from e
                nxt, why = "", e
            if not nxt or nxt in tried:
                rest = [a for a in self.addrs if a not in tried]
                if not rest:
                    raise XceError("unavailable", f"no node served {method}: last {why}")
                nxt = rest[0]
            addr = nxt

    def _post(self, addr, method, body, timeout):
        req = urllib.request.Request(
            f"https://{addr}/{SERVICE}/{method}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=timeout) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            try:
                err = json.load(e)
            except ValueError:
                raise XceError("unknown", f"HTTP {e.code} without a Connect error", addr) from e
            x = XceError(err.get("code", "unknown"), err.get("message", ""), addr)
            x.primary = not_primary_addr(err.get("details"))
            raise x from e


def handle_of(job):
    """The claim's handle: the job, its claim count and its claim record."""
    return {
        "id": job["id"],
        "attempt": job.get("claims", 0),
        "claimTerm": job.get("claimTerm", "0"),
        "claimLsn": job.get("claimLsn", "0"),
    }


class Heartbeat(threading.Thread):
    """Extends a claim every interval until stopped."""

    def __init__(self, client, handle, interval):
        super().__init__(daemon=True)
        self.client, self.handle, self.interval = client, handle, interval
        self.done = threading.Event()
        self.lost = False

    def run(self):
        while not self.done.wait(self.interval):
            try:
                self.client.call("Heartbeat", {"handle": self.handle})
            except XceError as e:
                if e.code == "failed_precondition":  # the claim is gone
                    self.lost = True
                    return
                log(f"heartbeat for job {self.handle['id']}: {e}")
            except OutcomeUnknown as e:
                log(f"heartbeat for job {self.handle['id']}: {e}")


def log(msg):
    print(f"worker: {msg}", file=sys.stderr, flush=True)


def work(client, job, command):
    """Runs command on job's payload; True if it exited 0, else the error."""
    payload = base64.b64decode(job.get("payload", ""))
    stamps = job.get("stamps", {})
    interval = max(1.0, int(stamps.get("visibilityTimeoutS", 30)) / 3)
    hb = Heartbeat(client, handle_of(job), interval)
    hb.start()
    try:
        p = subprocess.run(command, shell=True, input=payload, capture_output=True)
    finally:
        hb.done.set()
    if hb.lost:
        return "claim lost while working"
    if p.returncode == 0:
        return True
    lines = p.stderr.decode("utf-8", "replace").strip().splitlines()
    return f"exit {p.returncode}: {lines[-1] if lines else ''}"[:512]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", required=True, help="name=host:port,... as given to the controllers")
    ap.add_argument("--ca", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--queue", required=True)
    ap.add_argument("--host", required=True, help="this worker's host name in the cluster config")
    ap.add_argument("--command", required=True, help="shell command run per job, payload on stdin")
    ap.add_argument("--batch", type=int, default=1, help="jobs per claim (1..1000)")
    ap.add_argument("--wait", type=float, default=20.0, help="long-poll seconds per claim (0..20)")
    ap.add_argument("--max-jobs", type=int, default=0, help="exit after this many jobs (0: never)")
    ap.add_argument("--idle-exit", type=float, default=0.0, help="exit after this many idle seconds (0: never)")
    a = ap.parse_args(argv)
    client = Client(a.peers, a.ca, a.cert, a.key, timeout=a.wait + 10)
    worked, idle_since = 0, time.monotonic()
    acks = []  # jobs done, acked with the next claim
    while a.max_jobs == 0 or worked < a.max_jobs:
        if a.idle_exit and time.monotonic() - idle_since > a.idle_exit:
            log(f"idle for {a.idle_exit}s: exiting after {worked} jobs")
            break
        body = {"queue": a.queue, "host": a.host, "max": a.batch, "waitMs": int(a.wait * 1000)}
        if acks:
            body["ack"] = [handle_of(j) for j in acks]
        try:
            rep = client.call("Claim", body)
        except OutcomeUnknown as e:
            log(f"claim: {e} (a job it took is handed out again when its claim lapses)")
            acks = acks_unknown(acks, e)
            continue
        except XceError as e:
            if e.code in ("unavailable", "unknown"):  # nothing applied: the acks go again
                log(f"claim: {e}; retrying in 1 s")
                time.sleep(1)
                continue
            raise
        acks = acked(acks, rep.get("oks", []))
        jobs = rep.get("jobs", [])
        if jobs:
            idle_since = time.monotonic()
        for job in jobs:
            result = work(client, job, a.command)
            worked += 1
            if result is True:
                acks.append(job)
                continue
            try:
                client.call("Retry", {"handle": handle_of(job), "error": result})
                log(f"job {job['id']}: retried ({result})")
            except (XceError, OutcomeUnknown) as e:
                log(f"job {job['id']}: Retry failed: {e}")
    if acks:
        try:
            rep = client.call("AckBatch", {"handles": [handle_of(j) for j in acks]})
            acked(acks, rep.get("oks", []))
        except OutcomeUnknown as e:
            acks_unknown(acks, e)
        except XceError as e:
            log(f"ack batch of {len(acks)} jobs failed: {e}")
    log(f"done: {worked} jobs")
    return 0


def acked(jobs, oks):
    """Logs the ack results oks of jobs (in order); nothing is left to ack."""
    for i, job in enumerate(jobs):
        if i < len(oks) and oks[i]:
            log(f"job {job['id']}: acked")
        else:  # its claim lapsed meanwhile: it is handed out again
            log(f"job {job['id']}: ack refused, the claim is not current")
    return []


def acks_unknown(jobs, err):
    """The acks of jobs went out and no answer came: not repeated."""
    for job in jobs:
        log(f"job {job['id']}: ack outcome unknown ({err})")
    return []


if __name__ == "__main__":
    sys.exit(main())
