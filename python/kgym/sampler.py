"""Curriculum over a task pool: keep sampling tasks a policy can learn from.

    sampler = kgym.sampler.CurriculumSampler(pool, band=(0.1, 0.9), weight="operators")
    sampler.refresh(client)            # the broker's task statistics (client.tasks())
    batch = sampler.sample(16)         # task specs, as given in pool
    sampler.report()                   # per task: pass rate, reward spread, zero-variance groups,
                                       # operators, eligible, weight

DAPO's dynamic sampling drops GRPO groups whose rewards are all equal: no
advantage, no gradient. Sampling ahead of time saves their rollouts: a task
the policy always solves (pass rate 1) or never solves (0) gives such
groups, so the sampler keeps tasks whose pass rate lies in the band, those
not yet tried enough to know (fewer than min_attempts graded results), and
drops tasks whose recent groups were mostly zero-variance anyway. Weights
can favour tasks by the reference's dominant operators (the results'
profile.reference.operators, kept by the broker per task): with
focus=("aten::mm", ...) by the share of the reference's time those take,
else by its top operator's share, so a pool can lean towards the operators
that take most of a model's runtime.
"""

import math
import random
import re

from .tasks import TaskError, resolve_task

WEIGHTS = ("uniform", "operators")


def _name_of(spec):
    try:
        task = resolve_task(spec)
    except TaskError:
        task = None
    if isinstance(task, dict) and isinstance(task.get("name"), str):
        return task["name"]
    if isinstance(spec, str):
        return spec.rsplit("/", 1)[-1]
    raise TaskError("cannot name the pool's task %r" % (spec,))


def _num(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


class CurriculumSampler:
    """DAPO-style dynamic sampling over pool (task specs: bundled example
    names, task file paths or task objects; sample() returns them as given).

    band: keep tasks whose pass rate lies in [lo, hi]; min_attempts: graded
    results needed before the pass rate is trusted (below it a task is
    kept, to learn it); max_zero_variance: drop a task when more than this
    share of its recent groups (at least min_groups of them) had equal
    rewards; weight: "uniform", "operators" or a callable(stats) -> float;
    focus: operator names (or a regex) that the "operators" weight counts;
    min_weight: the floor of a weight, so no kept task starves."""

    def __init__(self, pool, *, band=(0.1, 0.9), min_attempts=4, max_zero_variance=0.75,
                 min_groups=4, weight="uniform", focus=None, min_weight=0.05, seed=None):
        pool = list(pool)
        if not pool:
            raise ValueError("the pool is empty")
        lo, hi = (float(x) for x in band)
        if not (0.0 <= lo <= hi <= 1.0):
            raise ValueError("band wants 0 <= lo <= hi <= 1, not %r" % (band,))
        if weight not in WEIGHTS and not callable(weight):
            raise ValueError("weight is %s or a callable, not %r" % (", ".join(WEIGHTS), weight))
        self.pool = pool
        self.names = [_name_of(spec) for spec in pool]
        self.band = (lo, hi)
        self.min_attempts = int(min_attempts)
        self.max_zero_variance = float(max_zero_variance)
        self.min_groups = int(min_groups)
        self.weight = weight
        if isinstance(focus, str):
            focus = re.compile(focus)
        self.focus = focus
        self.min_weight = float(min_weight)
        self.rng = random.Random(seed)
        self.stats = {}             # task name -> the broker's statistics
        self.fallback = False       # the last sample() found no eligible task and used them all

    def refresh(self, source):
        """Take the task statistics: a kgym Client (its tasks() query), or
        a list of statistics dicts (client.tasks(), `kgym tasks` lines)."""
        rows = source.tasks(min_attempts=0) if hasattr(source, "tasks") else source
        self.stats = {r["task"]: r for r in rows if isinstance(r, dict) and isinstance(r.get("task"), str)}
        return self

    def _why_not(self, stats):
        """Why a task is left out ("" when it is kept)."""
        if not stats:
            return ""
        window = _num(stats.get("window")) or 0
        if window < self.min_attempts:
            return ""
        rate = _num(stats.get("pass_rate"))
        lo, hi = self.band
        if rate is None or not lo <= rate <= hi:
            return "pass rate %s outside [%g, %g]" % ("unknown" if rate is None else "%.2f" % rate, lo, hi)
        groups = _num(stats.get("groups")) or 0
        zero = _num(stats.get("zero_variance_groups")) or 0
        if groups >= self.min_groups and zero / groups > self.max_zero_variance:
            return "%d of its last %d groups had no reward spread" % (zero, groups)
        return ""

    def _weight(self, stats):
        if callable(self.weight):
            w = self.weight(stats or {})
        elif self.weight == "uniform":
            w = 1.0
        else:
            ops = (stats or {}).get("operators") or []
            shares = [(o.get("name", ""), _num(o.get("share")) or 0.0) for o in ops if isinstance(o, dict)]
            if self.focus is None:
                w = max((s for _, s in shares), default=0.0)
            elif hasattr(self.focus, "search"):
                w = sum(s for n, s in shares if self.focus.search(n))
            else:
                w = sum(s for n, s in shares if n in self.focus)
        w = _num(w)
        return max(self.min_weight, w if w is not None else 0.0)

    def report(self):
        """Per pool task: task, pass_rate, reward_std, groups,
        zero_variance_groups, operators, eligible, why (when not), weight."""
        out = []
        for name in self.names:
            s = self.stats.get(name) or {}
            why = self._why_not(s)
            out.append({"task": name, "window": s.get("window", 0), "pass_rate": s.get("pass_rate"),
                        "reward_std": s.get("reward_std"), "groups": s.get("groups", 0),
                        "zero_variance_groups": s.get("zero_variance_groups", 0),
                        "operators": s.get("operators"), "eligible": not why, "why": why,
                        "weight": self._weight(s)})
        return out

    def weights(self):
        """{task name: weight} of the eligible tasks (every task when none is)."""
        rows = self.report()
        kept = [r for r in rows if r["eligible"]]
        self.fallback = not kept
        return {r["task"]: r["weight"] for r in (kept or rows)}

    def sample(self, n):
        """n task specs from the pool: eligible ones by weight, each at most
        once while there are enough (then with repeats)."""
        weights = self.weights()
        index = {name: i for i, name in enumerate(self.names)}
        names = list(weights)
        w = [weights[k] for k in names]
        if n > len(names):
            picked = self.rng.choices(names, weights=w, k=n)
        else:
            picked = []
            for _ in range(n):
                k = self.rng.choices(range(len(names)), weights=w, k=1)[0]
                picked.append(names.pop(k))
                w.pop(k)
        return [self.pool[index[name]] for name in picked]
