"""A handler that runs a shell command per job: the payload on its stdin,
XCE_JOB_ID and XCE_ATTEMPT in its environment, its stdout and stderr
copied line by line to the worker's own (flushed per line, a whole line
at a time, so concurrent jobs' lines do not mix). Exit 0: done. Another
status: an error naming it and the command's last stderr line. Exit 100:
Fail (dead-letter the job). A cancelled job's command is killed."""

import base64
import os
import subprocess
import sys
import threading

from .worker import OUTPUT_LOCK, Fail

FAIL_STATUS = 100


def _copy(src, dst, last=None):
    for line in iter(src.readline, b""):
        with OUTPUT_LOCK:
            dst.buffer.write(line) if hasattr(dst, "buffer") else dst.write(line.decode("utf-8", "replace"))
            dst.flush()
        if last is not None:
            text = line.decode("utf-8", "replace").strip()
            if text:
                last[0] = text[:4096]
    src.close()


def _feed(stdin, payload):
    try:
        stdin.write(payload)
    except BrokenPipeError:  # the command does not read all of it
        pass
    finally:
        try:
            stdin.close()
        except BrokenPipeError:
            pass


def shell(command, stdout=None, stderr=None):
    """The handler running command (sh -c) per job."""

    def handler(job, ctx):
        out = stdout or sys.stdout
        err = stderr or sys.stderr
        payload = base64.b64decode(job.get("payload", ""))
        env = dict(os.environ, XCE_JOB_ID=str(job["id"]), XCE_ATTEMPT=str(job.get("attempts", 0)))
        p = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, start_new_session=True)
        last = [""]
        threads = [threading.Thread(target=_feed, args=(p.stdin, payload), daemon=True),
                   threading.Thread(target=_copy, args=(p.stdout, out), daemon=True),
                   threading.Thread(target=_copy, args=(p.stderr, err, last), daemon=True)]
        for t in threads:
            t.start()

        def kill(_why):
            try:
                os.killpg(p.pid, 9)  # the shell and what it started
            except (ProcessLookupError, PermissionError):
                pass

        ctx.on_cancel(kill)
        rc = p.wait()
        for t in threads:
            t.join(2)
        why = ctx.cancelled()
        if why:
            return f"killed: {why}"
        if rc == 0:
            return None
        text = f"exit {rc}: {last[0]}"
        if rc == FAIL_STATUS:
            raise Fail(text)
        return text

    return handler
