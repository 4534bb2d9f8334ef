"""Adapters, driven by stand-ins that call them the way veRL, TRL and
OpenRLHF do (none of the frameworks is installed here)."""

import asyncio
import inspect
import json
import os
import sys
import types
import unittest
import uuid
from collections import defaultdict
from types import SimpleNamespace
from unittest import mock

import _env
import kgym
from kgym.adapters import _common, openrlhf, trl, verl
from kgym.store import InProcessStore, default_store

MATMUL = "cpu/matmul_f32"
RMS = "cpu/rmsnorm_f32"


def completions_for(task, *names):
    cands = kgym.example_candidates(task)
    return [_env.completion_of(cands[n]) for n in names]


# ---------------------------------------------------------------- veRL stand-ins

class _Function:
    def __init__(self, d):
        self.name = d["name"]
        self.description = d.get("description")
        self.parameters = d.get("parameters")


class OpenAIFunctionToolSchema:
    """verl.tools.schemas.OpenAIFunctionToolSchema (a pydantic model upstream)."""

    def __init__(self, d):
        self.type = d["type"]
        self.function = _Function(d["function"])
        self._d = d

    @classmethod
    def model_validate(cls, d):
        return cls(d)

    def model_dump(self, **kw):
        return self._d


class ToolResponse:
    def __init__(self, text=None, image=None, video=None):
        self.text, self.image, self.video = text, image, video


class BaseTool:
    """verl.tools.base_tool.BaseTool, as documented upstream."""

    def __init__(self, config, tool_schema):
        self.config = config
        self.tool_schema = tool_schema or self.get_openai_tool_schema()
        assert self.tool_schema is not None, "Tool schema is not set!"
        self.name = self.tool_schema.function.name

    def get_openai_tool_schema(self):
        return self.tool_schema

    async def create(self, instance_id=None, **kwargs):
        return instance_id or "x", ToolResponse()

    async def execute(self, instance_id, parameters, **kwargs):
        return ToolResponse(text="Updated the tool state."), 0.0, {}

    async def calc_reward(self, instance_id, **kwargs):
        return 0.0

    async def release(self, instance_id, **kwargs):
        pass


class FakeVerl:
    """Install verl.tools.base_tool / verl.tools.schemas stand-ins."""

    def __enter__(self):
        names = {"verl": types.ModuleType("verl"), "verl.tools": types.ModuleType("verl.tools"),
                 "verl.tools.base_tool": types.ModuleType("verl.tools.base_tool"),
                 "verl.tools.schemas": types.ModuleType("verl.tools.schemas")}
        names["verl.tools.base_tool"].BaseTool = BaseTool
        names["verl.tools.schemas"].OpenAIFunctionToolSchema = OpenAIFunctionToolSchema
        names["verl.tools.schemas"].ToolResponse = ToolResponse
        names["verl"].tools = names["verl.tools"]
        names["verl.tools"].base_tool = names["verl.tools.base_tool"]
        names["verl.tools"].schemas = names["verl.tools.schemas"]
        self.saved = {k: sys.modules.get(k) for k in names}
        sys.modules.update(names)
        verl._reset_for_tests()
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
        verl._reset_for_tests()


def naive_reward_manager(compute_score, samples, **reward_kwargs):
    """What veRL's NaiveRewardManager does with a custom compute_score."""
    scores, extra = [], defaultdict(list)
    for s in samples:
        score = compute_score(data_source=s["data_source"], solution_str=s["response"],
                              ground_truth=s["reward_model"]["ground_truth"],
                              extra_info=s.get("extra_info"), **reward_kwargs)
        if isinstance(score, dict):
            for k, v in score.items():
                extra[k].append(v)
            score = score["score"]
        scores.append(score)
    return scores, extra


class Verl(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = _env.cluster()
        cls.client = kgym.Client(cls.cluster.endpoint)
        kgym.set_default_client(cls.client)

    @classmethod
    def tearDownClass(cls):
        kgym.set_default_client(None)
        cls.client.close()

    def samples(self):
        task_json = json.dumps(kgym.resolve_task(MATMUL))
        task_dir = os.path.join(str(kgym.examples_dir()), "cpu", "rmsnorm_f32")
        good, bad = completions_for(MATMUL, "naive", "tail_bug")
        rms_err, = completions_for(RMS, "compile_error")
        kg = {"kgym": {"eval": dict(_env.FAST)}}
        return [
            {"data_source": "kgym", "response": good, "reward_model": {"ground_truth": MATMUL}, "extra_info": kg},
            {"data_source": "kgym", "response": bad, "reward_model": {"ground_truth": task_json}, "extra_info": kg},
            {"data_source": "kgym", "response": rms_err, "reward_model": {"ground_truth": task_dir}, "extra_info": kg},
            {"data_source": "kgym", "response": "no idea", "reward_model": {"ground_truth": None},
             "extra_info": {"task": MATMUL, "index": 3}},
            {"data_source": "kgym", "response": good, "reward_model": {"ground_truth": "no/such/task"}, "extra_info": None},
        ]

    def check(self, scores, extra):
        self.assertEqual(len(scores), 5)
        self.assertGreater(scores[0], 0)                         # ok
        self.assertEqual(scores[1], -0.5)                        # incorrect
        self.assertEqual(scores[2], -1.0)                        # compile_error
        self.assertEqual(scores[3], -1.0)                        # no kernel: format score
        self.assertEqual(scores[4], 0.0)                         # no task: missing score
        self.assertTrue(all(len(v) == 5 for v in extra.values()), {k: len(v) for k, v in extra.items()})
        self.assertEqual(extra["acc"], [1.0, 0.0, 0.0, 0.0, 0.0])
        self.assertEqual(extra["kgym_valid"], [1.0, 1.0, 1.0, 0.0, 0.0])
        self.assertEqual(extra["kgym_format_error"], [0.0, 0.0, 0.0, 1.0, 0.0])
        for values in extra.values():
            self.assertTrue(all(isinstance(v, float) for v in values))

    def test_compute_score(self):
        scores, extra = naive_reward_manager(verl.compute_score, self.samples())
        self.check(scores, extra)

    def test_compute_score_batch(self):
        samples = self.samples()
        # BatchRewardManager: keyword lists, plus config reward_kwargs.
        out = verl.compute_score_batch(
            data_sources=[s["data_source"] for s in samples],
            solution_strs=[s["response"] for s in samples],
            ground_truths=[s["reward_model"]["ground_truth"] for s in samples],
            extra_infos=[s["extra_info"] for s in samples], format_score=-1.0)
        extra = defaultdict(list)
        for d in out:
            for k, v in d.items():
                extra[k].append(v)
        self.check([d["score"] for d in out], extra)

    def test_compute_score_async(self):
        samples = self.samples()

        async def reward_loop():     # veRL's reward loop: awaited per sample, extra kwargs
            return await asyncio.gather(*[verl.compute_score_async(
                data_source=s["data_source"], solution_str=s["response"],
                ground_truth=s["reward_model"]["ground_truth"], extra_info=s["extra_info"],
                reward_router_address=None, reward_model_tokenizer=None) for s in samples])

        self.assertTrue(inspect.iscoroutinefunction(verl.compute_score_async))
        out = asyncio.run(reward_loop())
        extra = defaultdict(list)
        for d in out:
            for k, v in d.items():
                extra[k].append(v)
        self.check([d["score"] for d in out], extra)

    def test_tool_agent_loop(self):
        """veRL's ToolAgentLoop: a tool instance per call (create with
        create_kwargs, execute with agent_data, release), state per trajectory."""
        store = InProcessStore()
        good, bad = completions_for(MATMUL, "optimised", "tail_bug")
        with FakeVerl():
            cls = verl.KgymTool
            self.assertTrue(issubclass(cls, BaseTool))
            cls.store = store
            try:
                schema = OpenAIFunctionToolSchema.model_validate(verl.TOOL_SCHEMA)
                config = {"type": "native", "client": self.client, "eval": dict(_env.FAST),
                          "reward": {"clip": 2.0}, "final_reward": "best", "max_attempts": 3}
                tool = cls(config=config, tool_schema=schema)
                default_schema_tool = cls(config={}, tool_schema=None)
                self.assertEqual(default_schema_tool.name, "submit_kernel")
                agent_data = SimpleNamespace(request_id="req-1")

                async def call(code):
                    iid, created = await tool.create(create_kwargs={"task": MATMUL})
                    self.assertIsInstance(created, ToolResponse)
                    try:
                        return await tool.execute(iid, {"code": code}, agent_data=agent_data)
                    finally:
                        await tool.release(iid)

                async def trajectory():
                    outs = [await call(c) for c in ("no code at all", bad, good, good)]
                    return outs, await tool.calc_reward("any", agent_data=agent_data)

                outs, final = asyncio.run(trajectory())
            finally:
                cls.store = None
        (r0, s0, m0), (r1, s1, m1), (r2, s2, m2), (r3, s3, m3) = outs
        self.assertIn("no fenced code block", r0.text)
        self.assertEqual(s0, -1.0)
        self.assertIn("incorrect", r1.text)
        self.assertEqual(s1, -0.5)
        self.assertIn("status: ok", r2.text)
        self.assertGreater(s2, 0)
        self.assertEqual(set(m0), set(m2))
        self.assertIn("No submissions left", r3.text)
        self.assertEqual(final, s2)
        state = store.get("req-1")
        self.assertEqual([a["status"] for a in state["attempts"]], ["invalid", "incorrect", "ok"])
        self.assertEqual(state["task"], MATMUL)

    def test_tool_without_verl(self):
        """No veRL importable: a duck-typed tool, one instance per trajectory
        (the older rollout), str responses."""
        verl._reset_for_tests()
        good, = completions_for(MATMUL, "naive")
        store = InProcessStore()
        cls = verl.KgymTool
        cls.store = store
        try:
            tool = cls({"client": self.client, "check_only": True, "step_reward": "improvement"}, None)

            async def run():
                iid = await tool.create("traj-9", ground_truth=MATMUL)
                text, step, _ = await tool.execute(iid, json.dumps({"code": good}))
                reward = await tool.calc_reward(iid)
                await tool.release(iid)
                return iid, text, step, reward

            iid, text, step, reward = asyncio.run(run())
        finally:
            cls.store = None
            verl._reset_for_tests()
        self.assertEqual(iid, "traj-9")
        self.assertIsInstance(text, str)
        self.assertIn("status: ok", text)
        self.assertEqual(step, reward)
        self.assertIsNone(store.get("traj-9"))          # released with its instance

    def test_tool_broker_store_across_workers(self):
        """store="broker": a trajectory's second turn is served by another
        tool instance on another Client (another rollout worker) and sees
        the first turn's attempt."""
        good, bad = completions_for(MATMUL, "naive", "tail_bug")
        other = kgym.Client(self.cluster.endpoint)
        rid = "req-%s" % uuid.uuid4().hex
        agent_data = SimpleNamespace(request_id=rid)
        try:
            with FakeVerl():
                cls = verl.KgymTool
                schema = OpenAIFunctionToolSchema.model_validate(verl.TOOL_SCHEMA)
                base = {"type": "native", "eval": dict(_env.CHECK), "max_attempts": 3,
                        "step_reward": "improvement"}
                worker1 = cls(config=dict(base, client=self.client), tool_schema=schema,
                              store="broker")
                worker2 = cls(config=dict(base, client=other, store="broker"), tool_schema=schema)
                self.assertIsInstance(worker1._store, kgym.BrokerStore)
                self.assertIs(worker1._store.client, self.client)
                self.assertIs(worker2._store.client, other)

                async def turn(tool, code):
                    iid, _ = await tool.create(create_kwargs={"task": MATMUL})
                    try:
                        return await tool.execute(iid, {"code": code}, agent_data=agent_data)
                    finally:
                        await tool.release(iid)

                async def trajectory():
                    first = await turn(worker1, bad)
                    second = await turn(worker2, good)
                    return first, second, await worker1.calc_reward("x", agent_data=agent_data)

                (r1, s1, _), (r2, s2, _), final = asyncio.run(trajectory())
        finally:
            other.close()
        self.assertIn("incorrect", r1.text)
        self.assertIn("(submission 1 of 3)", r1.text)
        self.assertEqual(s1, -0.5)
        self.assertIn("status: ok", r2.text)
        self.assertIn("(submission 2 of 3)", r2.text)         # worker2 saw worker1's attempt
        self.assertGreater(s2, 0)                             # improvement over -0.5 ...
        self.assertEqual(final, 1.0)                          # check_only: ok scores 1.0
        self.assertEqual(s2, final - (-0.5))                  # ... is score - best before
        store = kgym.BrokerStore(self.client)
        state = store.get(rid)
        self.assertEqual([a["status"] for a in state["attempts"]], ["incorrect", "ok"])
        self.assertEqual(state["task"], MATMUL)
        self.assertEqual(len(self.client.jobs(trajectory=rid)), 2)
        store.close(rid)

    def test_tool_store_from_environment(self):
        """$KGYM_TRAJECTORY_STORE=broker: a tool with no store setting keeps
        its state at the broker; unset, in this process."""
        with FakeVerl():
            cls = verl.KgymTool
            with mock.patch.dict(os.environ, {"KGYM_TRAJECTORY_STORE": "broker"}):
                tool = cls(config={"client": self.client}, tool_schema=None)
            self.assertIsInstance(tool._store, kgym.BrokerStore)
            self.assertIs(tool._store.client, self.client)
            with mock.patch.dict(os.environ, {"KGYM_TRAJECTORY_STORE": ""}):
                tool = cls(config={"client": self.client}, tool_schema=None)
            self.assertIs(tool._store, default_store())
            with mock.patch.dict(os.environ, {"KGYM_TRAJECTORY_STORE": "broker"}):
                tool = cls(config={"client": self.client, "store": "memory"}, tool_schema=None)
            self.assertIs(tool._store, default_store())


# ---------------------------------------------------------------- TRL

def trl_call(func, prompts, completions, **columns):
    """How GRPOTrainer calls a reward function (async ones on an event loop)."""
    kwargs = dict(prompts=prompts, completions=completions,
                  completion_ids=[[1, 2, 3]] * len(completions),
                  trainer_state=SimpleNamespace(global_step=5), **columns)
    if inspect.iscoroutinefunction(func):
        return asyncio.run(func(**kwargs))
    return func(**kwargs)


class Trl(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = _env.cluster()
        cls.client = kgym.Client(cls.cluster.endpoint)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_reward_func(self):
        logged = {}
        func = trl.make_reward_func(self.client, log_metric=lambda k, v: logged.__setitem__(k, v),
                                    **_env.FAST)
        self.assertTrue(inspect.iscoroutinefunction(func))
        self.assertEqual(func.__name__, "kgym_reward")
        good, bad = completions_for(MATMUL, "optimised", "tail_bug")
        prompts = ["write matmul"] * 4
        rewards = trl_call(func, prompts, [good, bad, "nothing", good],
                           task=[MATMUL, MATMUL, MATMUL, "no/such/task"])
        self.assertEqual(len(rewards), 4)
        self.assertGreater(rewards[0], 0)
        self.assertEqual(rewards[1:], [-0.5, -1.0, None])
        self.assertEqual(logged["kgym/pass_rate"], 0.25)
        self.assertIn("kgym/infra_error_rate", logged)
        # Conversational format.
        conv = [[{"role": "assistant", "content": good}]]
        self.assertGreater(trl_call(func, [[{"role": "user", "content": "x"}]], conv, task=[MATMUL])[0], 0)

    def test_environment_factory(self):
        factory = trl.make_environment(client=self.client, max_attempts=2, job_opts=_env.CHECK)
        env = factory()                                       # TRL: no arguments
        public = {n for n, v in inspect.getmembers(env) if callable(v) and not n.startswith("_")}
        self.assertEqual(public, {"reset", "submit_kernel", "get_reward"})
        doc = inspect.getdoc(env.submit_kernel)
        self.assertIn("Args:", doc)
        self.assertIn("code:", doc)
        self.assertEqual(inspect.signature(env.submit_kernel).parameters["code"].annotation, str)
        self.assertIsNone(env.reset(prompt=[{"role": "user", "content": "x"}], task=MATMUL))
        self.assertEqual(env.get_reward(), -1.0)              # nothing submitted yet
        good, bad = completions_for(MATMUL, "naive", "tail_bug")
        self.assertIn("incorrect", env.submit_kernel(code=bad))
        self.assertIn("status: ok", env.submit_kernel(code=good))
        self.assertGreater(env.get_reward(), 0)
        self.assertEqual(env.reward, env.get_reward())
        with self.assertRaises(ValueError):
            env.submit_kernel(code=good)
        env.reset(task=MATMUL)
        self.assertEqual(env.get_reward(), -1.0)
        with self.assertRaises(TypeError):
            trl.make_environment(nonsense=1)

    def test_environment_broker_store(self):
        """store="broker": the rollout's state is kept at the broker from
        reset() to the next reset(), readable by another client."""
        factory = trl.make_environment(client=self.client, max_attempts=2, job_opts=_env.CHECK,
                                       store="broker")
        env = factory()
        env.reset(task=MATMUL)
        tid = env.trajectory_id
        good, bad = completions_for(MATMUL, "naive", "tail_bug")
        env.submit_kernel(code=bad)
        env.submit_kernel(code=good)
        other = kgym.Client(self.cluster.endpoint)
        try:
            state = kgym.BrokerStore(other).get(tid)
            self.assertEqual([a["status"] for a in state["attempts"]], ["incorrect", "ok"])
            self.assertEqual((state["best_score"], state["task"]), (env.get_reward(), MATMUL))
            env.reset(task=MATMUL)                            # the old rollout is forgotten
            self.assertNotEqual(env.trajectory_id, tid)
            self.assertIsNone(kgym.BrokerStore(other).get(tid))
            self.assertEqual(kgym.BrokerStore(other).get(env.trajectory_id)["attempts"], [])
        finally:
            other.close()
        plain = trl.make_environment(client=self.client)()    # no store: nothing kept
        with mock.patch.dict(os.environ, {"KGYM_TRAJECTORY_STORE": ""}):
            plain.reset(task=MATMUL)
        self.assertIsNone(kgym.BrokerStore(self.client).get(plain.trajectory_id))


# ---------------------------------------------------------------- OpenRLHF

class OpenRlhf(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = _env.cluster()
        cls.client = kgym.Client(cls.cluster.endpoint)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_reward_func(self):
        good, bad = completions_for(MATMUL, "naive", "tail_bug")
        prompts = ["<|user|>write matmul<|assistant|>"] * 3
        queries = [p + r for p, r in zip(prompts, (good, bad, "hmm"))]
        labels = [MATMUL] * 3
        out = openrlhf.reward_func(queries, prompts, labels, client=self.client, eval=_env.FAST)
        try:
            import torch  # noqa: F401
            out = out.tolist()
        except ImportError:
            self.assertIsInstance(out, list)
        self.assertGreater(out[0], 0)
        self.assertEqual(out[1:], [-0.5, -1.0])
        d = openrlhf.reward_func_dict(queries, prompts, labels, client=self.client, eval=_env.CHECK)
        self.assertEqual(set(d), {"rewards", "scores", "extra_logs"})
        self.assertEqual(list(d["scores"]), [1.0, 0.0, 0.0])
        with self.assertRaises(ValueError):
            openrlhf.reward_func(queries, prompts, None, client=self.client)


class Common(unittest.TestCase):

    def test_task_spec_and_opts(self):
        self.assertEqual(_common.task_spec("gt", {"kgym": {"task": "a"}, "task": "b"}), "a")
        self.assertEqual(_common.task_spec("gt", {"task": "b"}), "b")
        self.assertEqual(_common.task_spec("gt", None), "gt")
        self.assertEqual(_common.task_spec("gt", {"kgym": json.dumps({"task": "j"})}), "j")
        opts = _common.job_opts({"kgym": {"eval": {"trials": 2}, "group": "g"}},
                                {"eval": {"timed": 3}, "reward_router_address": "x", "trials": 1})
        self.assertEqual(opts, {"eval": {"timed": 3, "trials": 2}, "trials": 1, "group": "g"})


if __name__ == "__main__":
    unittest.main()
