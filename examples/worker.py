#!/usr/bin/env python3
"""The Python worker, run from the repository without installing it: a
shim for the xce_worker package in python/ (installed, it is the
xce-worker command; see docs/workers.md). Same flags:

    python3 examples/worker.py --peers n0=127.0.0.1:7601,n1=127.0.0.1:7602 \\
        --ca .dev/certs/ca.crt --cert .dev/certs/worker.crt \\
        --key .dev/certs/worker.key --queue batch --host node001 \\
        --command 'sh -c "cat >/dev/null; sleep 1"'
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from xce_worker.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
