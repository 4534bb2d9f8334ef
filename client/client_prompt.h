/*  client_prompt - `kgym prompt`: the policy's prompt for a task.

        kgym prompt [--lang triton|cuda|c|ptx] [--format text|json|chat] [--gpu NAME]
                    [--feedback RESULT.json] TASK

    TASK is a task file (kgym JSON or a PyTorch task), a folder holding
    task.json, or a KernelBench-format `.py` module (made into its task as
    `kgym import` would). The prompt says what to do, shows the reference,
    the shapes and dtypes (the module's constants and sizes, or the task's
    args and sizes), the target (the GPU: --gpu, default the local one, or
    the CPU) and the answer format the extractors read back (a ```python
    block defining ModelNew for PyTorch tasks; a source block and a launch
    plan for C/CUDA tasks); with --feedback, the previous result's status,
    message and feedback for a multi-turn loop.

    The wording is python/kgym/templates/prompt.txt, built into the binary
    (client/embed.py); the Python client's kgym.prompt renders the same
    file by the same rules.

    Output: text (the system text, a blank line, the user text), json (one
    object: task, kind, lang, gpu, answer, system, user) or chat (the
    OpenAI-style messages list), on stdout. Exit 0, 1 when the task or
    result cannot be read or the prompt cannot be made for it, 2 on a usage
    error.
*/
#ifndef CLIENT_PROMPT_H
#define CLIENT_PROMPT_H

#include <jansson.h>
#include <stddef.h>

//  The prompt object {task, kind, lang, gpu, answer, system, user} for a
//  task object (borrowed); lang NULL: the task's default; gpu NULL: none
//  known; feedback a result object or NULL. NULL with the reason in err.
json_t *client_prompt_build (json_t *task, const char *lang, const char *gpu, json_t *feedback,
                             char *err, size_t errlen);

//  The local GPU in words ("NVIDIA H200 (sm_90)"), or NULL when this host
//  has none the CUDA backend can use. Free it.
char *client_prompt_local_gpu (void);

//  A result object from RESULT.json text: one JSON object, or the last
//  non-blank line of JSON lines. NULL with the reason.
json_t *client_prompt_result (const char *text, char *err, size_t errlen);

//  Run the subcommand; argv [0] is "prompt". Returns the exit status.
int client_prompt_main (int argc, char **argv);

#endif
