"""Adapters, driven the way veRL, TRL and OpenRLHF call them: their
calling code as recorded in _contracts.py (sources and versions there;
none of the frameworks is packaged for Debian), against a real broker and
CPU worker; and what each does when kgym's infrastructure fails."""

import asyncio
import inspect
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import types
import unittest
import urllib.error
import uuid
from types import SimpleNamespace
from unittest import mock

import _contracts
import _env
import kgym
from kgym.adapters import _common, openrlhf, trl, verl
from kgym.store import InProcessStore, default_store

MATMUL = "cpu/matmul_f32"
RMS = "cpu/rmsnorm_f32"


def completions_for(task, *names):
    cands = kgym.example_candidates(task)
    return [_env.completion_of(cands[n]) for n in names]


def shim(test, text):
    """A reward file as a user writes it (the frameworks load it by path)."""
    d = tempfile.TemporaryDirectory(prefix="kgym-shim-")
    test.addCleanup(d.cleanup)
    path = os.path.join(d.name, "kgym_reward.py")
    with open(path, "w") as f:
        f.write(text)
    return path


def unreachable_client(test):
    """A client whose broker is not there: every job an infrastructure failure."""
    client = kgym.Client("tcp://127.0.0.1:%d" % _env.free_port(), connect_timeout_s=0.3)
    test.addCleanup(client.close)
    _common._said.clear()                  # "logged once" starts again for this test
    return client


# ---------------------------------------------------------------- veRL stand-ins
#  verl/tools/base_tool.py and verl/tools/schemas.py (veRL 0.8.0.dev, b178a3c):
#  the parts KgymTool uses.

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

    def reward_fn(self, name):
        """veRL's get_custom_reward_fn over the documented one-line shim."""
        path = shim(self, "from kgym.adapters.verl import compute_score, compute_score_async, "
                          "compute_score_batch  # noqa: F401\n")
        return _contracts.verl_custom_reward_fn(path, name, {"broker": self.cluster.endpoint})

    def test_compute_score(self):
        self.check(*_contracts.verl_naive(self.reward_fn("compute_score"), self.samples()))

    def test_compute_score_batch(self):
        self.check(*_contracts.verl_batch(self.reward_fn("compute_score_batch"), self.samples()))

    def test_compute_score_async(self):
        self.assertTrue(inspect.iscoroutinefunction(verl.compute_score_async))
        fn = self.reward_fn("compute_score_async")
        self.assertTrue(inspect.iscoroutinefunction(fn))
        self.check(*_contracts.verl_reward_loop(fn, self.samples()))
        # A plain function in the reward loop runs in its executor.
        self.check(*_contracts.verl_reward_loop(self.reward_fn("compute_score"), self.samples()))

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

def trl_rewards(func, prompts, completions, logged=None, **columns):
    """GRPOTrainer._calculate_rewards with one reward function: its column."""
    n = len(completions)
    inputs = [dict({k: v[i] for k, v in columns.items()}, prompt=prompts[i]) for i in range(n)]
    out = _contracts.trl_calculate_rewards([func], inputs, prompts, completions,
                                           SimpleNamespace(global_step=5), logged=logged)
    return [None if math.isnan(row[0]) else row[0] for row in out]


class Trl(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = _env.cluster()
        cls.client = kgym.Client(cls.cluster.endpoint)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def check_reward_func(self, func):
        good, bad = completions_for(MATMUL, "optimised", "tail_bug")
        prompts = ["write matmul"] * 4
        rewards = trl_rewards(func, prompts, [good, bad, "nothing", good],
                              task=[MATMUL, MATMUL, MATMUL, "no/such/task"])
        self.assertEqual(len(rewards), 4)
        self.assertGreater(rewards[0], 0)
        self.assertEqual(rewards[1:], [-0.5, -1.0, None])             # no such task: skipped
        # Conversational format.
        conv = [[{"role": "assistant", "content": good}]]
        self.assertGreater(trl_rewards(func, [[{"role": "user", "content": "x"}]], conv,
                                       task=[MATMUL])[0], 0)

    def test_async_reward_func(self):
        logged = {}
        func = trl.make_reward_func(self.client, log_metric=lambda k, v: logged.__setitem__(k, v),
                                    **_env.FAST)
        self.assertTrue(inspect.iscoroutinefunction(func))
        self.assertEqual(func.__name__, "kgym_reward")
        self.check_reward_func(func)
        self.assertEqual(logged["kgym/pass_rate"], 1.0)                # the last batch: one ok
        self.assertIn("kgym/infra_error_rate", logged)

    def test_sync_reward_func(self):
        """The plain function (TRL 0.14 and later); TRL's own log_metric
        (1.0 and later) gets the batch metrics when none was given."""
        func = trl.make_sync_reward_func(self.client, name="kgym_sync", **_env.FAST)
        self.assertFalse(inspect.iscoroutinefunction(func))
        self.assertEqual(func.__name__, "kgym_sync")
        self.check_reward_func(func)
        logged = []
        good, = completions_for(MATMUL, "naive")
        trl_rewards(func, ["p", "p"], [good, "no kernel"], logged=logged, task=[MATMUL, MATMUL])
        self.assertIn(("kgym/pass_rate", 0.5), logged)
        self.assertIn(("kgym/format_error_rate", 0.5), logged)
        with self.assertRaises(ValueError):
            trl.make_sync_reward_func(self.client, infra_reward="sometimes")

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

    def samples(self):
        good, bad = completions_for(MATMUL, "naive", "tail_bug")
        prompt = "<|user|>write matmul<|assistant|>"
        return [(prompt + r, prompt, MATMUL) for r in (good, bad, "hmm")]

    def check(self, out):
        (r0, s0, x0), (r1, s1, x1), (r2, s2, x2) = out
        self.assertGreater(r0, 0)
        self.assertEqual((r1, r2), (-0.5, -1.0))
        self.assertEqual((s0, s1, s2), (1.0, 0.0, 0.0))              # dynamic filtering: correct
        self.assertEqual(set(x0), set(x2))
        self.assertEqual((x0["kgym_valid"], x2["kgym_format_error"]), (1.0, 1.0))

    def test_reward_func_file(self):
        """--remote_rm_url kgym_reward.py: the dict form (OpenRLHF 0.8.3 and later)."""
        path = shim(self, "import os\nos.environ.setdefault('KGYM_EVAL', '{\"trials\": 1, "
                          "\"check_only\": true}')\nfrom kgym.adapters.openrlhf import reward_func\n")
        with mock.patch.dict(os.environ, {"KGYM_BROKER": self.cluster.endpoint}):
            kgym.set_default_client(None)
            try:
                self.check(_contracts.openrlhf_func_route(
                    _contracts.load_function(path, "reward_func"), self.samples()))
            finally:
                kgym.default_client().close()
                kgym.set_default_client(None)

    def test_tensor_form(self):
        """reward_func_tensor: the bare rewards OpenRLHF 0.8.2 and older read."""
        queries, prompts, labels = zip(*self.samples())
        out = openrlhf.reward_func_tensor(queries, prompts, labels, client=self.client, eval=_env.CHECK)
        out = out.tolist() if hasattr(out, "tolist") else out
        self.assertEqual(out, [1.0, -0.5, -1.0])
        self.assertIs(openrlhf.reward_func_dict, openrlhf.reward_func)
        with self.assertRaises(ValueError):
            openrlhf.reward_func(queries, prompts, None, client=self.client)

    def serve(self, *args, env=None):
        """python3 -m kgym.serve_rm on a free port: its URL."""
        cmd = [sys.executable, "-m", "kgym.serve_rm", "--port", "0"] + list(args)
        err = tempfile.TemporaryFile()
        proc = subprocess.Popen(cmd, cwd=_env.PYTHON_DIR, stdout=subprocess.PIPE, stderr=err,
                                text=True, env=dict(os.environ, **(env or {})))

        def stop():
            proc.terminate()
            proc.communicate(timeout=10)
            err.close()
        self.addCleanup(stop)
        line = proc.stdout.readline()
        if "listening on http://127.0.0.1:" not in line:
            err.seek(0)
            self.fail("kgym.serve_rm did not start: %r %s" % (line, err.read().decode()))
        return line.split("listening on ")[1].strip()

    def post(self, url, body):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def test_http_reward_server(self):
        """kgym.serve_rm for --remote_rm_url http://...: OpenRLHF's POST per
        sample, the broker from $KGYM_BROKER, eval keys from --eval."""
        url = self.serve("--eval", json.dumps(_env.CHECK), env={"KGYM_BROKER": self.cluster.endpoint})
        self.assertTrue(url.endswith("/get_reward"))
        self.check(_contracts.openrlhf_http_route(url, self.samples()))
        # A batch in one request, as OpenRLHF's older versions send it.
        queries, prompts, labels = zip(*self.samples())
        status, d = self.post(url, {"query": queries, "prompts": prompts, "labels": labels})
        self.assertEqual(status, 200)
        self.assertEqual(d["scores"], [1.0, 0.0, 0.0])
        self.assertEqual(set(d), {"rewards", "scores", "extra_logs"})
        self.assertTrue(all(len(v) == 3 for v in d["extra_logs"].values()))
        # What it cannot use is answered 400 with the reason; the server goes on.
        for body, why in ((b"{nope", "not JSON"), ({"query": ["x"]}, "--label_key"),
                          ({"query": "x", "labels": ["t"]}, "'query' must be a list"),
                          ({"query": ["x", "y"], "labels": [MATMUL]}, "'labels' has 1 items"),
                          ([1, 2], "JSON object")):
            status, d = self.post(url, body)
            self.assertEqual(status, 400, d)
            self.assertIn(why, d["error"])
        with urllib.request.urlopen(url.replace("/get_reward", "/health"), timeout=10) as resp:
            self.assertTrue(json.loads(resp.read())["ok"])
        self.check(_contracts.openrlhf_http_route(url, self.samples()))

    def test_http_reward_server_without_broker(self):
        """No broker: 503 with the reason (OpenRLHF raises on it), or with
        --infra-score 0 a 0.0 reward flagged kgym_infra_error."""
        dead = ["--broker", "tcp://127.0.0.1:%d" % _env.free_port(), "--connect-timeout", "0.3"]
        url = self.serve(*dead)
        status, d = self.post(url, {"query": ["x"], "prompts": [""], "labels": [MATMUL]})
        self.assertEqual(status, 200)                                  # no kernel: not kgym's fault
        good, = completions_for(MATMUL, "naive")
        status, d = self.post(url, {"query": [good], "prompts": [""], "labels": [MATMUL]})
        self.assertEqual(status, 503)
        self.assertIn("connection refused", d["error"])
        self.assertIn("infra_score", d["error"])
        with self.assertRaises(urllib.error.HTTPError):
            _contracts.openrlhf_http_route(url, [(good, "", MATMUL)])
        url = self.serve(*dead, "--infra-score", "0")
        reward, score, extra = _contracts.openrlhf_http_route(url, [(good, "", MATMUL)])[0]
        self.assertEqual((reward, score, extra["kgym_infra_error"]), (0.0, 0.0, 1.0))


class InfraFailures(unittest.TestCase):
    """kgym's infrastructure fails (here: no broker at the endpoint). By
    default every adapter raises the failure, saying why and how to score
    such samples instead; with a fallback score it goes on. Logged once
    either way, never a silent zero."""

    def setUp(self):
        self.client = unreachable_client(self)
        self.good, = completions_for(MATMUL, "naive")

    def once(self, logs):
        said = [r.getMessage() for r in logs.records if "infrastructure failed" in r.getMessage()]
        self.assertEqual(len(said), 1, said)
        self.assertIn("connection refused", said[0])

    def test_verl(self):
        with self.assertLogs("kgym", logging.ERROR) as logs:
            with self.assertRaises(kgym.BrokerUnreachable) as cm:
                verl.compute_score("kgym", self.good, MATMUL, client=self.client)
            self.assertIn("set infra_score to a number", str(cm.exception))
            self.assertEqual(cm.exception.result.error, "unreachable")
            with self.assertRaises(kgym.BrokerUnreachable):
                verl.compute_score_batch(["kgym"] * 2, [self.good, "no kernel"], [MATMUL] * 2,
                                         None, client=self.client)
            out = verl.compute_score_batch(["kgym"] * 2, [self.good, "no kernel"], [MATMUL] * 2,
                                           None, client=self.client, infra_score=0.25)
            d = asyncio.run(verl.compute_score_async("kgym", self.good, MATMUL, client=self.client,
                                                     infra_score="-0.5"))
        self.once(logs)
        self.assertEqual([o["score"] for o in out], [0.25, -1.0])
        self.assertEqual([o["kgym_infra_error"] for o in out], [1.0, 0.0])
        self.assertEqual((d["score"], d["kgym_valid"]), (-0.5, 0.0))
        with self.assertRaises(ValueError):
            verl.compute_score("kgym", self.good, MATMUL, client=self.client, infra_score="often")

    def test_verl_tool(self):
        store = InProcessStore()
        tool = verl.KgymTool({"client": self.client}, None, store=store)

        async def trajectory(tool):
            iid = await tool.create("traj-1", ground_truth=MATMUL)
            text, step, metrics = await tool.execute(iid, {"code": self.good})
            return text, step, metrics, iid

        with self.assertLogs("kgym", logging.ERROR) as logs:
            text, step, metrics, iid = asyncio.run(trajectory(tool))
        self.once(logs)
        self.assertEqual((step, metrics["kgym_infra_error"]), (0.0, 1.0))
        with self.assertRaises(kgym.KgymError) as cm:
            asyncio.run(tool.calc_reward(iid))
        self.assertIn("infrastructure failed", str(cm.exception))
        tool.config["infra_score"] = 0.0
        self.assertEqual(asyncio.run(tool.calc_reward(iid)), 0.0)

    def test_trl(self):
        with self.assertLogs("kgym", logging.ERROR) as logs:
            for make in (trl.make_reward_func, trl.make_sync_reward_func):
                with self.assertRaises(kgym.BrokerUnreachable) as cm:
                    trl_rewards(make(self.client), ["p"], [self.good], task=[MATMUL])
                self.assertIn("infra_score", str(cm.exception))
                skip = make(self.client, infra_reward=None)
                self.assertEqual(trl_rewards(skip, ["p", "p"], [self.good, "no"], task=[MATMUL] * 2),
                                 [None, -1.0])
                self.assertEqual(trl_rewards(make(self.client, infra_reward=0), ["p"], [self.good],
                                             task=[MATMUL]), [0.0])
        self.once(logs)

    def test_trl_environment(self):
        env = trl.make_environment(client=self.client)()
        env.reset(task=MATMUL)
        with self.assertLogs("kgym", logging.ERROR) as logs:
            text = env.submit_kernel(code=self.good)           # the model is told
        self.once(logs)
        self.assertIn("internal_error", text)
        with self.assertRaises(kgym.BrokerUnreachable):
            env.get_reward()
        env = trl.make_environment(client=self.client, infra_reward=None)()
        env.reset(task=MATMUL)
        env.submit_kernel(code=self.good)
        self.assertIsNone(env.get_reward())

    def test_openrlhf(self):
        with self.assertLogs("kgym", logging.ERROR) as logs:
            with self.assertRaises(kgym.BrokerUnreachable):
                openrlhf.reward_func([self.good], [""], [MATMUL], client=self.client)
            with mock.patch.dict(os.environ, {"KGYM_INFRA_SCORE": "0"}):
                d = openrlhf.answer([self.good], [""], [MATMUL], client=self.client)
        self.once(logs)
        self.assertEqual((d["rewards"], d["extra_logs"]["kgym_infra_error"]), ([0.0], [1.0]))


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
