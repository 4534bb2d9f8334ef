/*  common_expr - integer expressions over a task's size names.

    Grammar (whitespace ignored):
        expr   := term (('+' | '-') term)*
        term   := unary (('*' | '/' | '%') unary)*
        unary  := '-' unary | primary
        primary:= INTEGER | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'
    Functions: cdiv(a,b) = ceil(a/b) for b > 0, min(a,b,...), max(a,b,...).
    Arithmetic is int64 with overflow detection; division and modulo by zero,
    overflow, unknown names, bad syntax, nesting deeper than 64 and text longer
    than 1024 bytes are errors, never crashes. '/' truncates toward zero like C.
*/
#ifndef COMMON_EXPR_H
#define COMMON_EXPR_H

#include <stddef.h>
#include <stdint.h>

#define COMMON_EXPR_MAX_LEN   1024
#define COMMON_EXPR_MAX_DEPTH 64

//  A named integer, such as a size ("M" = 512).
typedef struct {
    const char *name;           //  identifier, borrowed
    int64_t value;              //  its value
} common_expr_var_t;

//  Evaluate text with the given variables. Returns 0 and sets *value, or -1
//  with a one-line reason in err (always NUL-terminated when errlen > 0).
int common_expr_eval (const char *text, const common_expr_var_t *vars, size_t nvars,
                      int64_t *value, char *err, size_t errlen);

//  Check syntax and that every name is one of names[]; values are not needed.
//  Returns 0 or -1 with a reason.
int common_expr_check (const char *text, const char *const *names, size_t nnames,
                       char *err, size_t errlen);

#endif
