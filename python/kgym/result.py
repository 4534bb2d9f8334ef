"""Result: one graded job, with the same fields on every outcome.

A Result is built from any result map (docs/results.md) by Result.from_map:
known keys become typed fields (a missing or mistyped key leaves the
field's default, never an exception), and the whole map is kept in `raw`,
so keys this client does not know yet pass through untouched and are
readable with result.get(key). `cached` and `coalesced` come from the
broker's result cache (docs/protocol.md section 14.1): the result was kept
from an earlier identical job, or shared with one that ran at the same
time; both are False on every other outcome, failures included.

Client-side failures (a timeout, a broker that went away, a completion
with no kernel in it, a task that cannot be loaded) are Results too:
status "internal_error" or "invalid", reward None, and `error` naming the
failure. `error` is "" exactly when the verdict came from a worker.
"""

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Optional

STATUSES = ("ok", "compile_error", "incorrect", "runtime_error", "timeout", "invalid",
            "internal_error")

#  Statuses that carry no reward: the caller's or kgym's fault, never the kernel's.
NO_REWARD = frozenset(("invalid", "internal_error"))

#  Client-side failure kinds (Result.error) and the status each one gets.
ERROR_STATUS = {
    "extract": "invalid",           # the completion holds no gradable kernel
    "task": "invalid",              # the task cannot be loaded
    "encode": "invalid",            # the job cannot be encoded as msgpack
    "too_large": "invalid",         # the encoded job is over 16 MiB
    "broker_refused": "invalid",    # ERROR 400/413 for this job
    "timeout": "internal_error",    # no result within timeout_s
    "broker_lost": "internal_error",  # the broker stopped answering
    "broker_error": "internal_error",  # ERROR 500 (or another code) for this job
    "unreachable": "internal_error",  # no connection to the broker came up (DNS, refused, ...)
    "unauthorized": "internal_error",  # the broker refused our CURVE handshake
    "bad_result": "internal_error",  # a RESULT whose body is not a map
    "cancelled": "internal_error",  # the caller cancelled the future
    "closed": "internal_error",     # the client was closed first
    "forked": "internal_error",     # submitted in the parent of a fork
}


def _num(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value


def _int(value):
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _str(value):
    return value if isinstance(value, str) else None


def _dict(value):
    return value if isinstance(value, dict) else None


@dataclass
class Result:
    status: str = "internal_error"
    reward: Optional[float] = None
    speedup: Optional[float] = None
    message: str = ""
    seed: Optional[int] = None
    timings: Optional[dict] = None
    max_abs_err: Optional[float] = None
    max_rel_err: Optional[float] = None
    mismatches: list = field(default_factory=list)
    compile_log: str = ""
    phases: dict = field(default_factory=dict)
    job: Optional[int] = None
    tag: Optional[str] = None
    worker: str = ""
    device: str = ""
    feedback: str = ""
    profile: Any = None
    cached: bool = False
    coalesced: bool = False
    task: Optional[str] = None
    backend: Optional[str] = None
    bad_elements: int = 0
    queue_s: Optional[float] = None
    group: Optional[str] = None
    trajectory: Optional[str] = None
    error: str = ""
    latency_s: Optional[float] = None
    index: Optional[int] = None
    raw: dict = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ build

    @classmethod
    def from_map(cls, data, **extra):
        """A Result from a result map (any dict: a RESULT body, a `kgym submit`
        or `kgym eval` line). `extra` sets fields the map lacks or overrides
        (job, queue_s, worker from the RESULT header; group, latency_s, ...)."""
        data = data if isinstance(data, dict) else {}
        r = cls(raw=dict(data))
        r.reward = _num(data.get("reward"))
        r.speedup = _num(data.get("speedup"))
        for name in ("message", "compile_log", "worker", "device", "feedback"):
            value = _str(data.get(name))
            if value is not None:
                setattr(r, name, value)
        status = _str(data.get("status"))
        if status:
            r.status = status
        else:
            r.status = "internal_error"
            r.error = "bad_result"
            r.message = "result without a status" + (": " + r.message if r.message else "")
        r.seed = _int(data.get("seed"))
        r.timings = _dict(data.get("timings"))
        r.max_abs_err = _num(data.get("max_abs_err"))
        r.max_rel_err = _num(data.get("max_rel_err"))
        mismatches = data.get("mismatches")
        r.mismatches = mismatches if isinstance(mismatches, list) else []
        r.phases = _dict(data.get("phases")) or {}
        r.job = _int(data.get("job"))
        r.tag = _str(data.get("tag"))
        r.profile = data.get("profile")
        r.cached = data.get("cached") is True
        r.coalesced = data.get("coalesced") is True
        r.task = _str(data.get("task"))
        r.backend = _str(data.get("backend"))
        r.bad_elements = _int(data.get("bad_elements")) or 0
        r.queue_s = _num(data.get("queue_s"))
        for name in ("group", "trajectory"):
            value = data.get(name)
            if isinstance(value, (str, int)) and not isinstance(value, bool):
                setattr(r, name, str(value))
        for name, value in extra.items():
            if value is not None:
                setattr(r, name, value)
        if r.status in NO_REWARD:
            r.reward = None
        return r

    @classmethod
    def failure(cls, error, message, *, feedback="", **fields):
        """A client-side failure: status from ERROR_STATUS, reward None."""
        status = ERROR_STATUS.get(error, "internal_error")
        r = cls(status=status, message=message, error=error, feedback=feedback, **fields)
        r.raw = {"status": status, "reward": None, "message": message, "error": error}
        if feedback:
            r.raw["feedback"] = feedback
        return r

    # ----------------------------------------------------------------- access

    @property
    def ok(self):
        """The kernel was correct (and timed, unless check_only)."""
        return self.status == "ok"

    @property
    def graded(self):
        """A worker judged the kernel: the reward is a number."""
        return self.reward is not None

    @property
    def infra_error(self):
        """kgym (client, broker or worker) failed: nothing to learn from."""
        return self.status == "internal_error"

    def get(self, key, default=None):
        """A field, or any key of the raw result map (keys added later by the
        broker or workers), or default."""
        if key in _FIELD_NAMES and key != "raw":
            return getattr(self, key)
        return self.raw.get(key, default)

    def __getitem__(self, key):
        if key in _FIELD_NAMES and key != "raw":
            return getattr(self, key)
        return self.raw[key]

    @property
    def extra(self):
        """Keys of the raw map that are not fields."""
        return {k: v for k, v in self.raw.items() if k not in _FIELD_NAMES}

    def to_dict(self, raw=False):
        """Every field as a plain dict (the same keys every time)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "raw"}
        if raw:
            out["raw"] = self.raw
        return out

    def to_json(self):
        return json.dumps(self.to_dict(), default=str, allow_nan=False)

    def metrics(self, prefix="kgym/"):
        """Flat numeric metrics for a logger, the same keys on every outcome
        (NaN where there is no value)."""
        nan = math.nan
        phases = self.phases or {}

        def val(x):
            return nan if x is None else x
        m = {
            "reward": val(self.reward),
            "ok": 1.0 if self.ok else 0.0,
            "compiled": 0.0 if self.status in ("compile_error", "invalid", "internal_error") else 1.0,
            "graded": 1.0 if self.graded else 0.0,
            "infra_error": 1.0 if self.infra_error else 0.0,
            "speedup": val(self.speedup),
            "compile_s": val(_num(phases.get("compile_s"))),
            "run_s": val(_num(phases.get("run_s"))),
            "queue_s": val(self.queue_s),
            "latency_s": val(self.latency_s),
            "cached": 1.0 if self.cached else 0.0,
            "coalesced": 1.0 if self.coalesced else 0.0,
        }
        return {prefix + k: float(v) for k, v in m.items()}

    def feedback_text(self, max_chars=4000):
        """Text for a model in a multi-turn loop: a status line (status,
        reward, speedup), then the worker's feedback when it sent one, else
        the message, compiler output and first mismatches."""
        lines = ["status: %s" % self.status]
        if self.reward is not None:
            lines[0] += ", reward %.4g" % self.reward
        if self.speedup is not None:
            lines[0] += ", speedup %.3gx over the baseline" % self.speedup
        if self.feedback:
            lines.append(self.feedback)
            return _cut("\n".join(lines), max_chars)
        if self.message:
            lines.append(self.message)
        if self.status == "compile_error" and self.compile_log:
            lines.append("compiler output:\n" + _cut(self.compile_log, max_chars // 2))
        if self.status == "incorrect" and self.mismatches:
            for m in self.mismatches[:3]:
                if isinstance(m, dict):
                    lines.append("  %s[%s] size %s trial %s: expected %s, got %s" % (
                        m.get("arg"), m.get("index"), m.get("size"), m.get("trial"),
                        m.get("expected"), m.get("got")))
        return _cut("\n".join(lines), max_chars)


def _cut(text, limit):
    if limit and len(text) > limit:
        return text[:limit - 15] + "\n...[truncated]"
    return text


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(Result))
