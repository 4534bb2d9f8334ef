"""Kernel extraction from completions (no broker needed)."""

import json
import unittest

import _env
import kgym
from kgym.extract import c_functions, code_blocks, cuda_kernels, extract

CUDA_TASK = {"name": "t", "backend": "cuda",
             "args": [{"name": n} for n in ("x", "w", "y", "M", "N", "eps")]}
CPU_TASK = dict(CUDA_TASK, backend="cpu")

KERNEL = """extern "C" __global__ void rmsnorm(const float *x, const float *w, float *y,
                                   int M, int N, float eps)
{
    // body
}
"""


class FencedBlocks(unittest.TestCase):

    def test_cuda_block_and_json_plan(self):
        text = ("Sure.\n```cuda\n%s```\nPlan:\n```json\n%s\n```\n" % (KERNEL, json.dumps({
            "launches": [{"kernel": "rmsnorm", "grid": ["M", 1, 1], "block": [256, 1, 1],
                          "args": ["x", "w", "y", "M", "N", "eps"]}],
            "options": ["-O3"], "workspace": "M*4"})))
        ex = extract(text, CUDA_TASK)
        self.assertTrue(ex.ok, ex.feedback)
        self.assertEqual(ex.plan, "json")
        c = ex.candidate
        self.assertIn("__global__ void rmsnorm", c["source"])
        self.assertEqual(c["launches"][0]["grid"], ["M", 1, 1])
        self.assertEqual(c["options"], ["-O3"])
        self.assertEqual(c["workspace"], "M*4")

    def test_cpp_and_cplusplus_tags(self):
        for tag in ("cpp", "c++", "cu", "CUDA"):
            ex = extract("```%s\n%s```" % (tag, KERNEL), CUDA_TASK)
            self.assertTrue(ex.ok, (tag, ex.feedback))
            self.assertEqual(ex.candidate["launches"], [{"kernel": "rmsnorm"}])

    def test_last_block_of_preferred_language_wins(self):
        text = ("Draft:\n```cuda\nextern \"C\" __global__ void draft(float *x) {}\n```\n"
                "Host code:\n```cpp\nint main() { return 0; }\n```\n"
                "Final:\n```cuda\n%s```\n" % KERNEL)
        ex = extract(text, CUDA_TASK)
        self.assertTrue(ex.ok, ex.feedback)
        self.assertEqual(ex.candidate["launches"][0]["kernel"], "rmsnorm")

    def test_chat_messages(self):
        msgs = [{"role": "user", "content": "write it"},
                {"role": "assistant", "content": "```cuda\n%s```" % KERNEL}]
        self.assertTrue(extract(msgs, CUDA_TASK).ok)
        self.assertTrue(extract(msgs[-1], CUDA_TASK).ok)

    def test_reasoning_is_skipped(self):
        text = ("<think>maybe ```cuda\nextern \"C\" __global__ void wrong(float *x) {}\n```"
                "</think>\n```cuda\n%s```" % KERNEL)
        ex = extract(text, CUDA_TASK)
        self.assertEqual(ex.candidate["launches"][0]["kernel"], "rmsnorm")
        ex = extract("<think>still thinking about ```cuda\n" + KERNEL, CUDA_TASK)
        self.assertFalse(ex.ok)
        self.assertIn("<think>", ex.feedback)

    def test_full_candidate_as_json(self):
        cand = {"source": KERNEL, "launches": [{"kernel": "rmsnorm", "grid": ["M"]}]}
        ex = extract("```json\n%s\n```" % json.dumps(cand), CUDA_TASK)
        self.assertTrue(ex.ok, ex.feedback)
        self.assertEqual(ex.candidate["source"], KERNEL)

    def test_code_blocks_scanner(self):
        blocks = code_blocks("a\n~~~c\nint x;\n~~~\n````cuda\n```\nnested\n````\n```json\n{}")
        self.assertEqual([(b.lang, b.closed) for b in blocks],
                         [("c", True), ("cuda", True), ("json", False)])
        self.assertEqual(blocks[1].body, "```\nnested")


class LaunchComments(unittest.TestCase):

    SRC = """// kgym: launch kernel=rmsnorm grid=cdiv(M, 4), 1, 1 block=128 shared=0 args=x,w,y,M,N,eps
// kgym: options -O3 -ffast-math
/* kgym: workspace M*4 */
#include <stdint.h>
static float sq(float v) { return v * v; }
void rmsnorm(const float *x, const float *w, float *y, int32_t M, int32_t N, float eps) {}
"""

    def test_comments(self):
        ex = extract("```c\n%s```" % self.SRC, CPU_TASK)
        self.assertTrue(ex.ok, ex.feedback)
        self.assertEqual(ex.plan, "comments")
        self.assertEqual(ex.candidate["launches"], [{
            "kernel": "rmsnorm", "grid": ["cdiv(M,4)", 1, 1], "block": [128], "shared": 0,
            "args": ["x", "w", "y", "M", "N", "eps"]}])
        self.assertEqual(ex.candidate["options"], ["-O3", "-ffast-math"])
        self.assertEqual(ex.candidate["workspace"], "M*4")

    def test_two_launches_and_positional_kernel(self):
        src = ("// kgym: launch zero block=256 args=y\n// kgym: launch kernel=sum grid=[cdiv(N,256)] "
               "block=(256,1,1) args=[x,y,N]\n" + KERNEL)
        ex = extract("```cuda\n%s```" % src, {"backend": "cuda", "args": [
            {"name": "x"}, {"name": "y"}, {"name": "N"}]})
        self.assertTrue(ex.ok, ex.feedback)
        self.assertEqual(ex.candidate["launches"], [
            {"kernel": "zero", "block": [256], "args": ["y"]},
            {"kernel": "sum", "grid": ["cdiv(N,256)"], "block": [256, 1, 1], "args": ["x", "y", "N"]}])

    def test_spacing_and_key_forms(self):
        src = "//\tkgym:\tlaunch\tk\tblock = 4\n// kgym: workspace=M*4\nvoid k(void) {}\n"
        ex = extract("```c\n%s```" % src, CPU_TASK)
        self.assertTrue(ex.ok, ex.feedback)
        self.assertEqual(ex.candidate["launches"], [{"kernel": "k", "block": [4]}])
        self.assertEqual(ex.candidate["workspace"], "M*4")

    def test_json_plan_wins_over_comments(self):
        text = "```c\n%s```\n```json\n{\"launches\": [{\"kernel\": \"other\"}]}\n```" % self.SRC
        ex = extract(text, CPU_TASK)
        self.assertEqual(ex.plan, "json")
        self.assertEqual(ex.candidate["launches"], [{"kernel": "other"}])

    def test_bad_comment_says_where(self):
        ex = extract("```c\n// kgym: launch kernel=k gird=1\nvoid k(void) {}\n```", CPU_TASK)
        self.assertFalse(ex.ok)
        self.assertIn("line 1", ex.feedback)
        self.assertIn("unknown key 'gird'", ex.feedback)
        ex = extract("```c\n// kgym: lunch kernel=k\nvoid k(void) {}\n```", CPU_TASK)
        self.assertIn("unknown directive", ex.feedback)
        ex = extract("```c\n// kgym: launch grid=1\nvoid k(void) {}\n```", CPU_TASK)
        self.assertIn("no kernel=", ex.feedback)


class Fallback(unittest.TestCase):

    def test_single_cuda_kernel(self):
        src = ("__device__ float f(float v) { return v; }\n"
               "extern \"C\" __global__ void __launch_bounds__(256) gelu(const float *x, float *y, int N) {}\n")
        self.assertEqual(cuda_kernels(src), [("gelu", True)])
        ex = extract("```cuda\n%s```" % src, {"backend": "cuda"})
        self.assertEqual(ex.plan, "auto")
        self.assertEqual(ex.candidate["launches"], [{"kernel": "gelu"}])

    def test_extern_c_block(self):
        src = "extern \"C\" {\n__global__ void a(float *x) {}\n}\n"
        self.assertEqual(cuda_kernels(src), [("a", True)])

    def test_ambiguous_kernels(self):
        src = ("extern \"C\" __global__ void one(float *x) {}\n"
               "extern \"C\" __global__ void two(float *x) {}\n")
        ex = extract("```cuda\n%s```" % src, CUDA_TASK)
        self.assertFalse(ex.ok)
        self.assertIn("one, two", ex.feedback)
        self.assertIn("kgym: launch", ex.feedback)

    def test_mangled_kernel(self):
        ex = extract("```cuda\n__global__ void k(float *x) {}\n```", CUDA_TASK)
        self.assertIn('not extern "C"', ex.feedback)

    def test_c_functions(self):
        src = ("#include <math.h>\n#define SQ(x) ((x)*(x))\nstatic inline float h(float v) { return v; }\n"
               "typedef struct { int a; } pair;\nstruct s { int b; };\n"
               "void gelu(const float *x, float *y, int n) { if (n) { for (;;) {} } }\n")
        self.assertEqual(c_functions(src), [("h", False), ("gelu", True)])
        ex = extract("```c\n%s```" % src, CPU_TASK)
        self.assertEqual(ex.candidate["launches"], [{"kernel": "gelu"}])
        ex = extract("```c\nvoid a(void) {}\nvoid b(void) {}\n```", CPU_TASK)
        self.assertFalse(ex.ok)
        self.assertIn("a, b", ex.feedback)


class MissingPieces(unittest.TestCase):

    def check(self, text, *needles, task=CUDA_TASK):
        ex = extract(text, task)
        self.assertFalse(ex.ok)
        self.assertIsNone(ex.candidate)
        for n in needles:
            self.assertIn(n, ex.feedback)
        self.assertIn("Expected:", ex.feedback)      # the format reminder
        return ex

    def test_no_code(self):
        self.check("I would write a kernel that...", "no fenced code block")
        self.check("", "empty")

    def test_wrong_language_only(self):
        self.check("```python\nprint(1)\n```", "```python")

    def test_unclosed(self):
        self.check("```cuda\n" + KERNEL, "never closed")

    def test_bad_json(self):
        ex = self.check("```cuda\n%s```\n```json\n{\"launches\": [}\n```" % KERNEL, "not valid JSON")
        self.assertIn("line", ex.problem)

    def test_json_without_launches(self):
        self.check("```cuda\n%s```\n```json\n{\"grid\": [1]}\n```" % KERNEL, 'no "launches"')

    def test_unknown_arg_names_the_task_args(self):
        text = "```cuda\n%s```\n```json\n{\"launches\": [{\"kernel\": \"rmsnorm\", \"args\": [\"x\", \"q\"]}]}\n```" % KERNEL
        ex = self.check(text, "unknown argument(s) q", "x, w, y, M, N, eps")
        self.assertTrue(ex.problem)

    def test_unknown_plan_key(self):
        self.check("```cuda\n%s```\n```json\n{\"launches\": [{\"kernel\": \"k\", \"threads\": 4}]}\n```" % KERNEL,
                   "unknown key 'threads'")


class BundledRoundTrip(unittest.TestCase):

    def test_every_bundled_candidate(self):
        names = kgym.list_examples()
        self.assertTrue(names, "no bundled examples found")
        for task_name in names:
            task = kgym.resolve_task(task_name)
            lang = "cuda" if task["backend"] == "cuda" else "c"
            for cname, cand in kgym.example_candidates(task_name).items():
                with self.subTest(task=task_name, candidate=cname):
                    ex = extract(_env.completion_of(cand, lang), task)
                    self.assertTrue(ex.ok, ex.feedback)
                    want = {k: v for k, v in cand.items() if k != "lang"}
                    got = {k: v for k, v in ex.candidate.items() if k != "lang"}
                    self.assertEqual(got, want)


class LocalInvalid(unittest.TestCase):

    def test_no_round_trip(self):
        client = kgym.Client("tcp://127.0.0.1:9")       # nothing listens there
        fut = client.submit("cpu/rmsnorm_f32", "no code here")
        self.assertTrue(fut.done())
        r = fut.result()
        self.assertEqual((r.status, r.reward, r.error), ("invalid", None, "extract"))
        self.assertIn("no fenced code block", r.feedback)
        self.assertIn("no fenced code block", r.message)
        self.assertIsNone(client._io, "a bad completion must not start any I/O")
        with self.assertRaises(kgym.InvalidJob) as cm:
            client.grade("cpu/rmsnorm_f32", "```c\nint x;\n```")
        self.assertEqual(cm.exception.result.status, "invalid")
        r = client.grade("no/such/task", "x", raise_on_error=False)
        self.assertEqual((r.status, r.error), ("invalid", "task"))
        client.close()


class PythonAnswers(unittest.TestCase):
    """PyTorch tasks: the ```python block defining ModelNew. The cases are
    tests/data/extract_cases.json, which the C extractor (kgym submit
    --completion, tests/test_client_extract.c) is held to as well."""

    def task(self, entry="Model"):
        python = {"entry": entry} if entry != "ModelNew" else {}
        return {"name": "t", "backend": "cuda", "reference": {"lang": "python", "source": "x"},
                "python": python}

    def test_shared_cases(self):
        import os
        with open(os.path.join(_env.REPO, "tests", "data", "extract_cases.json")) as f:
            cases = json.load(f)
        self.assertGreaterEqual(len(cases), 20)
        for c in cases:
            with self.subTest(case=c["name"]):
                entry = c["entry"]
                task = self.task("Model" if entry == "ModelNew" else entry)
                ex = extract(c["completion"], task)
                if c["source"] is not None:
                    self.assertTrue(ex.ok, ex.feedback)
                    self.assertEqual(ex.candidate, {"lang": "python", "source": c["source"]})
                    self.assertEqual((ex.plan, ex.lang), ("module", "python"))
                else:
                    self.assertFalse(ex.ok)
                    self.assertIn(c["problem"], ex.problem)
                    self.assertIn("```python block defining `class ModelNew(nn.Module)`", ex.feedback)

    def test_candidate_entry_of_the_task(self):
        task = self.task()
        task["python"]["candidate_entry"] = "Fast"
        ex = extract("```python\nclass Fast:\n    pass\n```", task)
        self.assertTrue(ex.ok, ex.feedback)
        self.assertFalse(extract("```python\nclass ModelNew:\n    pass\n```", task).ok)

    def test_without_a_task_a_python_answer_is_recognised(self):
        ex = extract("```python\nclass ModelNew:\n    pass\n```")
        self.assertTrue(ex.ok, ex.feedback)
        self.assertEqual(ex.candidate["lang"], "python")
        # A C answer without a task is still read as before.
        self.assertTrue(extract("```c\nvoid f(float *x) {}\n```", backend="cpu").ok)

    def test_a_c_task_still_rejects_python(self):
        ex = extract("```python\nclass ModelNew:\n    pass\n```", CPU_TASK)
        self.assertFalse(ex.ok)
        self.assertIn("no C/CUDA code block", ex.problem)


if __name__ == "__main__":
    unittest.main()
