"""kgym: the trainers' client for the kgym kernel-grading service.

    import kgym
    client = kgym.Client("tcp://broker:5555")          # or $KGYM_BROKER
    r = client.grade("cpu/rmsnorm_f32", completion_text)
    print(r.status, r.reward, r.speedup)

See docs/trainers.md. Importing this package starts nothing: the ZeroMQ
context, socket and I/O thread are created on first use, per process.
"""

from .client import (BadQuery, BrokerLost, BrokerRefused, BrokerUnreachable, Client, ClientClosed, Conflict,
                     InvalidJob, KgymBusy, KgymError, KgymFuture, KgymTimeout, NotFound,
                     QueryError, QueryList, StateTooLarge, Unauthorized, Unsupported, default_client, error_for,
                     set_default_client)
from .extract import Extraction, ExtractionError, extract, extract_candidate
from .prompts import PromptError, prompt
from .result import NO_REWARD, STATUSES, Result
from .tasks import (TaskError, example_candidates, example_expected, examples_dir, list_examples,
                    resolve_task)
from .store import BrokerStore, InProcessStore, TrajectoryStore
from . import sampler, tools

__version__ = "0.1.0"

__all__ = ["Client", "KgymFuture", "Result", "STATUSES", "NO_REWARD", "KgymError", "KgymTimeout",
           "BrokerLost", "BrokerRefused", "BrokerUnreachable", "Unauthorized", "InvalidJob", "KgymBusy", "ClientClosed", "QueryError",
           "BadQuery", "NotFound", "Unsupported", "Conflict", "StateTooLarge", "QueryList",
           "error_for", "default_client", "set_default_client", "extract", "extract_candidate",
           "Extraction", "ExtractionError", "resolve_task", "TaskError", "list_examples",
           "example_candidates", "example_expected", "examples_dir", "TrajectoryStore",
           "InProcessStore", "BrokerStore", "prompt", "PromptError"]
