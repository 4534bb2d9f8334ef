"""OpenRLHF adapter: a reward function for --remote_rm_url path/to/file.py
(and the answers of kgym.serve_rm, the HTTP route).

OpenRLHF loads the file and calls reward_func(queries, prompts, labels)
with queries = prompt + response texts, prompts, and labels from
--label_key. Here each label names the task (a task object as JSON text, a
path, or a bundled example name). Point --remote_rm_url at a file that
re-exports it:

    # kgym_reward.py
    from kgym.adapters.openrlhf import reward_func

reward_func returns the dict OpenRLHF reads since 0.8.3: "rewards" (one
per query: the score), "scores" (1.0 when correct, 0.0 otherwise: what its
dynamic filtering reads) and "extra_logs" (kgym's per-sample numbers,
kgym.adapters._common.info), each a torch float tensor when torch is
importable (it is wherever OpenRLHF runs), else a list of floats.
reward_func_tensor returns the bare tensor of rewards that OpenRLHF 0.8.2
and older read (`from kgym.adapters.openrlhf import reward_func_tensor as
reward_func`). reward_func_dict is reward_func (its old name).

Scores: the reward of a worker's verdict; format_score (-1.0) for a
completion with no gradable kernel; missing_score (0.0) for an invalid
job (no such task); when kgym's infrastructure fails a sample
(internal_error) infra_score decides: "raise" (default) raises its
KgymError, a number scores it; both are logged once.

Settings come from keyword arguments (client=, broker=, format_score=,
missing_score=, infra_score=, eval=, eval keys), else the environment:
KGYM_BROKER (endpoint), KGYM_FORMAT_SCORE, KGYM_INFRA_SCORE, KGYM_EVAL
(JSON object of eval keys). torch is imported only inside the functions.
"""

import json
import os

from ..result import Result
from . import _common as C

__all__ = ["reward_func", "reward_func_tensor", "reward_func_dict", "grade", "answer"]


def _response(query, prompt):
    if isinstance(query, str) and isinstance(prompt, str) and query.startswith(prompt):
        return query[len(prompt):]
    return query


def _setting(kw, key, env, default):
    value = kw.get(key)
    if value is None:
        value = os.environ.get(env) or default
    return value


def grade(queries, prompts, labels, **kw):
    """(results, scores) for a batch; raises an infrastructure failure
    unless infra_score is a number."""
    if labels is None:
        raise ValueError("kgym reward: no labels; pass --label_key naming the dataset field that "
                         "holds each prompt's task")
    queries = list(queries)
    labels = list(labels)
    if len(labels) != len(queries):
        raise ValueError("kgym reward: %d queries but %d labels" % (len(queries), len(labels)))
    client = C.get_client(kw.get("client"), kw.get("broker"))
    fmt = float(_setting(kw, "format_score", "KGYM_FORMAT_SCORE", -1.0))
    missing = float(kw.get("missing_score", 0.0))
    infra = C.infra_policy(_setting(kw, "infra_score", "KGYM_INFRA_SCORE", C.RAISE))
    opts = C.job_opts(None, kw)
    env_eval = os.environ.get("KGYM_EVAL")
    if env_eval and "eval" not in opts:
        try:
            opts["eval"] = json.loads(env_eval)
        except ValueError as exc:
            raise ValueError("KGYM_EVAL is not JSON: %s" % exc) from None
        if not isinstance(opts["eval"], dict):
            raise ValueError("KGYM_EVAL must be a JSON object of eval keys, like {\"trials\": 3}")
    prompts = list(prompts) if prompts is not None else [None] * len(queries)
    items = [(label, _response(q, p), opts) for q, p, label in zip(queries, prompts, labels)]
    results = client.grade_many(items)
    return results, C.scores(results, fmt, missing, infra, "kgym OpenRLHF reward")


def answer(queries, prompts, labels, **kw):
    """The dict form with plain lists: {"rewards", "scores", "extra_logs"}
    (what kgym.serve_rm sends as JSON)."""
    results, scores = grade(queries, prompts, labels, **kw)
    infos = [C.info(r, s) for r, s in zip(results, scores)]
    keys = [k for k in (infos[0] if infos else C.info(Result(), 0.0)) if k != "score"]
    return {"rewards": [float(s) for s in scores], "scores": [i["acc"] for i in infos],
            "extra_logs": {k: [i[k] for i in infos] for k in keys}}


def _tensor(values):
    try:
        import torch
    except ImportError:
        return [float(v) for v in values]
    return torch.tensor([float(v) for v in values], dtype=torch.float32)


def reward_func(queries, prompts, labels, **kw):
    """OpenRLHF's reward function (0.8.3 and later): the dict form."""
    d = answer(queries, prompts, labels, **kw)
    return {"rewards": _tensor(d["rewards"]), "scores": _tensor(d["scores"]),
            "extra_logs": {k: _tensor(v) for k, v in d["extra_logs"].items()}}


reward_func_dict = reward_func


def reward_func_tensor(queries, prompts, labels, **kw):
    """The bare tensor of rewards, for OpenRLHF 0.8.2 and older."""
    _, scores = grade(queries, prompts, labels, **kw)
    return _tensor(scores)
