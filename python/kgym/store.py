"""Per-trajectory state for multi-turn grading.

A multi-turn tool (kgym.adapters.verl.KgymTool, kgym.adapters.trl's
environment) lets a model submit a kernel several times in one trajectory,
see the feedback, and try again. Frameworks create tool objects freely (veRL
makes one per call), so the state lives in a store keyed by trajectory id,
not in the tool object.

TrajectoryStore is the interface; InProcessStore keeps the state in this
process's memory, which is right while one process runs a trajectory's turns.
The state is a plain JSON-able dict, so a store backed by the broker (once
the broker keeps per-trajectory state) implements the same five methods and
the tools do not change.

State of one trajectory:
    {"trajectory": id, "task": the task spec as given (name, path or object),
     "info": {...}, "attempts": [{"status", "reward", "score", "speedup",
     "message", "job", "error"}, ...], "best_score": float or None,
     "last_score": float or None, "created": unix time}
"""

import abc
import threading
import time
from collections import OrderedDict


class TrajectoryStore(abc.ABC):
    """Where multi-turn tools keep per-trajectory state."""

    @abc.abstractmethod
    def open(self, trajectory_id, task, **info):
        """Create the trajectory's state (or return the existing one)."""

    @abc.abstractmethod
    def get(self, trajectory_id):
        """The state, or None."""

    @abc.abstractmethod
    def record(self, trajectory_id, attempt):
        """Append one attempt (a dict with at least "score"); update
        best_score and last_score; return the new state. KeyError when the
        trajectory was never opened."""

    @abc.abstractmethod
    def close(self, trajectory_id):
        """Forget the trajectory; its last state, or None."""

    @abc.abstractmethod
    def __len__(self):
        """Open trajectories."""


def _better(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


class InProcessStore(TrajectoryStore):
    """TrajectoryStore in this process's memory, thread-safe. At most
    max_trajectories are kept (the oldest opened goes first); ttl_s, when
    set, forgets trajectories not touched for that long."""

    def __init__(self, max_trajectories=100000, ttl_s=None):
        self._lock = threading.Lock()
        self._states = OrderedDict()
        self._touched = {}
        self.max_trajectories = max_trajectories
        self.ttl_s = ttl_s

    def _expire(self, now):
        while len(self._states) > self.max_trajectories:
            key, _ = self._states.popitem(last=False)
            self._touched.pop(key, None)
        if self.ttl_s:
            for key in [k for k, t in self._touched.items() if now - t > self.ttl_s]:
                self._states.pop(key, None)
                self._touched.pop(key, None)

    def open(self, trajectory_id, task, **info):
        key = str(trajectory_id)
        now = time.time()
        with self._lock:
            state = self._states.get(key)
            if state is None:
                state = {"trajectory": key, "task": task, "info": dict(info), "attempts": [],
                         "best_score": None, "last_score": None, "created": now}
                self._states[key] = state
            self._touched[key] = now
            self._expire(now)
            return state

    def get(self, trajectory_id):
        with self._lock:
            return self._states.get(str(trajectory_id))

    def record(self, trajectory_id, attempt):
        key = str(trajectory_id)
        with self._lock:
            state = self._states[key]
            state["attempts"].append(dict(attempt))
            score = attempt.get("score")
            state["last_score"] = score
            state["best_score"] = _better(state["best_score"], score)
            self._touched[key] = time.time()
            return state

    def close(self, trajectory_id):
        key = str(trajectory_id)
        with self._lock:
            self._touched.pop(key, None)
            return self._states.pop(key, None)

    def __len__(self):
        with self._lock:
            return len(self._states)


_default = None
_default_lock = threading.Lock()


def default_store():
    """The process-wide InProcessStore the adapters use unless given one."""
    global _default
    with _default_lock:
        if _default is None:
            _default = InProcessStore(ttl_s=6 * 3600)
        return _default
