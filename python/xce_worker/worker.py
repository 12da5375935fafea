"""A worker loop: claim, run, heartbeat, settle; the same loop as the Go
client's Runner.

A handler per queue works one job: it is called as handler(job, ctx) with
the claimed job (a dict as the API answers it: id, payload in base64,
attempts, stamps, ...) and a JobContext, and returns None (done: the job
is acked) or an error string (the job is handed back with Retry and that
text, its attempt budget and backoff permitting), or raises Fail(text)
(the job is dead-lettered with Fail). Any other exception is a Retry with
its text. ctx.cancelled() turns true, and ctx.on_cancel callbacks run,
when the claim is lost or the shutdown's drain deadline passes.

Each queue has `concurrency` slots, each a thread claiming one job at a
time, so a slot claims only when it is free. An idle claim waits on the
node (long poll); a claim carrying the acks of the slot's last job does
not wait, so its answer, which says whether the ack was taken, comes at
once. While a handler runs, its claim is extended every third of the
job's lease (its visibility timeout). A heartbeat refused because the
claim is gone cancels the handler; the job is then not settled by this
worker.

Shutdown (Runner.stop): claiming stops at once (waiting claims are cut
off: the node drops them), running handlers may finish within the drain
deadline and are settled as usual, the acks still owed go in one
AckBatch per slot; at the deadline the remaining handlers are cancelled
and their jobs handed back with Retry.

A claim, ack, retry or fail whose answer never came (OutcomeUnknown) is
logged and never sent again.
"""

import sys
import threading
import time

from .client import Aborted, OutcomeUnknown, XceError, handle_of

MAX_ERROR = 1024  # bytes of error text a Retry or Fail carries


class Fail(Exception):
    """Raised by a handler: dead-letter the job with this text."""


class JobContext:
    """A running job's cancellation: cancelled() and on_cancel(fn)."""

    def __init__(self):
        self._mu = threading.Lock()
        self._why = None
        self._fns = []

    def cancelled(self):
        """None while the job may run on, else why it must stop."""
        with self._mu:
            return self._why

    def on_cancel(self, fn):
        """Calls fn(why) when the job is cancelled (at once if it is)."""
        with self._mu:
            why = self._why
            if why is None:
                self._fns.append(fn)
                return
        fn(why)

    def cancel(self, why):
        with self._mu:
            if self._why is not None:
                return
            self._why, fns = why, self._fns
            self._fns = []
        for fn in fns:
            fn(why)


def bound(text, limit=MAX_ERROR):
    """text cut to limit bytes of UTF-8 on a character boundary."""
    b = text.encode("utf-8", "replace")
    if len(b) <= limit:
        return text
    return b[:limit - 3].decode("utf-8", "ignore") + "..."


# OUTPUT_LOCK serialises whole lines to the worker's stdout and stderr:
# the runner's own lines and the commands' lines passed through
# (command.py) come from different threads, and print writes the text and
# its newline separately, so without it a line could land inside another.
OUTPUT_LOCK = threading.Lock()


def _stderr_log(msg):
    with OUTPUT_LOCK:
        sys.stderr.write(f"worker: {msg}\n")
        sys.stderr.flush()


class Runner:
    """Claims and works jobs of the queues it has handlers for (see the
    module's documentation)."""

    def __init__(self, client, host, concurrency=1, wait=10.0, drain=30.0, log=_stderr_log,
                 heartbeat=None, on_result=None):
        if not host:
            raise ValueError("host is empty: name this worker's host as in the cluster config")
        if concurrency < 1:
            raise ValueError(f"concurrency {concurrency}: want at least 1")
        if not 0 <= wait <= 20:
            raise ValueError(f"wait {wait}: want 0..20 seconds")
        if drain < 0:
            raise ValueError(f"drain {drain}: want 0 or more seconds")
        self.client, self.host, self.concurrency = client, host, concurrency
        self.wait, self.drain, self.log = wait, drain, log
        self.heartbeat = heartbeat  # seconds; None: a third of each job's lease
        self.on_result = on_result  # fn(job, outcome, text), once per settled job
        self.handlers = {}
        self._stop = threading.Event()  # stop claiming
        self._kill = threading.Event()  # the drain deadline passed
        self._mu = threading.Lock()
        self._running = {}  # job id -> JobContext, of handlers running
        self.worked = 0
        self.last_job = time.monotonic()
        self.error = None  # a claim refused for good

    def handle(self, queue, handler):
        if not queue:
            raise ValueError("empty queue name")
        if queue in self.handlers:
            raise ValueError(f"queue {queue!r} has a handler already")
        self.handlers[queue] = handler

    def stop(self):
        """Stops claiming; run() then drains and returns."""
        self._stop.set()
        self.client.abort()

    def stopping(self):
        return self._stop.is_set()

    def busy(self):
        """How many handlers are running."""
        with self._mu:
            return len(self._running)

    def run(self, poll=None):
        """Works jobs until stop(), then drains; 0, or 1 when a claim was
        refused for good (self.error says why). poll, if given, is called
        about every 0.2 s from this thread (it may call stop())."""
        if not self.handlers:
            raise ValueError("no handler: call handle() first")
        slots = []
        for queue in self.handlers:
            for i in range(self.concurrency):
                t = threading.Thread(target=self._slot, args=(queue, i), daemon=True, name=f"xce-{queue}-{i}")
                t.start()
                slots.append(t)
        while not self._stop.wait(0.2):
            if poll:
                poll()
        with self._mu:
            busy = len(self._running)
        if busy:
            self.log(f"draining: {busy} running, {self.drain:g} s to finish")
        deadline = time.monotonic() + self.drain
        for t in slots:
            t.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in slots):
            self.log("drain deadline passed: stopping the running jobs and handing them back")
            self._kill.set()
            with self._mu:
                running = list(self._running.values())
            for ctx in running:
                ctx.cancel("worker shut down: the drain deadline passed while the job ran")
            for t in slots:
                t.join()
        self.log(f"done: {self.worked} jobs")
        return 1 if self.error else 0

    def _result(self, job, outcome, text=""):
        if self.on_result:
            self.on_result(job, outcome, text)

    def _slot(self, queue, slot):
        done = []  # jobs worked without error: acked on the next claim
        pause = 0.1
        while not self._stop.is_set():
            body = {"queue": queue, "host": self.host, "max": 1, "waitMs": int(self.wait * 1000)}
            if done:
                body["waitMs"] = 0
                body["ack"] = [handle_of(j) for j in done]
            try:
                # A claim with acks is never cut off (their outcome would
                # become unknown); it does not wait, so it is short.
                rep = self.client.call("Claim", body, timeout=self.wait + 10, abortable=not done)
            except Aborted:
                break
            except OutcomeUnknown as e:
                if self._stop.is_set() and not done:
                    break
                self.log(f"claim: {e} (a job it took is handed out again when its claim lapses)")
                self._acks_unknown(done, e)
                done = []
                time.sleep(pause)
                pause = min(2 * pause, 5.0)
                continue
            except XceError as e:
                if e.code in ("invalid_argument", "permission_denied", "unauthenticated"):
                    self.log(f"claim of queue {queue!r} for host {self.host!r} refused: {e}")
                    self.error = e
                    self._stop.set()
                    self.client.abort()
                    break
                self.log(f"claim: {e}; trying again in {pause:g} s")
                self._stop.wait(pause)
                pause = min(2 * pause, 5.0)
                continue
            pause = 0.1
            self._acked(done, rep.get("oks", []))
            done = []
            for job in rep.get("jobs", []):
                if self._work(queue, job):
                    done.append(job)
        if done:
            try:
                rep = self.client.call("AckBatch", {"handles": [handle_of(j) for j in done]})
                self._acked(done, rep.get("oks", []))
            except OutcomeUnknown as e:
                self._acks_unknown(done, e)
            except XceError as e:
                self.log(f"ack batch of {len(done)} jobs failed: {e} (their claims lapse; they run again)")
                for j in done:
                    self._result(j, "not settled", str(e))

    def _acked(self, jobs, oks):
        for i, job in enumerate(jobs):
            if i < len(oks) and oks[i]:
                self.log(f"job {job['id']}: acked")
                self._result(job, "acked")
            else:  # its claim lapsed meanwhile: it is handed out again
                self.log(f"job {job['id']}: ack refused, the claim is not current")
                self._result(job, "ack refused")

    def _acks_unknown(self, jobs, err):
        for job in jobs:
            self.log(f"job {job['id']}: ack outcome unknown ({err})")
            self._result(job, "ack unknown", str(err))

    def _work(self, queue, job):
        """Runs queue's handler on job; True when it is to be acked."""
        self.last_job = time.monotonic()
        ctx = JobContext()
        with self._mu:
            self._running[job["id"]] = ctx
        lease = int(job.get("stamps", {}).get("visibilityTimeoutS", 30))
        every = self.heartbeat or max(0.1, lease / 3)
        beats_done = threading.Event()
        lost = []
        beats = threading.Thread(target=self._heartbeat, args=(job, every, beats_done, ctx, lost), daemon=True)
        beats.start()
        fail = None
        try:
            result = self.handlers[queue](job, ctx)
        except Fail as e:
            result, fail = None, str(e) or "failed"
        except Exception as e:  # a handler's failure is the job's, not the worker's
            result = f"{type(e).__name__}: {e}"
        finally:
            beats_done.set()
            beats.join()
            with self._mu:
                self._running.pop(job["id"], None)
                self.worked += 1
            self.last_job = time.monotonic()
        if lost:
            self.log(f"job {job['id']}: claim lost while working; not settled by this worker")
            self._result(job, "claim lost")
            return False
        why = ctx.cancelled()
        if why and self._kill.is_set():
            self._hand_back("Retry", job, why, "released")
            return False
        if fail is not None:
            self._hand_back("Fail", job, fail, "failed")
            return False
        if result is None:
            return True
        self._hand_back("Retry", job, result, "retried")
        return False

    def _hand_back(self, method, job, text, outcome):
        text = bound(text)
        try:
            self.client.call(method, {"handle": handle_of(job), "error": text})
        except OutcomeUnknown as e:
            self.log(f"job {job['id']}: {method} outcome unknown, not repeated: {e}")
            self._result(job, "not settled", str(e))
            return
        except XceError as e:
            self.log(f"job {job['id']}: {method} failed: {e} (its claim lapses; it is handed out again)")
            self._result(job, "not settled", str(e))
            return
        self.log(f"job {job['id']}: {outcome} ({text})")
        self._result(job, outcome, text)

    def _heartbeat(self, job, every, done, ctx, lost):
        while not done.wait(every):
            try:
                self.client.call("Heartbeat", {"handle": handle_of(job)})
            except XceError as e:
                if e.code == "failed_precondition":  # the claim is gone
                    lost.append(True)
                    ctx.cancel("the claim is no longer current")
                    return
                self.log(f"heartbeat for job {job['id']}: {e}")
            except OutcomeUnknown as e:  # harmless if applied twice: the next goes on time
                self.log(f"heartbeat for job {job['id']}: {e}")
