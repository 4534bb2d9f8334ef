"""What the framework adapters share: which client, which task, which score.

Scores. A trainer needs a number for every sample, but kgym's reward is
None for `invalid` and `internal_error` (a fault of the caller or of kgym,
nothing the model should learn from). The adapters map a Result to a score:

    a worker's verdict (reward not None)      -> result.reward
    no gradable kernel in the completion      -> format_score (default -1.0,
                                                 the compile_error value: the
                                                 model's own fault)
    anything else with reward None            -> missing_score (None where the
                                                 framework accepts it, TRL;
                                                 else 0.0), and the sample is
                                                 flagged kgym_valid = 0
"""

import hashlib
import json
import math
import threading

from ..client import Client, default_client
from ..result import STATUSES

_clients = {}
_clients_lock = threading.Lock()

#  Options that configure the adapters rather than jobs.
ADAPTER_KEYS = ("client", "broker", "format_score", "missing_score", "timeout_s", "store")
#  Options that go into jobs.
JOB_KEYS = ("eval", "reward", "tag", "group", "group_size", "trajectory", "cache", "seed", "trials",
            "warmup", "timed", "timeout", "compile_timeout", "profile", "check_only",
            "feedback_bytes")


def get_client(client=None, broker=None):
    """client if given; else a Client for broker (one per endpoint and
    process); else the process-wide default client ($KGYM_BROKER)."""
    if client is not None:
        return client
    if broker:
        with _clients_lock:
            c = _clients.get(broker)
            if c is None or c.closed:
                c = _clients[broker] = Client(broker)
            return c
    return default_client()


def _kgym_section(extra_info):
    if isinstance(extra_info, dict):
        section = extra_info.get("kgym")
        if isinstance(section, str):
            try:
                section = json.loads(section)
            except ValueError:
                section = None
        if isinstance(section, dict):
            return section
    return {}


def task_spec(ground_truth, extra_info=None):
    """The task of a sample: extra_info["kgym"]["task"], else
    extra_info["task"], else ground_truth (a task object, JSON text, a path
    or a bundled example name)."""
    section = _kgym_section(extra_info)
    if section.get("task") is not None:
        return section["task"]
    if isinstance(extra_info, dict) and extra_info.get("task") is not None:
        return extra_info["task"]
    if isinstance(ground_truth, dict) and "task" in ground_truth and "args" not in ground_truth:
        return ground_truth["task"]
    return ground_truth


def job_opts(extra_info=None, kw=None):
    """Job options from the adapter's keyword arguments, then the sample's
    extra_info["kgym"] (the sample wins). Unknown keys are ignored: the
    frameworks pass their own."""
    opts = {}
    for source in (kw or {}, _kgym_section(extra_info)):
        for key in JOB_KEYS:
            if key in source and source[key] is not None:
                value = source[key]
                if key in ("eval", "reward") and isinstance(opts.get(key), dict):
                    value = {**opts[key], **value}
                opts[key] = value
    return opts


def score_of(result, format_score=-1.0, missing_score=0.0):
    if result.reward is not None:
        return float(result.reward)
    if result.error == "extract":
        return format_score
    return missing_score


def _num(x):
    return 0.0 if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def info(result, score):
    """Per-sample numbers, the same keys on every outcome (numeric only, so
    frameworks can average them)."""
    status = result.status
    return {
        "score": _num(score),
        "acc": 1.0 if result.ok else 0.0,
        "kgym_valid": 1.0 if result.reward is not None else 0.0,
        "kgym_compiled": 0.0 if status in ("compile_error", "invalid", "internal_error") else 1.0,
        "kgym_format_error": 1.0 if result.error == "extract" else 0.0,
        "kgym_infra_error": 1.0 if status == "internal_error" else 0.0,
        "kgym_status": float(STATUSES.index(status) if status in STATUSES else len(STATUSES)),
        "kgym_speedup": _num(result.speedup),
        "kgym_latency_s": _num(result.latency_s),
        "kgym_cached": 1.0 if result.cached else 0.0,
    }


def group_id(*parts):
    """A short stable id for a GRPO group (the prompt, the step)."""
    h = hashlib.sha1()
    for p in parts:
        h.update(repr(p).encode("utf-8", "replace"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def batch_metrics(results, prefix="kgym/"):
    """Batch aggregates for a logger: pass rate, compile rate, error rates,
    mean speedup of the correct ones, latency, and the mean of every numeric
    leaf of the results' profiles (prefix + "profile/<path>")."""
    n = len(results) or 1
    ok = [r for r in results if r.ok]
    m = {
        "pass_rate": len(ok) / n,
        "compile_rate": sum(1 for r in results if r.status not in ("compile_error", "invalid",
                                                                   "internal_error")) / n,
        "format_error_rate": sum(1 for r in results if r.error == "extract") / n,
        "infra_error_rate": sum(1 for r in results if r.status == "internal_error") / n,
        "speedup_mean": (sum(r.speedup for r in ok if r.speedup is not None)
                         / max(1, sum(1 for r in ok if r.speedup is not None))),
        "latency_s_mean": sum(_num(r.latency_s) for r in results) / n,
        "queue_s_mean": sum(_num(r.queue_s) for r in results) / n,
        "cached_rate": sum(1 for r in results if r.cached) / n,
    }
    sums, counts = {}, {}
    for r in results:
        for path, value in _leaves(r.profile, "profile"):
            sums[path] = sums.get(path, 0.0) + value
            counts[path] = counts.get(path, 0) + 1
    for path in sums:
        m[path] = sums[path] / counts[path]
    return {prefix + k: float(v) for k, v in m.items()}


def _leaves(value, path):
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        if math.isfinite(value):
            yield path, float(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, "%s/%s" % (path, k))
