"""OpenRLHF adapter: a reward function for --remote_rm_url path/to/file.py.

OpenRLHF loads the file and calls reward_func(queries, prompts, labels)
with queries = prompt + response texts, prompts, and labels from
--label_key. Here each label names the task (a task object as JSON text, a
path, or a bundled example name). Point --remote_rm_url at a file that
re-exports it:

    # kgym_reward.py
    from kgym.adapters.openrlhf import reward_func

reward_func returns a torch float tensor when torch is importable, else a
list of floats (format_score for a completion with no kernel, 0.0 when
kgym gives no reward). reward_func_dict returns the dict form newer
OpenRLHF versions accept: {"rewards", "scores" (0/1 correct, for dynamic
filtering), "extra_logs"}.

Settings come from the environment: KGYM_BROKER (endpoint),
KGYM_FORMAT_SCORE (-1.0), KGYM_EVAL (JSON object of eval keys), or from
keyword arguments (client=, broker=, format_score=, missing_score=,
eval=...). torch is imported only inside the functions.
"""

import json
import os

from . import _common as C

__all__ = ["reward_func", "reward_func_dict", "grade"]


def _response(query, prompt):
    if isinstance(query, str) and isinstance(prompt, str) and query.startswith(prompt):
        return query[len(prompt):]
    return query


def grade(queries, prompts, labels, **kw):
    """(results, scores) for a batch."""
    if labels is None:
        raise ValueError("kgym reward: no labels; pass --label_key naming the dataset field that "
                         "holds each prompt's task")
    client = C.get_client(kw.get("client"), kw.get("broker"))
    fmt = float(kw.get("format_score", os.environ.get("KGYM_FORMAT_SCORE", -1.0)))
    missing = float(kw.get("missing_score", 0.0))
    opts = C.job_opts(None, kw)
    env_eval = os.environ.get("KGYM_EVAL")
    if env_eval and "eval" not in opts:
        opts["eval"] = json.loads(env_eval)
    prompts = list(prompts) if prompts is not None else [None] * len(queries)
    items = [(label, _response(q, p), opts) for q, p, label in zip(queries, prompts, labels)]
    results = client.grade_many(items)
    return results, [C.score_of(r, fmt, missing) for r in results]


def _tensor(values):
    try:
        import torch
    except ImportError:
        return [float(v) for v in values]
    return torch.tensor([float(v) for v in values], dtype=torch.float32)


def reward_func(queries, prompts, labels, **kw):
    """OpenRLHF reward function: one float per query."""
    _, scores = grade(queries, prompts, labels, **kw)
    return _tensor(scores)


def reward_func_dict(queries, prompts, labels, **kw):
    """The dict form: rewards, scores (1.0 when correct) and extra_logs."""
    results, scores = grade(queries, prompts, labels, **kw)
    infos = [C.info(r, s) for r, s in zip(results, scores)]
    extra = {k: _tensor([i[k] for i in infos]) for k in infos[0] if k != "score"} if infos else {}
    return {"rewards": _tensor(scores), "scores": _tensor([i["acc"] for i in infos]),
            "extra_logs": extra}
