"""An xce worker and client in Python, with the standard library only.

xce_worker.client: Client (calls the API on whichever node answers;
submit and submit_batch, which the client repeats when they are keyed),
XceError, NoPrimary, OutcomeUnknown, Submitted, SubmittedBatch.
xce_worker.worker: Runner (the worker loop), Fail. xce_worker.command: a handler that runs a shell command per job.
xce_worker.cli: the xce-worker command.
"""

from .client import Client, NoPrimary, OutcomeUnknown, Submitted, SubmittedBatch, XceError
from .worker import Fail, Runner

__all__ = ["Client", "NoPrimary", "OutcomeUnknown", "Submitted", "SubmittedBatch", "XceError", "Fail", "Runner"]
