"""How veRL, TRL and OpenRLHF call a reward function, restated from their
sources so the adapters can be tested without the frameworks.

None of the three is packaged for Debian 12 (apt-cache policy python3-trl,
python3-verl, python3-openrlhf: no candidate), and the tests run on Debian's
python3 with python3-* packages only, so each framework's calling code is
restated here in our own words: what it passes, how (sync, async, which
thread), and what it reads back. torch is replaced by plain lists and NaN.
Each function names the file, tag and commit it was read from; a framework
change that breaks an adapter shows up as a difference against these.

Sources (read from the public repositories):

OpenRLHF 0.11.0 (OpenRLHF/OpenRLHF, tag v0.11.0 and main at 3c3be62),
  openrlhf/utils/agent.py, SingleTurnAgentExecutor:
  - --remote_rm_url ending in ".py": the file is loaded with
    importlib.util.spec_from_file_location("reward_func", path) and its
    attribute `reward_func` is taken. Per generated sample it is called as
    reward_func([query], [prompt], [label]) (lists of one) through
    asyncio.to_thread; query is the decoded prompt + response.
  - any other URL: one aiohttp POST per sample, JSON body
    {"query": [query], "prompts": [prompt], "labels": [label]}, total
    timeout 180 s, raise_for_status(), response.json(); up to 5 tries.
  - of the answer (a dict either way) it reads rewards = get("rewards");
    scores = get("scores"), or rewards when that is None; extra_logs =
    get("extra_logs") or {}. Any exception is logged at INFO and the sample
    keeps reward None.
  openrlhf/trainer/ppo_utils/samples_generator.py: reward and score become
  torch.tensor([value]); each extra_logs value, when a tensor, is reduced
  to value.flatten()[0].item(), else torch.tensor([value]).
  The dict form is read since 0.8.3 (experience_maker.py
  update_samples_with_rewards: torch.cat of info["rewards"]); 0.8.2 and
  older read a bare tensor of rewards. Lists are accepted where tensors
  are since 0.8.11 (torch.as_tensor), extra_logs lists since 0.9.0.
  openrlhf/cli/serve_rm.py (its own HTTP reward model) answers
  {"rewards": [...], "scores": [...], "extra_logs": {"dummy_scores": [...]}}
  at POST /get_reward.

TRL 1.9.0 (huggingface/trl, tag v1.9.0), trl/trainer/grpo_trainer.py,
  GRPOTrainer._calculate_rewards:
  - keyword arguments: prompts, completions, completion_ids, every dataset
    column except prompt/completion/completion_ids as a list (one item per
    completion), trainer_state, log_extra(column, values), log_metric(name,
    value), and environments when an environment_factory is set.
  - a plain function is called in the training loop; a coroutine function
    (inspect.iscoroutinefunction) is awaited on an event loop TRL runs in a
    daemon thread, all async ones gathered, via run_coroutine_threadsafe.
  - None rewards become NaN (ignored in the weighted sum).
  Minimum versions (from the tags' grpo_trainer.py): reward functions
  0.14.0 (GRPOTrainer; prompts, completions and columns), None -> NaN
  0.16.0, trainer_state 0.20.0, async reward functions 0.27.0,
  environment_factory 0.29.0, log_metric 1.0.0.

veRL 0.8.0.dev (volcengine/verl, main at b178a3c):
  verl/trainer/ppo/reward.py get_custom_reward_fn: loads
  custom_reward_function.path as a module, takes the function named
  custom_reward_function.name, and binds reward_kwargs as extra keywords
  (a sync and an async wrapper).
  verl/workers/reward_manager/naive.py: per sample,
  compute_score(data_source=, solution_str=, ground_truth=, extra_info=);
  a dict answer gives score = result["score"] and every key goes to
  reward_extra_info (lists that must stay aligned across samples).
  verl/workers/reward_manager/batch.py: compute_score(data_sources=,
  solution_strs=, ground_truths=, extra_infos=) returns a list.
  verl/experimental/reward_loop/reward_manager/naive.py: a coroutine
  function is awaited, a plain one runs in the loop's executor; both may
  get reward_router_address= and reward_model_tokenizer= too.
"""

import asyncio
import functools
import importlib.util
import inspect
import json
import math
import threading
import urllib.error
import urllib.request
from collections import defaultdict


def load_function(path, name):
    """A function from a Python file by path (OpenRLHF's reward_func, veRL's
    custom_reward_function.path/name)."""
    spec = importlib.util.spec_from_file_location("reward_func", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


# ---------------------------------------------------------------- OpenRLHF 0.11.0

def _first(value):
    """samples_generator.py: one sample's value out of what came back."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    while isinstance(value, list):
        if len(value) != 1:
            raise AssertionError("one sample's value is %r" % (value,))
        value = value[0]
    return float(value)


def openrlhf_read(info):
    """What OpenRLHF takes from one answer: (reward, score, extra_logs)."""
    if not isinstance(info, dict):
        raise AssertionError("OpenRLHF reads a dict, got %s" % type(info).__name__)
    reward = info.get("rewards")
    score = info.get("scores")
    if score is None:
        score = reward
    extra = info.get("extra_logs") or {}
    return (None if reward is None else _first(reward), None if score is None else _first(score),
            {k: _first(v) for k, v in extra.items()})


def openrlhf_func_route(reward_func, samples):
    """SingleTurnAgentExecutor with a .py reward file: one call per sample,
    lists of one, each in a worker thread, all at once."""
    async def run():
        calls = [asyncio.to_thread(reward_func, [q], [p], [label]) for q, p, label in samples]
        return await asyncio.gather(*calls)
    return [openrlhf_read(info) for info in asyncio.run(run())]


def openrlhf_http_route(url, samples, timeout_s=180.0):
    """SingleTurnAgentExecutor with an HTTP reward model: one POST per
    sample; an HTTP error status raises (raise_for_status)."""
    out = []
    for q, p, label in samples:
        data = json.dumps({"query": [q], "prompts": [p], "labels": [label]}).encode()
        req = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            out.append(openrlhf_read(json.loads(resp.read())))
    return out


# ---------------------------------------------------------------- TRL 1.9.0

class _LoopThread:
    """TRL's daemon event loop for async reward functions."""

    def __enter__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        return self.loop

    def __exit__(self, *exc):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def trl_calculate_rewards(reward_funcs, inputs, prompts, completions, trainer_state=None,
                          environments=None, logged=None):
    """GRPOTrainer._calculate_rewards: rewards[i][f] for completion i and
    function f, None turned to NaN. logged collects log_metric calls."""
    keys = [k for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")]
    kwargs = {k: [example[k] for example in inputs] for k in keys}
    kwargs["trainer_state"] = trainer_state
    kwargs["log_extra"] = lambda column, values: None
    kwargs["log_metric"] = (lambda name, value: logged.append((name, value))) if logged is not None \
        else (lambda name, value: None)
    if environments is not None:
        kwargs["environments"] = environments
    completion_ids = [[1, 2, 3] for _ in completions]
    columns = [[math.nan] * len(reward_funcs) for _ in completions]
    asyncs = []
    for f, func in enumerate(reward_funcs):
        if inspect.iscoroutinefunction(func):
            asyncs.append((f, func))
            continue
        out = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
        for i, r in enumerate(out):
            columns[i][f] = math.nan if r is None else float(r)
    if asyncs:
        async def gather():
            return await asyncio.gather(*[func(prompts=prompts, completions=completions,
                                               completion_ids=completion_ids, **kwargs)
                                          for _, func in asyncs])
        with _LoopThread() as loop:
            outs = asyncio.run_coroutine_threadsafe(gather(), loop).result()
        for (f, _), out in zip(asyncs, outs):
            for i, r in enumerate(out):
                columns[i][f] = math.nan if r is None else float(r)
    return columns


# ---------------------------------------------------------------- veRL 0.8.0.dev

def verl_custom_reward_fn(path, name, reward_kwargs):
    """get_custom_reward_fn: the named function with reward_kwargs bound."""
    raw = load_function(path, name)
    if inspect.iscoroutinefunction(raw):
        async def bound(*args, **kw):
            return await raw(*args, **kw, **reward_kwargs)
        return bound
    return functools.partial(raw, **reward_kwargs)


def _collect(answers):
    scores, extra = [], defaultdict(list)
    for a in answers:
        if isinstance(a, dict):
            for k, v in a.items():
                extra[k].append(v)
            a = a["score"]
        scores.append(a)
    return scores, extra


def verl_naive(compute_score, samples):
    """NaiveRewardManager: (scores, reward_extra_info) over samples (dicts
    with data_source, response, reward_model.ground_truth, extra_info)."""
    return _collect(compute_score(data_source=s["data_source"], solution_str=s["response"],
                                  ground_truth=s["reward_model"]["ground_truth"],
                                  extra_info=s.get("extra_info")) for s in samples)


def verl_batch(compute_score, samples):
    """BatchRewardManager: one call with keyword lists."""
    return _collect(compute_score(
        data_sources=[s["data_source"] for s in samples],
        solution_strs=[s["response"] for s in samples],
        ground_truths=[s["reward_model"]["ground_truth"] for s in samples],
        extra_infos=[s.get("extra_info") for s in samples]))


def verl_reward_loop(compute_score, samples):
    """The experimental reward loop: awaited per sample (a plain function in
    the loop's executor), with the router keywords."""
    async def one(s):
        kw = dict(data_source=s["data_source"], solution_str=s["response"],
                  ground_truth=s["reward_model"]["ground_truth"], extra_info=s.get("extra_info"),
                  reward_router_address=None, reward_model_tokenizer=None)
        if inspect.iscoroutinefunction(compute_score):
            return await compute_score(**kw)
        return await asyncio.get_running_loop().run_in_executor(None, lambda: compute_score(**kw))

    async def run():
        return await asyncio.gather(*[one(s) for s in samples])
    return _collect(asyncio.run(run()))
