"""The client of an xce cluster's API, with the standard library only.

It speaks Connect's JSON protocol over HTTP/1.1 with mutual TLS (TLS 1.3)
to whichever node answers: a standby forwards job operations to the
primary; a node that cannot (no primary known) answers `unavailable`,
and the client tries the primary it names, then the other nodes. It
remembers the last node that answered.

Outcomes: a mutation whose answer never came (a timeout, a reset, code
`unknown`) may have been applied and raises OutcomeUnknown; it is never
sent again by the client, but for a submit with idempotency keys, which
the keys make safe to repeat (see Client.submit). A definite refusal
raises XceError with the node's code; NoPrimary (an XceError, code
`unavailable`) when no node could serve the call. Nothing was applied
for an XceError.
"""

import base64
import http.client
import json
import socket
import ssl
import threading
import time
from typing import List, NamedTuple

SERVICE = "xce.v1.Xce"

# A keyed submit's repeats, as the Go client's: up to KEYED_ATTEMPTS sends,
# waiting KEYED_RETRY_BASE seconds doubling to at most MAX_KEYED_RETRY_WAIT
# between them, about 10 s of waits in all: a failover's worth (the
# cluster's --failure-timeout, 1.5 s by default, then an election). The
# queue's idempotency window (5 minutes at least) is far longer, so every
# repeat still finds the first attempt's job.
KEYED_ATTEMPTS = 8
KEYED_RETRY_BASE = 0.1
MAX_KEYED_RETRY_WAIT = 2.0


class XceError(Exception):
    """A Connect error answered by a node (nothing was applied): code,
    message, the node, and for `unavailable` the primary it named."""

    def __init__(self, code, message, node="", primary=""):
        super().__init__(f"{code}: {message}" + (f" (from {node})" if node else ""))
        self.code = code
        self.message = message
        self.node = node
        self.primary = primary


class NoPrimary(XceError):
    """No node served the call: each was down or answered that it knows
    no primary. Nothing was applied."""

    def __init__(self, message):
        super().__init__("unavailable", message)


class OutcomeUnknown(Exception):
    """A mutation was sent and its answer never came: it may be applied."""


class Aborted(Exception):
    """A call was cut off by Client.abort (its outcome is unknown if it
    was a mutation and had been sent)."""


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


def parse_peers(peers):
    """The addresses of a --peers string, name=host:port,... (the name is
    optional)."""
    addrs = []
    for part in peers.split(","):
        part = part.strip()
        if not part:
            continue
        addr = part.split("=", 1)[-1]
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"--peers entry {part!r}: want name=host:port")
        addrs.append(addr)
    if not addrs:
        raise ValueError("--peers lists no node")
    return addrs


def handle_of(job):
    """The claim's handle: the job, its claim count and its claim record."""
    return {
        "id": job["id"],
        "attempt": job.get("claims", 0),
        "claimTerm": job.get("claimTerm", "0"),
        "claimLsn": job.get("claimLsn", "0"),
    }


class Client:
    """Calls the Xce service on whichever node answers. Safe for use by
    several threads (each call has its own connection)."""

    def __init__(self, peers, ca, cert, key, timeout=10.0,
                 keyed_attempts=KEYED_ATTEMPTS, keyed_retry_base=KEYED_RETRY_BASE):
        """peers as --peers has them; ca, cert and key the PEM files of the
        cluster's CA and of this client's certificate; timeout a call's
        seconds. keyed_attempts bounds how many times a keyed submit is
        sent (1: never repeated), keyed_retry_base is its first wait."""
        if keyed_attempts < 1:
            raise ValueError(f"keyed_attempts {keyed_attempts}: want at least 1")
        if keyed_retry_base <= 0:
            raise ValueError(f"keyed_retry_base {keyed_retry_base}: want more than 0 seconds")
        self.addrs = parse_peers(peers)
        self.ctx = self._tls(ca, cert, key)
        self.timeout = timeout
        self.keyed_attempts = keyed_attempts
        self.keyed_retry_base = keyed_retry_base
        self._sleep = time.sleep  # the waits between a keyed submit's repeats
        self.last = self.addrs[0]
        self._mu = threading.Lock()
        self._abortable = set()  # connections of calls abort() cuts off
        self._aborted = False

    @staticmethod
    def _tls(ca, cert, key):
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
        ctx.load_cert_chain(cert, key)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        return ctx

    def _connection(self, host, port, timeout):
        return http.client.HTTPSConnection(host, port, context=self.ctx, timeout=timeout)

    def abort(self):
        """Cuts off every call made with abortable=True that is in flight,
        and makes later ones raise Aborted at once (a worker's shutdown:
        its waiting claims end, and the node drops them)."""
        with self._mu:
            self._aborted = True
            conns = list(self._abortable)
        for c in conns:
            try:
                c.sock and c.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def call(self, method, body, mutation=True, timeout=None, abortable=False):
        """The answer of method (a dict) to body, from whichever node serves
        it (see the module's documentation)."""
        tried, addr = [], self.last
        while True:
            tried.append(addr)
            try:
                out = self._post(addr, method, body, timeout or self.timeout, abortable)
                self.last = addr
                return out
            except XceError as e:
                if e.code == "unknown" and mutation:
                    raise OutcomeUnknown(f"{method} to {addr}: {e}") from e
                if e.code != "unavailable":
                    raise
                nxt, why = e.primary, e
            except _NotSent as e:
                nxt, why = "", e.err
            except (OSError, http.client.HTTPException) as e:
                if mutation:
                    raise OutcomeUnknown(f"{method} to {addr}: {e}") from e
                nxt, why = "", e
            if not nxt or nxt in tried:
                rest = [a for a in self.addrs if a not in tried]
                if not rest:
                    raise NoPrimary(f"no node served {method}: last {why}")
                nxt = rest[0]
            addr = nxt

    def _post(self, addr, method, body, timeout, abortable):
        host, _, port = addr.rpartition(":")
        conn = self._connection(host, int(port), timeout)
        if abortable:
            with self._mu:
                if self._aborted:
                    raise Aborted(f"{method}: the client is shutting down")
                self._abortable.add(conn)
        try:
            try:
                conn.connect()
            except OSError as e:
                raise _NotSent(e) from e
            data = json.dumps(body).encode()
            conn.request("POST", f"/{SERVICE}/{method}", body=data,
                         headers={"Content-Type": "application/json", "Content-Length": str(len(data))})
            try:
                r = conn.getresponse()
                raw = r.read()
            except OSError as e:
                if abortable and self._aborted:
                    raise Aborted(f"{method} to {addr}: cut off by the shutdown") from e
                raise
            if r.status == 200:
                return json.loads(raw or b"{}")
            try:
                err = json.loads(raw)
            except ValueError:
                raise XceError("unknown", f"HTTP {r.status} without a Connect error", addr) from None
            raise XceError(err.get("code", "unknown"), err.get("message", ""), addr,
                           not_primary_addr(err.get("details")))
        finally:
            if abortable:
                with self._mu:
                    self._abortable.discard(conn)
            conn.close()

    def submit(self, queue, payload, priority=0, delay=0, run_at=0, expires=0, resource=0, host="",
               idempotency_key=""):
        """Enqueues one job with payload (bytes or str): a Submitted, its
        id and whether it is an earlier submit's job (deduplicated).

        Without idempotency_key a lost answer raises OutcomeUnknown and
        the submit is not sent again: read back before submitting again.
        With one (1 to 128 bytes) a second submit to the queue with the
        key, within the queue's window, answers the first one's job and
        enqueues nothing, so submit repeats it itself while its outcome
        is unknown or no primary answers (see _keyed); OutcomeUnknown
        then means that no attempt was answered and one may have been
        applied: submit again with the same key to learn its job."""
        if not isinstance(idempotency_key, str):
            raise TypeError(f"idempotency_key is a {type(idempotency_key).__name__}, want a str")
        body = {"queue": queue, "payload": _b64(payload, "payload")}
        _options(body, priority, delay, run_at, expires, resource, host)
        if idempotency_key:
            body["idempotencyKey"] = idempotency_key
            rep = self._keyed("Submit", body)
        else:
            rep = self.call("Submit", body)
        ids, dedup = _ids(rep, "Submit", 1)
        return Submitted(ids[0], dedup[0])

    def submit_batch(self, queue, payloads, priority=0, delay=0, run_at=0, expires=0, resource=0, host="",
                     idempotency_keys=None):
        """Enqueues one job per payload (bytes or str, at most 1000) in one
        durable write, all with the same options: a SubmittedBatch, the
        ids in the payloads' order and per id whether it is an earlier
        submit's job.

        idempotency_keys is one key per payload ("" for none) or None.
        Only a batch whose every payload has a key is repeated as submit
        repeats a keyed submit; any other batch is sent once, and a lost
        answer raises OutcomeUnknown."""
        if isinstance(payloads, (str, bytes, bytearray)):
            raise TypeError(f"payloads is a {type(payloads).__name__}, want a list of payloads")
        payloads = list(payloads)
        body = {"queue": queue, "payloads": [_b64(p, f"payloads[{i}]") for i, p in enumerate(payloads)]}
        _options(body, priority, delay, run_at, expires, resource, host)
        keys = list(idempotency_keys or [])
        if keys and len(keys) != len(payloads):
            raise ValueError(f"idempotency_keys has {len(keys)} keys for {len(payloads)} payloads: want one per payload")
        for i, k in enumerate(keys):
            if not isinstance(k, str):
                raise TypeError(f"idempotency_keys[{i}] is a {type(k).__name__}, want a str")
        if keys:
            body["idempotencyKeys"] = keys
        if keys and all(keys):
            rep = self._keyed("SubmitBatch", body)
        else:
            rep = self.call("SubmitBatch", body)
        ids, dedup = _ids(rep, "SubmitBatch", len(payloads))
        return SubmittedBatch(ids, dedup)

    def _keyed(self, method, body):
        """The answer of a keyed submit, sent until it has a definite one:
        while an attempt's outcome is unknown or no primary answers, it is
        sent again after a wait, up to keyed_attempts times (the module's
        KEYED_* constants). Once any attempt's outcome was unknown, a
        submit that ends without an answer raises OutcomeUnknown, whatever
        the later attempts were told (no primary, or a refusal such as
        already_exists): that attempt may have been applied."""
        wait, unknown = self.keyed_retry_base, None
        attempt = 0
        while True:
            attempt += 1
            try:
                return self.call(method, body)
            except OutcomeUnknown as e:
                unknown, last = unknown or e, e
            except NoPrimary as e:
                last = e
            except XceError as e:
                last = e
                if unknown is None:
                    raise
                break
            if attempt >= self.keyed_attempts:
                break
            self._sleep(wait)
            wait = min(2 * wait, MAX_KEYED_RETRY_WAIT)
        if unknown is None or last is unknown:
            raise last
        raise OutcomeUnknown(f"{unknown}; the last of {attempt} attempts: {last}") from last


class Submitted(NamedTuple):
    """A submit's answer: the job's id, and whether it is an earlier
    submit's job (the same idempotency key): nothing was enqueued then."""
    id: int
    deduplicated: bool


class SubmittedBatch(NamedTuple):
    """A batch submit's answer: the jobs' ids in the payloads' order, and
    per id whether it is an earlier submit's job."""
    ids: List[int]
    deduplicated: List[bool]


def _b64(payload, what):
    if isinstance(payload, str):
        payload = payload.encode()
    if not isinstance(payload, (bytes, bytearray)):
        raise TypeError(f"{what} is a {type(payload).__name__}, want bytes or str")
    return base64.b64encode(payload).decode()


def _options(body, priority, delay, run_at, expires, resource, host):
    for k, v in (("priority", priority), ("delay", delay), ("runAt", run_at), ("expires", expires),
                 ("resource", resource), ("host", host)):
        if v:
            body[k] = v


def _ids(rep, method, want):
    """A submit answer's ids and deduplicated flags; the flags are absent
    when no id is an earlier submit's."""
    ids = [int(i) for i in rep.get("ids", [])]
    if len(ids) != want:
        raise XceError("unknown", f"{method} answered {len(ids)} ids, want {want}")
    dedup = [bool(d) for d in rep.get("deduplicated", [])] or [False] * want
    if len(dedup) != want:
        raise XceError("unknown", f"{method} answered {len(dedup)} deduplicated flags for {want} ids")
    return ids, dedup


class _NotSent(Exception):
    """Nothing reached the node (the connection was not made)."""

    def __init__(self, err):
        super().__init__(str(err))
        self.err = err
