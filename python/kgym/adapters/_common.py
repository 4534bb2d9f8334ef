"""What the framework adapters share: which client, which task, which score.

Scores. A trainer needs a number for every sample, but kgym's reward is
None for `invalid` and `internal_error` (a fault of the caller or of kgym,
nothing the model should learn from). The adapters map a Result to a score:

    a worker's verdict (reward not None)      -> result.reward
    no gradable kernel in the completion      -> format_score (default -1.0,
                                                 the compile_error value: the
                                                 model's own fault)
    internal_error (kgym's infrastructure:    -> infra_score: "raise" (the
      broker unreachable, refused, lost; a       default) raises the failure's
      worker or broker fault; a timeout)         KgymError; a number (None
                                                 where the framework skips
                                                 None, TRL) scores it instead
    invalid (the job: no such task, too        -> missing_score (0.0; None for
      large, refused)                            TRL)
Either kind of failure is logged once per kind (logger "kgym": ERROR for
infrastructure, WARNING for invalid jobs), whatever the policy, and the
sample is flagged kgym_valid = 0 (kgym_infra_error = 1 for infrastructure):
nothing is silent.
"""

import hashlib
import json
import logging
import math
import threading

from ..client import Client, default_client, error_for
from ..result import STATUSES

log = logging.getLogger("kgym")

#  infra_score's default: an infrastructure failure raises.
RAISE = "raise"

_clients = {}
_clients_lock = threading.Lock()

#  Options that configure the adapters rather than jobs.
ADAPTER_KEYS = ("client", "broker", "format_score", "missing_score", "infra_score", "timeout_s",
                "store")
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


def infra_policy(value, allow_none=False, name="infra_score"):
    """infra_score checked: RAISE, a finite number (a float), or None where
    the framework skips None rewards. ValueError otherwise."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == RAISE:
            return RAISE
        if allow_none and text in ("none", "null", "skip"):
            return None
        try:
            value = float(text)
        except ValueError:
            raise ValueError("%s is 'raise' or a number%s, not %r"
                             % (name, " or None" if allow_none else "", value)) from None
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError("%s is 'raise' or a finite number%s, not %r"
                         % (name, " or None" if allow_none else "", value))
    return float(value)


def is_infra(result):
    """kgym's own failure (no reward, and not the job's fault)."""
    return result.reward is None and result.status == "internal_error"


def score_of(result, format_score=-1.0, missing_score=0.0, infra_score=None):
    """The score of one Result (infra_score must be resolved: not RAISE)."""
    if result.reward is not None:
        return float(result.reward)
    if result.error == "extract":
        return format_score
    if is_infra(result):
        return infra_score
    return missing_score


_said = set()
_said_lock = threading.Lock()


def say_once(key, level, message, *args):
    """Log a message once per key and process."""
    with _said_lock:
        if key in _said:
            return
        _said.add(key)
    log.log(level, message, *args)


def _why(result):
    return "%s%s" % (result.error + ": " if result.error else "", result.message or result.status)


def check_failures(results, infra_score=RAISE, missing_score=0.0, where="kgym reward", then=None):
    """Say (once per kind) that some results carry no reward, and raise the
    first infrastructure failure's KgymError when infra_score is RAISE.
    then: what happens to such a sample, when not scored by infra_score."""
    n = len(results)
    infra = [r for r in results if is_infra(r)]
    if infra:
        first = infra[0]
        kind = first.error or "broker/worker"
        if infra_score == RAISE:
            message = ("%s: %d of %d samples got no reward from kgym (its infrastructure failed, "
                       "not the model): %s. Fix that, or set infra_score to a number to score "
                       "such samples instead (still logged once)" % (where, len(infra), n, _why(first)))
            say_once(("infra", kind), logging.ERROR, "kgym: %s", message)
            exc = error_for(first)
            raise type(exc)(message, first)
        say_once(("infra", kind), logging.ERROR,
                 "kgym: %s: %d of %d samples got no reward from kgym (its infrastructure failed, not "
                 "the model): %s. %s; the next failures of this kind are not logged", where,
                 len(infra), n, _why(first),
                 then or "Scored infra_score=%r, flagged kgym_infra_error=1" % (infra_score,))
    invalid = [r for r in results if r.reward is None and not is_infra(r) and r.error != "extract"]
    if invalid:
        first = invalid[0]
        say_once(("invalid", first.error or "worker"), logging.WARNING,
                 "kgym: %s: %d of %d samples were invalid jobs (not the model's kernel): %s. Scored "
                 "missing_score=%r and flagged kgym_valid=0; the next of this kind are not logged",
                 where, len(invalid), n, _why(first), missing_score)


def scores(results, format_score=-1.0, missing_score=0.0, infra_score=RAISE, where="kgym reward"):
    """One score per Result (check_failures first: may raise)."""
    check_failures(results, infra_score, missing_score, where)
    return [score_of(r, format_score, missing_score, infra_score) for r in results]


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
