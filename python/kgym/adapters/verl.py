"""veRL adapter: custom reward functions and a multi-turn tool.

Reward functions (veRL's custom_reward_function; docs/trainers.md has the
config):

    compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw)
    compute_score_async(...)          the same, for veRL's async reward loop
    compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kw)
                                      for reward_manager.name=batch

Each returns {"score": float, "acc": 0/1, "kgym_valid": 0/1, ...}: the same
numeric keys on every outcome (kgym.adapters._common.info), a list of them
for the batch form. The task comes from extra_info["kgym"]["task"], else
extra_info["task"], else ground_truth: a task object, JSON text, a path or
a bundled example name ("cpu/rmsnorm_f32"). Job options (eval, reward,
tag, group, trajectory, or eval keys like trials=) come from
custom_reward_function.reward_kwargs and, per sample, extra_info["kgym"].
Adapter options in reward_kwargs: broker (endpoint; default $KGYM_BROKER),
format_score (default -1.0), missing_score (invalid jobs, default 0.0),
infra_score (kgym's infrastructure failed: "raise", the default, raises
its KgymError; a number scores the sample instead; logged once either
way), timeout_s. Any other keyword veRL passes (reward_router_address,
...) is ignored.

Multi-turn tool: KgymTool, a veRL BaseTool (when verl is importable; a
duck-typed class with the same methods otherwise). Each `execute` grades
the submitted code and returns the feedback text and a step reward;
calc_reward gives the trajectory's best score (or its last, with
config final_reward: last). veRL's agent loop creates a tool instance per call,
so per-trajectory state (task, attempts, scores) lives in a
TrajectoryStore keyed by the trajectory: agent_data.request_id when veRL
passes it, else the instance id (rollouts that keep one instance per
trajectory). The store is chosen by KgymTool(store=...), else the tool
config's `store:`, else KgymTool.store, else $KGYM_TRAJECTORY_STORE: a
TrajectoryStore object, "memory" (kgym.store.default_store(), this
process; the default) or "broker" (kgym.BrokerStore on the tool's client:
the state lives at the broker, so the turns of one trajectory may be served
by different rollout workers).

veRL itself is imported only inside this module's functions and the tool
class, never by `import kgym`.
"""

import json

from ..client import KgymError
from ..store import resolve_store
from . import _common as C

__all__ = ["compute_score", "compute_score_async", "compute_score_batch", "KgymTool",
           "TOOL_SCHEMA"]


def _settings(kw):
    return dict(client=C.get_client(kw.get("client"), kw.get("broker")),
                format_score=float(kw.get("format_score", -1.0)),
                missing_score=float(kw.get("missing_score", 0.0)),
                infra_score=C.infra_policy(kw.get("infra_score", C.RAISE)),
                timeout_s=kw.get("timeout_s"))


def _scored(results, s):
    """veRL's dicts for results; raises an infrastructure failure unless
    infra_score is a number."""
    values = C.scores(results, s["format_score"], s["missing_score"], s["infra_score"],
                      "kgym veRL reward")
    return [C.info(r, v) for r, v in zip(results, values)]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):
    """veRL custom reward: grade one completion; a dict with "score"."""
    s = _settings(kw)
    result = s["client"].grade(C.task_spec(ground_truth, extra_info), solution_str,
                               raise_on_error=False, timeout_s=s["timeout_s"],
                               **C.job_opts(extra_info, kw))
    return _scored([result], s)[0]


async def compute_score_async(data_source, solution_str, ground_truth, extra_info=None, **kw):
    """compute_score for veRL's async reward loop (awaits on the running loop)."""
    s = _settings(kw)
    result = await s["client"].agrade(C.task_spec(ground_truth, extra_info), solution_str,
                                      raise_on_error=False, timeout_s=s["timeout_s"],
                                      **C.job_opts(extra_info, kw))
    return _scored([result], s)[0]


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos=None, **kw):
    """veRL batch reward (reward_manager: batch): a list of dicts, in order,
    every job in flight at once (bounded by the client's max_inflight)."""
    s = _settings(kw)
    n = len(solution_strs)
    extra_infos = list(extra_infos) if extra_infos is not None else [None] * n
    ground_truths = list(ground_truths) if ground_truths is not None else [None] * n
    items = []
    for sol, gt, ei in zip(solution_strs, ground_truths, extra_infos):
        opts = C.job_opts(ei, kw)
        if s["timeout_s"] is not None:
            opts["timeout_s"] = s["timeout_s"]
        items.append((C.task_spec(gt, ei), sol, opts))
    results = s["client"].grade_many(items)
    return _scored(results, s)


# ---------------------------------------------------------------- multi-turn tool

TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": "submit_kernel",
        "description": ("Compile, check and time a kernel for the current task on kgym. "
                        "Returns the verdict (ok, compile_error, incorrect, runtime_error, "
                        "timeout), the reward and speedup, and compiler or checker messages."),
        "parameters": {
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": ("The kernel: a fenced ```cuda (or ```c) block with the "
                                    "source, plus a ```json launch plan or `// kgym: launch` "
                                    "comments."),
                },
            },
            "required": ["code"],
        },
    },
}


def _verl_schemas():
    try:
        from verl.tools import schemas
        return schemas
    except ImportError:
        return None


class _Schema:
    """Stand-in for OpenAIFunctionToolSchema when veRL is not importable."""

    def __init__(self, data):
        self._data = data
        self.type = data.get("type")
        self.function = type("Function", (), dict(data.get("function", {})))()

    def model_dump(self, **kw):
        return dict(self._data)


class _KgymToolImpl:
    """The tool's behaviour; KgymTool mixes it into veRL's BaseTool.

    config keys (the tool's `config:` in veRL's tool YAML):
      broker          endpoint (default $KGYM_BROKER)
      eval, reward    job options (also any eval key: trials, timeout, ...)
      format_score    score of a submission with no gradable kernel (-1.0)
      missing_score   score of an invalid job (no such task, ...) (0.0)
      infra_score     when kgym's infrastructure fails a submission: the
                      model is told, the step reward is 0.0, the failure is
                      logged once; calc_reward of a trajectory with no
                      valid score and such a failure raises ("raise", the
                      default) or returns this number
      step_reward     "score" (default: the submission's score),
                      "improvement" (score minus the best so far, 0 when
                      not better), or "none"
      final_reward    "best" (default) or "last": what calc_reward returns
      max_attempts    submissions per trajectory (default 8)
      feedback_chars  cap on the feedback text (default 4000)
      store           "memory" (default) or "broker": where per-trajectory
                      state lives (kgym.store.resolve_store)
    create() takes the task as create_kwargs task=... (or ground_truth=...).
    """

    #  A TrajectoryStore, "broker" or "memory"; None: $KGYM_TRAJECTORY_STORE,
    #  else the process-wide in-process store.
    store = None

    def __init__(self, config=None, tool_schema=None, store=None):
        self.config = dict(config or {})
        if tool_schema is None:
            tool_schema = self.get_openai_tool_schema()
        base_init = getattr(super(), "__init__", None)
        if _BaseTool is not object:
            base_init(self.config, tool_schema)
        else:
            self.tool_schema = tool_schema
            self.name = tool_schema.function.name
        if store is None:
            store = self.config.get("store")
        if store is None:
            store = self.store
        self._store = resolve_store(store, client=self._store_client)
        self._instances = {}

    def get_openai_tool_schema(self):
        existing = getattr(self, "tool_schema", None)
        if existing is not None:
            return existing
        schemas = _verl_schemas()
        if schemas is not None and hasattr(schemas, "OpenAIFunctionToolSchema"):
            return schemas.OpenAIFunctionToolSchema.model_validate(TOOL_SCHEMA)
        return _Schema(TOOL_SCHEMA)

    # -- helpers

    def _cfg(self, key, default=None):
        return self.config.get(key, default)

    def _client(self):
        return C.get_client(self.config.get("client"), self._cfg("broker"))

    def _store_client(self):
        """The client a "broker" store uses: the tool's; None when that is
        the default client (the store then follows kgym.set_default_client)."""
        if self.config.get("client") is None and not self._cfg("broker"):
            return None
        return self._client()

    async def _stored(self, method, *args, **kw):
        """A store call: its awaitable form when it has one (BrokerStore
        talks to the broker without blocking the event loop)."""
        amethod = getattr(self._store, "a" + method, None)
        if amethod is not None:
            return await amethod(*args, **kw)
        return getattr(self._store, method)(*args, **kw)

    def _response(self, text):
        schemas = _verl_schemas()
        if schemas is not None and hasattr(schemas, "ToolResponse"):
            return schemas.ToolResponse(text=text)
        return text

    # -- BaseTool API

    @staticmethod
    def _trajectory_of(instance_id, kwargs):
        """veRL's agent loop makes a tool instance per call and passes
        agent_data (its request_id names the trajectory); older rollouts keep
        one instance per trajectory."""
        agent_data = kwargs.get("agent_data")
        rid = getattr(agent_data, "request_id", None)
        if rid is None and isinstance(agent_data, dict):
            rid = agent_data.get("request_id")
        return str(rid or kwargs.get("trajectory") or instance_id)

    async def create(self, instance_id=None, ground_truth=None, **kwargs):
        import uuid
        if instance_id is None:
            instance_id = str(uuid.uuid4())
        ck = dict(kwargs.pop("create_kwargs", None) or {})
        ck.update(kwargs)
        if ground_truth is not None:
            ck.setdefault("ground_truth", ground_truth)
        task = ck.get("task")
        if task is None:
            task = C.task_spec(ck.get("ground_truth"), ck.get("extra_info"))
        self._instances[instance_id] = {"task": task, "group": ck.get("group")}
        schemas = _verl_schemas()
        if schemas is not None and hasattr(schemas, "ToolResponse"):
            return instance_id, schemas.ToolResponse()
        return instance_id

    async def execute(self, instance_id, parameters, **kwargs):
        if isinstance(parameters, str):
            try:
                parameters = json.loads(parameters)
            except ValueError:
                parameters = {"code": parameters}
        if not isinstance(parameters, dict):
            parameters = {}
        code = next((parameters[k] for k in ("code", "kernel", "completion", "source")
                     if isinstance(parameters.get(k), str)), "")
        inst = self._instances.setdefault(instance_id, {"task": kwargs.get("task"), "group": None})
        trajectory = self._trajectory_of(instance_id, kwargs)
        inst["trajectory"] = trajectory
        state = await self._stored("get", trajectory)
        if state is None:
            info = {"group": inst["group"]} if inst.get("group") is not None else {}
            state = await self._stored("open", trajectory, inst["task"], **info)
        fmt = self._cfg("format_score", -1.0)
        missing = self._cfg("missing_score", 0.0)
        C.infra_policy(self._cfg("infra_score", C.RAISE))      # a bad setting says so now
        limit = int(self._cfg("max_attempts", 8))
        used = len(state["attempts"])
        if used >= limit:
            return self._response("No submissions left (%d used)." % limit), 0.0, {}
        task = state["task"] if state["task"] is not None else inst["task"]
        if task is None:
            return self._response("kgym: this trajectory has no task (give the tool task= in its "
                                  "create_kwargs)."), 0.0, {}
        client = self._client()
        opts = C.job_opts(None, self.config)
        opts.pop("trajectory", None)
        group = (state.get("info") or {}).get("group")
        if group is not None:
            opts["group"] = group
        result = await client.agrade(task, code, raise_on_error=False, trajectory=trajectory,
                                     timeout_s=self._cfg("timeout_s"), **opts)
        C.check_failures([result], None, missing, "kgym veRL tool", then="The model is told, the "
                         "step reward is 0.0; calc_reward applies infra_score")
        score = C.score_of(result, fmt, missing, None)
        best_before = state["best_score"]
        await self._stored("record", trajectory, {
            "status": result.status, "reward": result.reward, "score": score,
            "speedup": result.speedup, "message": result.message, "job": result.job,
            "error": result.error})
        mode = self._cfg("step_reward", "score")
        if mode == "none" or score is None:
            step = 0.0
        elif mode == "improvement":
            step = max(0.0, score - best_before) if best_before is not None else score
        else:
            step = score
        text = result.feedback_text(int(self._cfg("feedback_chars", 4000)))
        text += "\n(submission %d of %d)" % (used + 1, limit)
        return self._response(text), float(step), C.info(result, score)

    async def calc_reward(self, instance_id, **kwargs):
        inst = self._instances.get(instance_id) or {}
        trajectory = inst.get("trajectory") or self._trajectory_of(instance_id, kwargs)
        state = await self._stored("get", trajectory)
        if not state or not state["attempts"]:
            return float(self._cfg("format_score", -1.0))
        last = self._cfg("final_reward", "best") == "last"
        value = state["last_score"] if last else state["best_score"]
        if value is not None:
            return float(value)
        failed = [a for a in state["attempts"][-1:] if last] or state["attempts"]
        if any(a.get("status") == "internal_error" for a in failed):
            policy = C.infra_policy(self._cfg("infra_score", C.RAISE))
            if policy == C.RAISE:
                why = next(a for a in failed if a.get("status") == "internal_error")
                raise KgymError("kgym veRL tool: trajectory %s has no reward: kgym's infrastructure "
                                "failed its submission (%s: %s); set infra_score to a number to "
                                "score it instead" % (trajectory, why.get("error") or "internal_error",
                                                      why.get("message")))
            return policy
        return float(self._cfg("missing_score", 0.0))

    async def release(self, instance_id, **kwargs):
        """Forget the instance. Its trajectory's state is forgotten too when
        the instance was the trajectory (one instance per trajectory); with
        veRL's per-call instances it stays in the store for the next turn
        (InProcessStore forgets it after ttl_s, the broker when it needs the
        room, least recently used first)."""
        inst = self._instances.pop(instance_id, None) or {}
        if inst.get("trajectory", instance_id) == instance_id:
            await self._stored("close", instance_id)


_BaseTool = object
_tool_class = None


def _make_tool_class():
    global _BaseTool, _tool_class
    if _tool_class is None:
        try:
            from verl.tools.base_tool import BaseTool
        except ImportError:
            BaseTool = object
        _BaseTool = BaseTool
        _tool_class = type("KgymTool", (_KgymToolImpl, BaseTool), {
            "__module__": __name__, "__doc__": _KgymToolImpl.__doc__})
    return _tool_class


def __getattr__(name):
    # The tool class subclasses veRL's BaseTool, so it is built on first
    # access (veRL resolves "kgym.adapters.verl.KgymTool" with getattr).
    if name == "KgymTool":
        return _make_tool_class()
    raise AttributeError(name)


def _reset_for_tests():
    global _BaseTool, _tool_class
    _BaseTool, _tool_class = object, None

