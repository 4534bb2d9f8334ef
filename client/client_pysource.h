/*  client_pysource - what a Python module declares, read without running it.

    kgym stays C: importing a KernelBench problem, writing its prompt and
    reading a model's ```python answer only need the module's outline, so
    this reads the source as Python's tokenizer would (strings, comments,
    brackets, line joins, indentation) and records its top-level
    statements: classes, functions, assignments, and the integer constants
    (`NAME = 4096`, docs/pytorch-tasks.md), with the names each class or
    function body mentions.

    It finds the syntax errors that need no grammar: an unterminated
    string, brackets that do not match or never close, indentation that
    is unexpected, missing after a `:` header or matches no outer level, a
    character Python rejects, a decimal literal with leading zeros, a
    `def` or `class` without its name. What only a full parser sees (an
    operator in the wrong place) is left to Python itself when the module
    is imported (`kgym import --check`).

    An instance is immutable after new; one thread at a time.
*/
#ifndef CLIENT_PYSOURCE_H
#define CLIENT_PYSOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct client_pysource_t client_pysource_t;

//  Read len bytes of source. NULL only when out of memory; a syntax error
//  is recorded (client_pysource_error), with what was read before it.
client_pysource_t *client_pysource_new (const char *source, size_t len);
void client_pysource_destroy (client_pysource_t **self_p);

//  The first syntax error, "line 12: unterminated string", or NULL.
const char *client_pysource_error (client_pysource_t *self);

//  True when a top-level `class name` exists.
bool client_pysource_has_class (client_pysource_t *self, const char *name);

//  True when a top-level `def name` (or `async def name`) exists.
bool client_pysource_has_def (client_pysource_t *self, const char *name);

//  True when name is defined at the top level: a class, a function or an
//  assignment (`ModelNew = Model`).
bool client_pysource_defines (client_pysource_t *self, const char *name);

//  True when the body (with the header after the name) of the top-level
//  class or function scope refers to name (`x.name` and `f(name=1)` do not).
bool client_pysource_uses (client_pysource_t *self, const char *scope, const char *name);

//  The top-level integer constants in source order (a name assigned
//  anything but a non-negative integer literal later is not one).
size_t client_pysource_constants (client_pysource_t *self);

//  The i-th constant's name (borrowed) and value.
const char *client_pysource_constant_name (client_pysource_t *self, size_t i);
int64_t client_pysource_constant_value (client_pysource_t *self, size_t i);

//  The value of the constant name into *value: 0, or -1 when there is none.
int client_pysource_constant (client_pysource_t *self, const char *name, int64_t *value);

#endif
