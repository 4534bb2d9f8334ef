#!/usr/bin/env python3
"""A GRPO-style training loop against kgym, with no model.

The "policy" is a softmax over each task's bundled candidates
(examples/cpu/<task>/candidates). Each task's prompt is what a model would
be shown (kgym.prompt: the instruction, reference, shapes, target and the
answer format); every step the policy samples a group of G candidates per
task and renders each as a completion in that answer format (a fenced code
block plus a ```json launch plan), grades them all through a kgym
broker, computes group-normalised advantages (reward - group mean) / group
std, drops zero-variance groups (DAPO's dynamic sampling: every member
equal, no signal), and takes a REINFORCE step on the logits. Samples whose
reward is None (invalid, internal_error: not the policy's doing) are
masked out. Per step it prints reward mean/std, pass rate, dead groups and
jobs/s; the reward climbs as the policy learns to prefer the fast correct
kernels.

    examples/grpo_loop.py --local                     # starts a broker + CPU workers
    examples/grpo_loop.py --broker tcp://host:5555    # uses a running broker ($KGYM_BROKER)
    examples/grpo_loop.py --local --pool cuda --python /opt/torch/.venv/bin/python3
                                                      # the PyTorch pool (examples/pytorch)
                                                      # on a GPU worker: answers are ```python
                                                      # blocks defining ModelNew

--local takes kgym-broker and kgym-worker from --build-dir (default
$KGYM_BUILD_DIR, else build/).
"""

import argparse
import json
import math
import os
import random
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import kgym                                     # noqa: E402
from kgym.local import LocalCluster             # noqa: E402


def as_completion(candidate, lang):
    """A bundled candidate object rendered the way a model would answer."""
    if candidate.get("lang") == "python":
        return "Here is my ModelNew.\n\n```python\n%s\n```\n" % candidate["source"].rstrip("\n")
    plan = {k: v for k, v in candidate.items() if k not in ("source", "name", "lang")}
    return ("Here is my kernel.\n\n```%s\n%s\n```\n\nLaunch plan:\n\n```json\n%s\n```\n"
            % (lang, candidate["source"].rstrip("\n"), json.dumps(plan)))


def group_advantages(rewards, eps=1e-6):
    """(advantages, std) of one group; None rewards get advantage None."""
    valid = [r for r in rewards if r is not None]
    if len(valid) < 2:
        return [None] * len(rewards), 0.0
    mean = sum(valid) / len(valid)
    std = math.sqrt(sum((r - mean) ** 2 for r in valid) / len(valid))
    return [None if r is None else (r - mean) / (std + eps) for r in rewards], std


def pool_tasks(target, names, exclude=()):
    """The PyTorch pool's tasks for target (examples/pytorch/<task>/task.<target>.json):
    {name: (task object, {candidate: candidate object})}, every candidate its
    expected.json grades on target but the ones that hang (a policy that learns
    to hang is learning nothing but waiting)."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch")
    out = {}
    for name in sorted(os.listdir(root)):
        if names and name not in names:
            continue
        path = os.path.join(root, name, "task.%s.json" % target)
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            task = json.load(f)
        with open(os.path.join(root, name, "expected.json")) as f:
            expected = json.load(f).get(target, {})
        cands = {}
        for cand, status in expected.items():
            if cand in ("eval", "fast", "slow") or status == "timeout":
                continue
            if any(cand.startswith(prefix) for prefix in exclude):
                continue
            cpath = os.path.join(root, name, "candidates", cand + ".json")
            if os.path.isfile(cpath):
                with open(cpath) as f:
                    cands[cand] = json.load(f)
        if cands:
            out[name] = (task, cands)
    return out


def softmax_sample(rng, logits, k):
    names = list(logits)
    top = max(logits.values())
    weights = [math.exp(logits[n] - top) for n in names]
    return rng.choices(names, weights=weights, k=k)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--broker", default=os.environ.get("KGYM_BROKER"),
                       help="a running broker's client endpoint (default $KGYM_BROKER)")
    where.add_argument("--local", action="store_true", help="start a broker and CPU workers")
    ap.add_argument("--build-dir", help="meson build folder for --local")
    ap.add_argument("--workers", type=int, default=1, help="--local: CPU workers (default 1)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--group-size", "-G", type=int, default=8)
    ap.add_argument("--tasks", default="", help="comma-separated bundled tasks (default: every "
                    "cpu task)")
    ap.add_argument("--tasks-per-step", type=int, default=0, help="tasks sampled per step "
                    "(default: all)")
    ap.add_argument("--lr", type=float, default=0.5, help="policy step size")
    ap.add_argument("--eval-timeout", type=float, default=2.0, help="eval.timeout, seconds")
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--timed", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="one JSON object per step on stdout")
    ap.add_argument("--pool", metavar="TARGET", help="the PyTorch pool (examples/pytorch) on "
                    "TARGET (cpu or cuda) instead of the C examples")
    ap.add_argument("--python", help="--local --pool: the interpreter with torch the worker uses")
    ap.add_argument("--exclude", default="", help="--pool: comma-separated prefixes of candidates "
                    "to leave out (e.g. cuda_: no load_inline builds, whose first build takes a minute)")
    ap.add_argument("--show-prompt", action="store_true", help="print the first task's prompt "
                    "(what a model would be shown) before the first step")
    args = ap.parse_args(argv)
    if not args.local and not args.broker:
        ap.error("say where the broker is: --broker tcp://host:5555 (or $KGYM_BROKER), or --local")

    wanted = [t for t in args.tasks.split(",") if t]
    task_objects = {}
    if args.pool:
        found = pool_tasks(args.pool, wanted, [p for p in args.exclude.split(",") if p])
        tasks = list(found)
        task_objects = {t: found[t][0] for t in tasks}
        pools = {t: found[t][1] for t in tasks}
    else:
        tasks = wanted or kgym.list_examples("cpu")
        pools = {t: kgym.example_candidates(t) for t in tasks}
    if not tasks:
        ap.error("no tasks (are the bundled examples there?)")
    # What a model would be shown per task, and the fence its answer must use.
    prompts = {t: kgym.prompt(task_objects.get(t, t), format="json", gpu=None) for t in tasks}
    lang = {t: prompts[t]["answer"] for t in tasks}
    if args.show_prompt:
        print(kgym.prompt(task_objects.get(tasks[0], tasks[0]), gpu=None),
              file=sys.stderr if args.json else sys.stdout)
    logits = {t: {c: 0.0 for c in pools[t]} for t in tasks}
    rng = random.Random(args.seed)

    cluster = None
    if args.local:
        try:
            worker_args = ["--python", args.python] if args.python else []
            cluster = LocalCluster(workers=args.workers, build_dir=args.build_dir,
                                   backend=args.pool or "cpu", worker_args=worker_args,
                                   start_timeout_s=120.0).start()
        except (FileNotFoundError, RuntimeError) as exc:
            ap.error(str(exc))
        endpoint = cluster.endpoint
    else:
        endpoint = args.broker
    try:
        client = kgym.Client(endpoint, timeout_s=max(60.0, 20 * args.eval_timeout))
    except ValueError as exc:
        if cluster is not None:
            cluster.stop()
        ap.error(str(exc))
    eval_opts = {"timeout": args.eval_timeout, "trials": args.trials, "timed": args.timed,
                 "warmup": 1}
    history = []
    try:
        for step in range(1, args.steps + 1):
            chosen = tasks if not args.tasks_per_step else rng.sample(tasks, min(args.tasks_per_step, len(tasks)))
            batch = []                  # (task, candidate name)
            items = []
            for t in chosen:
                for name in softmax_sample(rng, logits[t], args.group_size):
                    batch.append((t, name))
                    # A chat rollout: the prompt's messages, then the policy's answer.
                    messages = [{"role": "system", "content": prompts[t]["system"]},
                                {"role": "user", "content": prompts[t]["user"]},
                                {"role": "assistant", "content": as_completion(pools[t][name], lang[t])}]
                    items.append({"task": task_objects.get(t, t), "candidate": messages,
                                  "group": "%d:%s" % (step, t), "group_size": args.group_size,
                                  "tag": name})
            t0 = time.monotonic()
            results = client.grade_many(items, eval=eval_opts)
            elapsed = time.monotonic() - t0

            dead = kept = 0
            update = {t: {} for t in chosen}
            for gi, t in enumerate(chosen):
                group = results[gi * args.group_size:(gi + 1) * args.group_size]
                names = [n for _, n in batch[gi * args.group_size:(gi + 1) * args.group_size]]
                advs, std = group_advantages([r.reward for r in group])
                if std == 0.0:
                    dead += 1           # DAPO dynamic sampling: no signal, drop the group
                    continue
                for name, adv in zip(names, advs):
                    if adv is not None:
                        kept += 1
                        update[t][name] = update[t].get(name, 0.0) + adv / args.group_size
            for t in chosen:            # REINFORCE on the softmax logits
                for name, g in update[t].items():
                    logits[t][name] += args.lr * g

            # The broker's own view of each group (its SUMMARY): a dead group
            # there is one with zero reward variance, as computed above.
            broker_dead = 0
            for t in chosen:
                try:
                    summary = client.group_summary("%d:%s" % (step, t), timeout_s=10)
                except kgym.KgymError:
                    summary = None
                if summary and summary.get("zero_variance"):
                    broker_dead += 1

            rewards = [r.reward for r in results if r.reward is not None]
            mean = sum(rewards) / len(rewards) if rewards else float("nan")
            std = (math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
                   if rewards else float("nan"))
            stats = {
                "step": step, "jobs": len(results), "seconds": round(elapsed, 3),
                "jobs_per_s": round(len(results) / elapsed, 2) if elapsed > 0 else None,
                "reward_mean": round(mean, 4), "reward_std": round(std, 4),
                "pass_rate": round(sum(1 for r in results if r.ok) / len(results), 4),
                "groups": len(chosen), "dead_groups": dead, "kept": kept,
                "prompt_chars": sum(len(prompts[t]["system"]) + len(prompts[t]["user"]) for t in chosen),
                "masked": sum(1 for r in results if r.reward is None),
                "broker_dead_groups": broker_dead,
                # Repeats of a candidate are answered by the broker, not graded again.
                "graded": sum(1 for r in results if not r.cached),
                "cached": sum(1 for r in results if r.cached and not r.coalesced),
                "coalesced": sum(1 for r in results if r.coalesced),
                "statuses": dict(Counter(r.status for r in results)),
            }
            history.append(stats)
            if args.json:
                print(json.dumps(stats), flush=True)
            else:
                print("step %(step)d: %(jobs)d jobs in %(seconds).2f s (%(jobs_per_s)s jobs/s)  "
                      "reward %(reward_mean).3f +- %(reward_std).3f  pass %(pass_rate).0f%%  "
                      "dead groups %(dead_groups)d/%(groups)d  kept %(kept)d  masked %(masked)d  "
                      "graded %(graded)d cached %(cached)d coalesced %(coalesced)d  "
                      % dict(stats, pass_rate=100 * stats["pass_rate"])
                      + " ".join("%s=%d" % kv for kv in sorted(stats["statuses"].items())),
                      flush=True)
    finally:
        client.close()
        if cluster is not None:
            cluster.stop()
    if not args.json:
        best = {t: max(logits[t], key=logits[t].get) for t in tasks}
        print("policy's favourite per task: " + ", ".join("%s=%s" % kv for kv in best.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
