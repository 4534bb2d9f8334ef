"""TRL adapter: an async reward function and an environment for GRPOTrainer.

Reward function (GRPOTrainer(reward_funcs=[...])): TRL calls it with
keyword arguments prompts, completions, completion_ids, trainer_state and
every dataset column; it returns one reward per completion, None for an
infrastructure failure (TRL ignores None rewards), so no sample is taught
by a kgym fault.

    from kgym.adapters.trl import make_reward_func
    reward = make_reward_func(task_column="task", log_metric=my_logger, trials=3)

kgym_reward is a ready one (default client, dataset column "task").
log_metric(name, value), when given, receives per-batch aggregates
(kgym/pass_rate, kgym/compile_rate, kgym/speedup_mean, ...) and the mean of
every numeric field of the results' profiles (kgym/profile/...).

Environment (GRPOTrainer(environment_factory=...)): KgymEnvironment, or a
configured subclass from make_environment(...). TRL creates it with no
arguments, calls reset(**dataset_columns) at the start of each rollout,
exposes its one public method submit_kernel to the model as a tool, and
reads get_reward() (or env.reward in a reward function of your own).
The environment object holds its rollout's state; with a trajectory store
(KgymEnvironment.store, or $KGYM_TRAJECTORY_STORE) it also keeps it there
under env.trajectory_id, in the shape of kgym.store, from reset() to the
next reset(): with "broker", other processes can read it from the broker.

TRL itself is never imported.
"""

import logging
import os
import uuid

from ..store import STORE_ENV, resolve_store
from . import _common as C

log = logging.getLogger("kgym")

__all__ = ["make_reward_func", "kgym_reward", "KgymEnvironment", "make_environment"]


def make_reward_func(client=None, *, broker=None, task_column="task", log_metric=None,
                     format_reward=-1.0, infra_reward=None, timeout_s=None, name="kgym_reward",
                     **job_opts):
    """An async TRL reward function. Its task for completion i is
    kwargs[task_column][i] (else kwargs["ground_truth"][i]): a task object,
    JSON text, a path or a bundled example name. job_opts (eval keys,
    eval=, reward=, tag=) go into every job; each job's group is the
    prompt's (plus the training step), so kgym can summarise GRPO groups."""

    async def reward_func(prompts=None, completions=None, **kwargs):
        completions = list(completions or [])
        n = len(completions)
        tasks = kwargs.get(task_column)
        if tasks is None:
            tasks = kwargs.get("ground_truth")
        if tasks is None:
            raise ValueError("kgym reward: no %r column (nor ground_truth) in the dataset to say "
                             "which task each completion is for" % task_column)
        tasks = list(tasks)
        prompts = list(prompts) if prompts is not None else [None] * n
        state = kwargs.get("trainer_state")
        step = getattr(state, "global_step", None)
        items = []
        for i, completion in enumerate(completions):
            opts = dict(job_opts)
            opts["group"] = C.group_id(step, prompts[i] if i < len(prompts) else None)
            if timeout_s is not None:
                opts["timeout_s"] = timeout_s
            items.append((tasks[i], completion, opts))
        c = C.get_client(client, broker)
        results = await c.agrade_many(items)
        rewards = [C.score_of(r, format_reward, infra_reward) for r in results]
        if log_metric is not None:
            for key, value in C.batch_metrics(results).items():
                log_metric(key, value)
        return rewards

    reward_func.__name__ = reward_func.__qualname__ = name
    return reward_func


async def kgym_reward(prompts=None, completions=None, **kwargs):
    """The default TRL reward function: the default client ($KGYM_BROKER),
    the dataset column "task", reward None for infrastructure failures."""
    global _default_func
    if _default_func is None:
        _default_func = make_reward_func()
    return await _default_func(prompts=prompts, completions=completions, **kwargs)


_default_func = None


class KgymEnvironment:
    """A TRL environment with one tool, submit_kernel. Configure by
    subclassing or with make_environment(...); class attributes:

      client         a kgym.Client (None: the default client, $KGYM_BROKER)
      broker         an endpoint, when client is None
      task_column    the dataset column holding the task ("task")
      job_opts       options for every job (eval keys, eval=, reward=)
      max_attempts   submissions per rollout (4); one more ends the rollout
      format_reward  reward of a rollout with no gradable kernel (-1.0)
      infra_reward   reward when kgym gives none (None: TRL ignores it)
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
    infra_reward = None
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
        score = C.score_of(result, self.format_reward, self.infra_reward)
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
        if not self._scores:
            return self.format_reward
        if self.reward_mode == "last":
            return self._scores[-1]
        valid = [s for s in self._scores if s is not None]
        return max(valid) if valid else self.infra_reward

    def get_reward(self):
        """The rollout's reward: the best (or last) submission's score; the
        format reward when nothing gradable was submitted."""
        return self._current()


def make_environment(**settings):
    """A KgymEnvironment subclass with the given class attributes, for
    GRPOTrainer(environment_factory=make_environment(max_attempts=3, ...))."""
    unknown = [k for k in settings if not hasattr(KgymEnvironment, k) or k.startswith("_")]
    if unknown:
        raise TypeError("unknown setting(s): %s" % ", ".join(unknown))
    return type("KgymEnvironment", (KgymEnvironment,), dict(settings))
