/*  client_extract - a model's completion -> the candidate of a PyTorch task.

    The answer to a PyTorch task (docs/pytorch-tasks.md) is the whole module
    in a fenced ```python (or ```py, ```python3, or untagged) block that
    defines the task's candidate entry (`ModelNew`, or the function of a
    function-form task) at the start of a line: `class ModelNew`, `def
    ModelNew`, `ModelNew = ...`. With several such blocks the last closed
    one wins (drafts may come first); reasoning inside <think>...</think> is
    skipped. The same rules as the Python client's kgym.extract
    (python/kgym/extract.py); `kgym submit --completion FILE` uses this.

    A completion without one gets feedback that says what is missing: no
    fenced block, only blocks of other languages, no block defining the
    entry, a block that is never closed (cut off), an empty block, an
    answer still inside <think>.
*/
#ifndef CLIENT_EXTRACT_H
#define CLIENT_EXTRACT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

//  What the candidate of task must define (python.candidate_entry, else
//  "ModelNew" for a class entry, the entry itself for a function); NULL
//  when task is not a PyTorch task. Borrowed from task, or a constant.
const char *client_extract_entry (json_t *task);

//  True when a line of source, at column 0, defines name.
bool client_extract_defines (const char *source, size_t len, const char *name);

//  The candidate {"lang": "python", "source": ...} of a completion for a
//  task whose candidate defines entry. NULL with what is missing, in a few
//  words, in problem ("no ```python block defines `ModelNew`").
json_t *client_extract_python (const char *completion, const char *entry,
                               char *problem, size_t len);

//  The feedback for the model: "kgym could not grade this completion:
//  PROBLEM. Expected: ..." (the Python client's words).
void client_extract_feedback (const char *problem, char *feedback, size_t len);

#endif
