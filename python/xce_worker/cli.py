"""The xce-worker command: runs a shell command per job of one or more
queues (see xce_worker.command and xce_worker.worker).

    xce-worker --peers n0=127.0.0.1:7601,n1=127.0.0.1:7602 \\
        --ca ca.crt --cert worker.crt --key worker.key --host node001 \\
        --queue batch --command 'sh -c "cat >/dev/null; sleep 1"'

--queue and --command go in pairs (repeat both for more queues). Ctrl-C
or SIGTERM stops claiming, lets the running commands finish within
--drain seconds, then kills the rest and hands their jobs back; the exit
status is 0 after a drain.
"""

import argparse
import signal
import sys
import time

from .client import Client
from .command import shell
from .worker import Runner


def main(argv=None):
    ap = argparse.ArgumentParser(prog="xce-worker", description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", required=True, help="name=host:port,... as given to the controllers")
    ap.add_argument("--ca", required=True, help="the cluster CA certificate (PEM)")
    ap.add_argument("--cert", required=True, help="this worker's certificate (PEM)")
    ap.add_argument("--key", required=True, help="this worker's key (PEM)")
    ap.add_argument("--host", required=True, help="this worker's host name in the cluster config")
    ap.add_argument("--queue", action="append", required=True, help="a queue to work (repeatable)")
    ap.add_argument("--command", action="append", required=True,
                    help="shell command run per job of the matching --queue, payload on stdin")
    ap.add_argument("--concurrency", type=int, default=1, help="jobs run at once per queue")
    ap.add_argument("--wait", type=float, default=20.0, help="long-poll seconds of an idle claim (0..20)")
    ap.add_argument("--drain", type=float, default=30.0, help="seconds a shutdown lets running jobs finish")
    ap.add_argument("--max-jobs", type=int, default=0, help="stop after this many jobs (0: never)")
    ap.add_argument("--idle-exit", type=float, default=0.0, help="stop after this many idle seconds (0: never)")
    a = ap.parse_args(argv)
    if len(a.queue) != len(a.command):
        ap.error(f"{len(a.queue)} --queue and {len(a.command)} --command: give one command per queue")
    try:
        client = Client(a.peers, a.ca, a.cert, a.key, timeout=10.0)
        runner = Runner(client, a.host, concurrency=a.concurrency, wait=a.wait, drain=a.drain)
        for q, c in zip(a.queue, a.command):
            runner.handle(q, shell(c))
    except (ValueError, OSError) as e:
        print(f"xce-worker: {e}", file=sys.stderr, flush=True)
        return 2

    def on_signal(signum, _frame):
        if not runner.stopping():
            runner.log(f"{signal.Signals(signum).name}: stopping")
        runner.stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    def poll():
        if a.max_jobs and runner.worked >= a.max_jobs:
            runner.log(f"{runner.worked} jobs: stopping")
            runner.stop()
        elif a.idle_exit and time.monotonic() - runner.last_job > a.idle_exit and not runner.busy():
            runner.log(f"idle for {a.idle_exit:g}s: stopping")
            runner.stop()

    return runner.run(poll=poll)


if __name__ == "__main__":
    sys.exit(main())
