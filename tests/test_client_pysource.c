/*  test_client_pysource - reading a Python module's outline without
    running it: syntax errors found with their line, top-level classes,
    functions, constants and what each body mentions; no false alarm on
    the Python files of this repository.
*/
#include "testutil.h"
#include "client_pysource.h"
#include <czmq.h>
#include <dirent.h>
#include <string.h>

static client_pysource_t *
s_read (const char *text)
{
    client_pysource_t *module = client_pysource_new (text, strlen (text));
    ck_assert_ptr_nonnull (module);
    return module;
}

static const char *s_kernelbench =
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "class Model(nn.Module):\n"
    "    \"\"\"A docstring with 'quotes' and a ( that does not count.\"\"\"\n"
    "    def __init__(self, features, eps=1e-5):\n"
    "        super().__init__()\n"
    "        self.norm = nn.LayerNorm(features, eps=eps)\n"
    "\n"
    "    def forward(self, x):\n"
    "        return self.norm(x).sum(dim=-1) * scale  # a comment naming dim\n"
    "\n"
    "batch_size = 16\n"
    "features = 0x40\n"
    "dim = 1_024\n"
    "scale = 2.0\n"
    "offset = -3\n"
    "padding = 7\n"
    "padding += 1\n"
    "\n"
    "def get_inputs():\n"
    "    x = torch.randn(batch_size,\n"
    "                    features, dim)\n"
    "    return [x]\n"
    "\n"
    "@torch.no_grad()\n"
    "def get_init_inputs():\n"
    "    return [features]\n";

START_TEST (test_pysource_reads_a_kernelbench_module)
{
    client_pysource_t *module = s_read (s_kernelbench);
    ck_assert_msg (client_pysource_error (module) == NULL, "unexpected error: %s",
                   client_pysource_error (module));
    ck_assert (client_pysource_has_class (module, "Model"));
    ck_assert (!client_pysource_has_class (module, "ModelNew"));
    ck_assert (client_pysource_has_def (module, "get_inputs"));
    ck_assert (client_pysource_has_def (module, "get_init_inputs"));
    //  Methods are not top-level functions.
    ck_assert (!client_pysource_has_def (module, "forward"));
    //  Integer literals only, in source order; a float, a negative number or
    //  an augmented assignment is not a constant.
    ck_assert_uint_eq (client_pysource_constants (module), 3);
    const char *names [] = { "batch_size", "features", "dim" };
    int64_t values [] = { 16, 64, 1024 };
    for (size_t i = 0; i < 3; i++) {
        ck_assert_str_eq (client_pysource_constant_name (module, i), names [i]);
        ck_assert_int_eq (client_pysource_constant_value (module, i), values [i]);
    }
    int64_t value;
    ck_assert_int_eq (client_pysource_constant (module, "scale", &value), -1);
    ck_assert_int_eq (client_pysource_constant (module, "padding", &value), -1);
    ck_assert (client_pysource_defines (module, "scale"));
    //  What each body mentions, across a bracketed line join; comments and
    //  strings are not names.
    ck_assert (client_pysource_uses (module, "get_inputs", "batch_size"));
    ck_assert (client_pysource_uses (module, "get_inputs", "dim"));
    ck_assert (client_pysource_uses (module, "get_inputs", "features"));
    ck_assert (client_pysource_uses (module, "get_init_inputs", "features"));
    ck_assert (!client_pysource_uses (module, "get_init_inputs", "dim"));
    ck_assert (client_pysource_uses (module, "Model", "scale"));
    //  A keyword argument and an attribute are not references.
    ck_assert (!client_pysource_uses (module, "Model", "dim"));
    ck_assert (!client_pysource_uses (module, "Model", "sum"));
    ck_assert (client_pysource_uses (module, "Model", "eps"));
    client_pysource_destroy (&module);
    client_pysource_destroy (&module);
}
END_TEST

START_TEST (test_pysource_assignments_define_names)
{
    client_pysource_t *module = s_read ("class Model:\n    pass\n\nModelNew = Model\nn = 5\nn = 6\n");
    ck_assert_ptr_null (client_pysource_error (module));
    ck_assert (client_pysource_defines (module, "ModelNew"));
    ck_assert (!client_pysource_has_class (module, "ModelNew"));
    int64_t value = 0;
    ck_assert_int_eq (client_pysource_constant (module, "n", &value), 0);
    ck_assert_int_eq (value, 6);
    client_pysource_destroy (&module);
}
END_TEST

//  Each broken source gives an error naming its line and what is wrong.
START_TEST (test_pysource_finds_syntax_errors)
{
    struct { const char *source; const char *expect; } cases [] = {
        { "x = (1,\ny = 2\n", "line 1: '(' was never closed" },
        { "x = [1, 2)\n", "line 1: closing parenthesis ')' does not match opening parenthesis '['" },
        { "x = 1)\n", "line 1: unmatched ')'" },
        { "s = 'abc\n", "line 1: unterminated string literal" },
        { "s = \"\"\"abc\n\nmore\n", "line 1: unterminated triple-quoted string literal" },
        { "x = 1\n    y = 2\n", "line 2: unexpected indent" },
        { "def f():\nreturn 1\n", "line 2: expected an indented block after the ':' on line 1" },
        { "class A:\n", "line 1: expected an indented block" },
        { "if x:\n        a = 1\n    b = 2\n", "line 3: unindent does not match any outer indentation level" },
        { "x = $y\n", "line 1: invalid character '$'" },
        { "x = 1 ? 2 : 3\n", "line 1: invalid character '?'" },
        { "n = 017\n", "line 1: leading zeros in decimal integer literals" },
        { "x = 1 \\ 2\n", "line 1: unexpected character after line continuation" },
        { "def (x):\n    pass\n", "line 1: 'def' must be followed by a name" },
        { "def f:\n    pass\n", "line 1: 'def f' must be followed by '('" },
        { "class A\n    pass\n", "line 1: 'class A' must be followed by '(' or ':'" },
        { "x = 1\ny = (\n  2,\n  3]\n", "line 4: closing parenthesis ']'" },
        { "a = 'x'\0b\n", "invalid non-printable character" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        size_t len = strlen (cases [i].source);
        if (i == sizeof cases / sizeof cases [0] - 1)
            len = 11;                   //  through the NUL byte
        client_pysource_t *module = client_pysource_new (cases [i].source, len);
        ck_assert_ptr_nonnull (module);
        const char *error = client_pysource_error (module);
        ck_assert_msg (error && strstr (error, cases [i].expect),
                       "case %zu: expected '%s', got '%s'", i, cases [i].expect, error? error: "(none)");
        client_pysource_destroy (&module);
    }
}
END_TEST

//  What Python accepts must read without an error.
START_TEST (test_pysource_accepts_valid_python)
{
    const char *sources [] = {
        "",
        "\xEF\xBB\xBF# a BOM, then a comment only\n",
        "x = r'\\'' + b\"\\\"\" + f'{x!r}' + rb'a' + Rb'b' + u'c'\n",
        "s = '''one\n'two'\n\"\"\"\n'''\n",
        "total = 1 + \\\n    2\n",
        "d = {\n  'a': 1,\n    'b': [2,\n3],\n}\n",
        "if x:\n\tpass\nelse:\n        pass\n",
        "class A: pass\nclass B(A):\n    x: int = 3\n",
        "async def f():\n    await g()\n",
        "while True:\n    break\n\n\n# trailing comment\n   \n",
        "x = 1.5e-3 + .5 + 0 + 00 + 0_0 + 1j + 0x_FF + 0b1_0\n",
        "lambda_ = lambda: 0\nx = y[1:] if z else w\n",
        "def f(a, /, b, *, c=1, **kw) -> int:\n    return a @ b\n",
        "x = 1\r\ny = 2\r\nif x:\r\n    z = 3\r\n",
        "name = 'caf\xc3\xa9'\n\xc3\xa9t\xc3\xa9 = 1\n",
    };
    for (size_t i = 0; i < sizeof sources / sizeof sources [0]; i++) {
        client_pysource_t *module = s_read (sources [i]);
        ck_assert_msg (client_pysource_error (module) == NULL, "source %zu: %s", i,
                       client_pysource_error (module));
        client_pysource_destroy (&module);
    }
}
END_TEST

//  Every Python file of this repository reads without a false alarm.
START_TEST (test_pysource_reads_the_repository_python)
{
    const char *folders [] = { "python/kgym", "python/kgym/adapters", "python/tests", "examples",
                               "tests/data/kernelbench/level1", "tests/data/kernelbench/level2" };
    size_t files = 0;
    for (size_t f = 0; f < sizeof folders / sizeof folders [0]; f++) {
        char *dir_path = testutil_source_path (folders [f]);
        DIR *dir = opendir (dir_path);
        ck_assert_msg (dir != NULL, "cannot open %s", dir_path);
        struct dirent *entry;
        while ((entry = readdir (dir))) {
            size_t n = strlen (entry->d_name);
            if (n < 4 || strcmp (entry->d_name + n - 3, ".py"))
                continue;
            char *path = zsys_sprintf ("%s/%s", dir_path, entry->d_name);
            char *text = testutil_read_file (path);
            client_pysource_t *module = s_read (text);
            ck_assert_msg (client_pysource_error (module) == NULL, "%s: %s", path,
                           client_pysource_error (module));
            client_pysource_destroy (&module);
            free (text);
            zstr_free (&path);
            files++;
        }
        closedir (dir);
        free (dir_path);
    }
    ck_assert_uint_ge (files, 20);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("client_pysource");
    TCase *tc = tcase_create ("core");
    tcase_add_test (tc, test_pysource_reads_a_kernelbench_module);
    tcase_add_test (tc, test_pysource_assignments_define_names);
    tcase_add_test (tc, test_pysource_finds_syntax_errors);
    tcase_add_test (tc, test_pysource_accepts_valid_python);
    tcase_add_test (tc, test_pysource_reads_the_repository_python);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
