"""An xce worker and client in Python, with the standard library only.

xce_worker.client: Client (calls the API on whichever node answers),
XceError, OutcomeUnknown. xce_worker.worker: Runner (the worker loop),
Fail. xce_worker.command: a handler that runs a shell command per job.
xce_worker.cli: the xce-worker command.
"""

from .client import Client, OutcomeUnknown, XceError
from .worker import Fail, Runner

__all__ = ["Client", "OutcomeUnknown", "XceError", "Fail", "Runner"]
