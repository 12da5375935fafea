"""The client of an xce cluster's API, with the standard library only.

It speaks Connect's JSON protocol over HTTP/1.1 with mutual TLS (TLS 1.3)
to whichever node answers: a standby forwards job operations to the
primary; a node that cannot (no primary known) answers `unavailable`,
and the client tries the primary it names, then the other nodes. It
remembers the last node that answered.

Outcomes: a mutation whose answer never came (a timeout, a reset, code
`unknown`) may have been applied and raises OutcomeUnknown; it is never
sent again by the client. A definite refusal raises XceError with the
node's code. Nothing was applied for an XceError.
"""

import base64
import http.client
import json
import socket
import ssl
import threading

SERVICE = "xce.v1.Xce"


class XceError(Exception):
    """A Connect error answered by a node (nothing was applied): code,
    message, the node, and for `unavailable` the primary it named."""

    def __init__(self, code, message, node="", primary=""):
        super().__init__(f"{code}: {message}" + (f" (from {node})" if node else ""))
        self.code = code
        self.message = message
        self.node = node
        self.primary = primary


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

    def __init__(self, peers, ca, cert, key, timeout=10.0):
        self.addrs = parse_peers(peers)
        self.ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        self.timeout = timeout
        self.last = self.addrs[0]
        self._mu = threading.Lock()
        self._abortable = set()  # connections of calls abort() cuts off
        self._aborted = False

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
                    raise XceError("unavailable", f"no node served {method}: last {why}")
                nxt = rest[0]
            addr = nxt

    def _post(self, addr, method, body, timeout, abortable):
        host, _, port = addr.rpartition(":")
        conn = http.client.HTTPSConnection(host, int(port), context=self.ctx, timeout=timeout)
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

    def submit(self, queue, payload, priority=0, delay=0, run_at=0, expires=0, host=""):
        """Enqueues one job with payload (bytes or str); its id. A lost
        answer raises OutcomeUnknown: read back before submitting again."""
        if isinstance(payload, str):
            payload = payload.encode()
        body = {"queue": queue, "payload": base64.b64encode(payload).decode()}
        for k, v in (("priority", priority), ("delay", delay), ("runAt", run_at), ("expires", expires), ("host", host)):
            if v:
                body[k] = v
        rep = self.call("Submit", body)
        ids = rep.get("ids", [])
        if len(ids) != 1:
            raise XceError("unknown", f"Submit answered {len(ids)} ids, want 1")
        return int(ids[0])


class _NotSent(Exception):
    """Nothing reached the node (the connection was not made)."""

    def __init__(self, err):
        super().__init__(str(err))
        self.err = err
