"""TRL adapter: reward functions (sync and async) and an environment for
GRPOTrainer.

Reward functions (GRPOTrainer(reward_funcs=[...])): TRL calls them with
keyword arguments prompts, completions, completion_ids, trainer_state and
every dataset column; they return one reward per completion.

    from kgym.adapters.trl import make_reward_func, make_sync_reward_func
    reward = make_sync_reward_func(task_column="task", trials=3)    # TRL >= 0.14
    reward = make_reward_func(task_column="task", trials=3)         # async: TRL >= 0.27

TRL runs a sync function in its training loop, and gathers async ones on an
event loop of its own (from TRL 0.27; older versions cannot await them).
kgym_reward and kgym_reward_sync are ready ones (default client, dataset
column "task"). When kgym's infrastructure fails a completion (status
internal_error), infra_reward decides: "raise" (the default) raises the failure's
KgymError, so a broker that is down stops the run instead of teaching it
nothing; None skips the sample (TRL ignores None rewards from 0.16); a
number scores it. Either way it is logged once (logger "kgym"). An invalid
job (no such task) gets missing_reward (None), logged once too.
log_metric(name, value) receives per-batch aggregates (kgym/pass_rate,
kgym/compile_rate, kgym/speedup_mean, ...) and the mean of every numeric
field of the results' profiles (kgym/profile/...); without one, TRL's own
(the log_metric keyword TRL passes from 1.0) is used when there is one.

Environment (GRPOTrainer(environment_factory=...), TRL >= 0.29):
KgymEnvironment, or a configured subclass from make_environment(...). TRL
creates it with no arguments, calls reset(**dataset_columns) at the start
of each rollout, exposes its one public method submit_kernel to the model
as a tool, and reads get_reward() (or env.reward in a reward function of
your own). The environment object holds its rollout's state; with a
trajectory store (KgymEnvironment.store, or $KGYM_TRAJECTORY_STORE) it also
keeps it there under env.trajectory_id, in the shape of kgym.store, from
reset() to the next reset(): with "broker", other processes can read it
from the broker.

TRL itself is never imported.
"""

import logging
import os
import uuid

from ..store import STORE_ENV, resolve_store
from . import _common as C

log = logging.getLogger("kgym")

__all__ = ["make_reward_func", "make_sync_reward_func", "kgym_reward", "kgym_reward_sync",
           "KgymEnvironment", "make_environment"]


class _Batch:
    """What a reward call needs, from TRL's keyword arguments."""

    def __init__(self, settings, prompts, completions, kwargs):
        completions = list(completions or [])
        n = len(completions)
        column = settings["task_column"]
        tasks = kwargs.get(column)
        if tasks is None:
            tasks = kwargs.get("ground_truth")
        if tasks is None:
            raise ValueError("kgym reward: no %r column (nor ground_truth) in the dataset to say "
                             "which task each completion is for" % column)
        tasks = list(tasks)
        if len(tasks) != n:
            raise ValueError("kgym reward: %d completions but %d tasks in column %r"
                             % (n, len(tasks), column))
        prompts = list(prompts) if prompts is not None else [None] * n
        step = getattr(kwargs.get("trainer_state"), "global_step", None)
        self.items = []
        for i, completion in enumerate(completions):
            opts = dict(settings["job_opts"])
            opts["group"] = C.group_id(step, prompts[i] if i < len(prompts) else None)
            if settings["timeout_s"] is not None:
                opts["timeout_s"] = settings["timeout_s"]
            self.items.append((tasks[i], completion, opts))
        self.settings = settings
        self.log_metric = settings["log_metric"] or kwargs.get("log_metric")

    def client(self):
        return C.get_client(self.settings["client"], self.settings["broker"])

    def rewards(self, results):
        s = self.settings
        C.check_failures(results, s["infra_reward"], s["missing_reward"], "kgym TRL reward")
        rewards = [C.score_of(r, s["format_reward"], s["missing_reward"], s["infra_reward"])
                   for r in results]
        if callable(self.log_metric):
            for key, value in C.batch_metrics(results).items():
                self.log_metric(key, value)
        return rewards


def _settings(client, broker, task_column, log_metric, format_reward, infra_reward, missing_reward,
              timeout_s, job_opts):
    if log_metric is not None and not callable(log_metric):
        raise TypeError("log_metric must be callable(name, value)")
    return dict(client=client, broker=broker, task_column=task_column, log_metric=log_metric,
                format_reward=format_reward,
                infra_reward=C.infra_policy(infra_reward, allow_none=True, name="infra_reward"),
                missing_reward=missing_reward, timeout_s=timeout_s, job_opts=dict(job_opts))


def make_reward_func(client=None, *, broker=None, task_column="task", log_metric=None,
                     format_reward=-1.0, infra_reward=C.RAISE, missing_reward=None, timeout_s=None,
                     name="kgym_reward", **job_opts):
    """An async TRL reward function (TRL >= 0.27). Its task for completion
    i is kwargs[task_column][i] (else kwargs["ground_truth"][i]): a task
    object, JSON text, a path or a bundled example name. job_opts (eval
    keys, eval=, reward=, tag=) go into every job; each job's group is the
    prompt's (plus the training step), so kgym can summarise GRPO groups.
    infra_reward: "raise", None (skip the sample) or a number."""
    settings = _settings(client, broker, task_column, log_metric, format_reward, infra_reward,
                         missing_reward, timeout_s, job_opts)

    async def reward_func(prompts=None, completions=None, **kwargs):
        batch = _Batch(settings, prompts, completions, kwargs)
        return batch.rewards(await batch.client().agrade_many(batch.items))

    reward_func.__name__ = reward_func.__qualname__ = name
    return reward_func


def make_sync_reward_func(client=None, *, broker=None, task_column="task", log_metric=None,
                          format_reward=-1.0, infra_reward=C.RAISE, missing_reward=None,
                          timeout_s=None, name="kgym_reward", **job_opts):
    """make_reward_func's twin as a plain function, for every TRL with
    GRPOTrainer (0.14 and later; None rewards need 0.16). The batch's jobs
    are all in flight at once; the call returns when the last ends."""
    settings = _settings(client, broker, task_column, log_metric, format_reward, infra_reward,
                         missing_reward, timeout_s, job_opts)

    def reward_func(prompts=None, completions=None, **kwargs):
        batch = _Batch(settings, prompts, completions, kwargs)
        return batch.rewards(batch.client().grade_many(batch.items))

    reward_func.__name__ = reward_func.__qualname__ = name
    return reward_func


_defaults = {}


async def kgym_reward(prompts=None, completions=None, **kwargs):
    """The default async TRL reward function: the default client
    ($KGYM_BROKER), the dataset column "task", infrastructure failures raise."""
    if "async" not in _defaults:
        _defaults["async"] = make_reward_func()
    return await _defaults["async"](prompts=prompts, completions=completions, **kwargs)


def kgym_reward_sync(prompts=None, completions=None, **kwargs):
    """kgym_reward as a plain function."""
    if "sync" not in _defaults:
        _defaults["sync"] = make_sync_reward_func()
    return _defaults["sync"](prompts=prompts, completions=completions, **kwargs)


class KgymEnvironment:
    """A TRL environment with one tool, submit_kernel. Configure by
    subclassing or with make_environment(...); class attributes:

      client         a kgym.Client (None: the default client, $KGYM_BROKER)
      broker         an endpoint, when client is None
      task_column    the dataset column holding the task ("task")
      job_opts       options for every job (eval keys, eval=, reward=)
      max_attempts   submissions per rollout (4); one more ends the rollout
      format_reward  reward of a rollout with no gradable kernel (-1.0)
      infra_reward   when kgym's infrastructure failed the submission that
                     decides the reward: "raise" (default: get_reward()
                     raises its KgymError), None (TRL skips it) or a number;
                     logged once either way
      missing_reward the score of an invalid job (None)
      reward_mode    "best" (default) or "last" submission
      instructions   text reset() returns to append to the prompt (None)
      store          a trajectory store kept up to date: a TrajectoryStore,
                     "broker" or "memory" (None: $KGYM_TRAJECTORY_STORE
                     when set, else none); the environment's own state
                     decides the reward, a store failure is logged only
    """

    client = None
    broker = None
    task_column = "task"
    job_opts = {}
    max_attempts = 4
    format_reward = -1.0
    infra_reward = C.RAISE
    missing_reward = None
    reward_mode = "best"
    instructions = None
    timeout_s = None
    store = None

    def __init__(self):
        self._task = None
        self._trajectory = None
        self._store = None
        self._scores = []
        self._results = []
        self.reward = None
        self.last_result = None

    def reset(self, **kwargs):
        task = kwargs.get(self.task_column)
        if task is None:
            task = kwargs.get("ground_truth")
        if self._store is not None and self._trajectory is not None:
            self._stored("close", self._trajectory)
        self._task = task
        self._trajectory = uuid.uuid4().hex
        self._scores = []
        self._results = []
        self.reward = None
        self.last_result = None
        self._store = self._resolve_store()
        if self._store is not None:
            self._stored("open", self._trajectory, task)
        return self.instructions

    @property
    def trajectory_id(self):
        """The current rollout's trajectory id (jobs carry it; the store keys
        the rollout's state by it)."""
        return self._trajectory

    def _resolve_store(self):
        if self.store is None and not os.environ.get(STORE_ENV):
            return None
        client, broker = self.client, self.broker
        return resolve_store(self.store, client=lambda: (
            None if client is None and not broker else C.get_client(client, broker)))

    def _stored(self, method, *args):
        try:
            return getattr(self._store, method)(*args)
        except Exception as exc:        # the store mirrors the rollout: never fail it
            log.warning("kgym: trajectory store %s(%s) failed: %s: %s", method, args[0],
                        type(exc).__name__, exc)
            return None

    def submit_kernel(self, code: str) -> str:
        """
        Compile, check and time a kernel for this task on kgym.

        Args:
            code: The kernel: a fenced ```cuda (or ```c) code block with the source, plus a ```json launch plan or `// kgym: launch kernel=NAME grid=... block=... args=...` comment lines.

        Returns:
            The verdict (ok, compile_error, incorrect, runtime_error, timeout), the reward and speedup, and the compiler or checker messages.
        """
        if self._task is None:
            raise ValueError("kgym: no task for this rollout (the dataset needs a %r column)"
                             % self.task_column)
        if len(self._scores) >= self.max_attempts:
            raise ValueError("No submissions left (%d used)." % self.max_attempts)
        client = C.get_client(self.client, self.broker)
        result = client.grade(self._task, code, raise_on_error=False, trajectory=self._trajectory,
                              timeout_s=self.timeout_s, **dict(self.job_opts))
        C.check_failures([result], None, self.missing_reward, "kgym TRL environment",
                         then="The model is told; get_reward() applies infra_reward")
        score = C.score_of(result, self.format_reward, self.missing_reward, None)
        self._scores.append(score)
        self._results.append(result)
        self.last_result = result
        self.reward = self._current()
        if self._store is not None:
            self._stored("record", self._trajectory, {
                "status": result.status, "reward": result.reward, "score": score,
                "speedup": result.speedup, "message": result.message, "job": result.job,
                "error": result.error})
        return result.feedback_text()

    def _current(self):
        """The reward now: None when it rests on an infrastructure failure
        (get_reward applies infra_reward)."""
        if not self._scores:
            return self.format_reward
        if self.reward_mode == "last":
            return self._scores[-1]
        valid = [s for s in self._scores if s is not None]
        return max(valid) if valid else None

    def _deciding_failure(self):
        """The infrastructure failure the reward rests on, or None."""
        if not self._results or self._current() is not None:
            return None
        looked = self._results[-1:] if self.reward_mode == "last" else self._results
        return next((r for r in looked if C.is_infra(r)), None)

    def get_reward(self):
        """The rollout's reward: the best (or last) submission's score; the
        format reward when nothing gradable was submitted. When it rests on
        an infrastructure failure: infra_reward ("raise": its KgymError)."""
        failure = self._deciding_failure()
        if failure is None:
            current = self._current()
            return self.missing_reward if current is None else current
        policy = C.infra_policy(self.infra_reward, allow_none=True, name="infra_reward")
        if policy == C.RAISE:
            raise type(C.error_for(failure))(
                "kgym TRL environment: this rollout has no reward: kgym's infrastructure failed "
                "its submission (%s: %s); set infra_reward to None or a number to go on without "
                "it" % (failure.error or failure.status, failure.message), failure)
        return policy


def make_environment(**settings):
    """A KgymEnvironment subclass with the given class attributes, for
    GRPOTrainer(environment_factory=make_environment(max_attempts=3, ...))."""
    unknown = [k for k in settings if not hasattr(KgymEnvironment, k) or k.startswith("_")]
    if unknown:
        raise TypeError("unknown setting(s): %s" % ", ".join(unknown))
    return type("KgymEnvironment", (KgymEnvironment,), dict(settings))
