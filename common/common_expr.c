/*  common_expr - integer expressions over a task's size names.

    A recursive-descent parser that evaluates as it parses (no tree is
    built). Task files, candidates and the wire all feed text here, so every
    path returns an error instead of trapping: int64 arithmetic goes through
    __builtin_*_overflow, INT64_MIN / -1 is an overflow, nesting and length
    are bounded before the recursion can grow. In check mode the same parser
    runs without values: names are looked up in a list and arithmetic is
    skipped, so only syntax and names are checked.

    Error positions are byte offsets from 0 into the text.
*/
#include "common_expr.h"
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define EXPR_MAX_FUNC_ARGS 8    //  min/max take 1..8 arguments

//  State of one parse.
typedef struct {
    const char *text;               //  the expression
    size_t len;                     //  its length (<= COMMON_EXPR_MAX_LEN)
    size_t pos;                     //  next byte to read
    int depth;                      //  current nesting
    bool checking;                  //  true: names only, no arithmetic
    const common_expr_var_t *vars;  //  evaluation: the variables
    size_t nvars;                   //  entries in vars
    const char *const *names;       //  checking: the allowed names
    size_t nnames;                  //  entries in names
    char *err;                      //  caller's error buffer
    size_t errlen;                  //  its size
} expr_parser_t;

static int s_expr (expr_parser_t *self, int64_t *value);

//  Write a reason into the caller's buffer; always returns -1.
static int
s_fail (expr_parser_t *self, const char *fmt, ...)
{
    if (self->err && self->errlen > 0) {
        va_list args;
        va_start (args, fmt);
        vsnprintf (self->err, self->errlen, fmt, args);
        va_end (args);
    }
    return -1;
}

//  Fail naming the whole text, shortened so the message stays one line.
static int
s_fail_in (expr_parser_t *self, const char *what)
{
    if (self->len > 64)
        return s_fail (self, "%s in '%.60s...'", what, self->text);
    return s_fail (self, "%s in '%s'", what, self->text);
}

//  Fail on the byte at pos (or the end of the text).
static int
s_unexpected (expr_parser_t *self)
{
    if (self->pos >= self->len)
        return s_fail (self, "unexpected end at %zu", self->pos);
    unsigned char c = (unsigned char) self->text [self->pos];
    if (c >= 0x20 && c < 0x7F)
        return s_fail (self, "unexpected '%c' at %zu", c, self->pos);
    return s_fail (self, "unexpected byte 0x%02x at %zu", c, self->pos);
}

static void
s_skip_space (expr_parser_t *self)
{
    while (self->pos < self->len
       && (self->text [self->pos] == ' ' || self->text [self->pos] == '\t'
        || self->text [self->pos] == '\n' || self->text [self->pos] == '\r'))
        self->pos++;
}

//  Peek the next non-space byte, 0 at the end.
static char
s_peek (expr_parser_t *self)
{
    s_skip_space (self);
    return self->pos < self->len ? self->text [self->pos] : 0;
}

static bool
s_is_ident_start (char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool
s_is_ident_char (char c)
{
    return s_is_ident_start (c) || (c >= '0' && c <= '9');
}

//  Look a name up in the variables (or, when checking, the allowed names).
static int
s_lookup (expr_parser_t *self, const char *name, size_t len, int64_t *value)
{
    if (self->checking) {
        for (size_t i = 0; i < self->nnames; i++)
            if (self->names [i] && strncmp (self->names [i], name, len) == 0
            &&  self->names [i][len] == '\0') {
                *value = 0;
                return 0;
            }
    }
    else {
        for (size_t i = 0; i < self->nvars; i++)
            if (self->vars [i].name && strncmp (self->vars [i].name, name, len) == 0
            &&  self->vars [i].name [len] == '\0') {
                *value = self->vars [i].value;
                return 0;
            }
    }
    return s_fail (self, "unknown name '%.*s'", (int) (len > 64 ? 64 : len), name);
}

//  NAME '(' expr (',' expr)* ')' : cdiv, min, max.
static int
s_call (expr_parser_t *self, const char *name, size_t len, int64_t *value)
{
    int kind;
    if (len == 4 && memcmp (name, "cdiv", 4) == 0)
        kind = 0;
    else
    if (len == 3 && memcmp (name, "min", 3) == 0)
        kind = 1;
    else
    if (len == 3 && memcmp (name, "max", 3) == 0)
        kind = 2;
    else
        return s_fail (self, "unknown function '%.*s'", (int) (len > 64 ? 64 : len), name);

    self->pos++;                //  '('
    int64_t args [EXPR_MAX_FUNC_ARGS];
    size_t nargs = 0;
    while (true) {
        if (nargs == EXPR_MAX_FUNC_ARGS)
            return s_fail (self, "%.*s takes at most %d arguments, at %zu",
                           (int) len, name, EXPR_MAX_FUNC_ARGS, self->pos);
        if (s_expr (self, &args [nargs]))
            return -1;
        nargs++;
        char c = s_peek (self);
        if (c == ',') {
            self->pos++;
            continue;
        }
        if (c == ')') {
            self->pos++;
            break;
        }
        return s_unexpected (self);
    }
    if (kind == 0) {
        if (nargs != 2)
            return s_fail (self, "cdiv takes 2 arguments, got %zu", nargs);
        if (self->checking) {
            *value = 0;
            return 0;
        }
        int64_t a = args [0], b = args [1];
        if (b <= 0)
            return s_fail_in (self, "cdiv divisor must be > 0");
        //  Truncation already rounds negative quotients up; only a positive
        //  one with a remainder needs the +1. b > 0, so nothing overflows.
        int64_t q = a / b;
        if (a % b != 0 && a > 0)
            q++;
        *value = q;
        return 0;
    }
    int64_t best = args [0];
    for (size_t i = 1; i < nargs; i++)
        if (kind == 1 ? args [i] < best : args [i] > best)
            best = args [i];
    *value = self->checking ? 0 : best;
    return 0;
}

//  primary := INTEGER | NAME | NAME '(' args ')' | '(' expr ')'
static int
s_primary (expr_parser_t *self, int64_t *value)
{
    char c = s_peek (self);
    if (c >= '0' && c <= '9') {
        int64_t v = 0;
        while (self->pos < self->len
           && self->text [self->pos] >= '0' && self->text [self->pos] <= '9') {
            if (__builtin_mul_overflow (v, 10, &v)
            ||  __builtin_add_overflow (v, self->text [self->pos] - '0', &v))
                return s_fail (self, "integer too large at %zu", self->pos);
            self->pos++;
        }
        *value = v;
        return 0;
    }
    if (s_is_ident_start (c)) {
        const char *name = self->text + self->pos;
        size_t len = 0;
        while (self->pos < self->len && s_is_ident_char (self->text [self->pos])) {
            self->pos++;
            len++;
        }
        if (s_peek (self) == '(')
            return s_call (self, name, len, value);
        return s_lookup (self, name, len, value);
    }
    if (c == '(') {
        self->pos++;
        if (s_expr (self, value))
            return -1;
        if (s_peek (self) != ')')
            return s_unexpected (self);
        self->pos++;
        return 0;
    }
    return s_unexpected (self);
}

//  unary := '-' unary | primary; also where nesting is counted, since every
//  '(' and every '-' passes through here.
static int
s_unary (expr_parser_t *self, int64_t *value)
{
    if (++self->depth > COMMON_EXPR_MAX_DEPTH)
        return s_fail (self, "nested deeper than %d at %zu", COMMON_EXPR_MAX_DEPTH, self->pos);
    int rc;
    if (s_peek (self) == '-') {
        self->pos++;
        int64_t v;
        rc = s_unary (self, &v);
        if (rc == 0) {
            if (self->checking)
                *value = 0;
            else
            if (__builtin_sub_overflow ((int64_t) 0, v, value))
                rc = s_fail_in (self, "overflow");
        }
    }
    else
        rc = s_primary (self, value);
    self->depth--;
    return rc;
}

//  term := unary (('*' | '/' | '%') unary)*
static int
s_term (expr_parser_t *self, int64_t *value)
{
    int64_t acc;
    if (s_unary (self, &acc))
        return -1;
    while (true) {
        char op = s_peek (self);
        if (op != '*' && op != '/' && op != '%')
            break;
        self->pos++;
        int64_t rhs;
        if (s_unary (self, &rhs))
            return -1;
        if (self->checking)
            continue;
        if (op == '*') {
            if (__builtin_mul_overflow (acc, rhs, &acc))
                return s_fail_in (self, "overflow");
        }
        else {
            if (rhs == 0)
                return s_fail_in (self, op == '/' ? "division by zero" : "modulo by zero");
            if (acc == INT64_MIN && rhs == -1) {
                if (op == '/')
                    return s_fail_in (self, "overflow");
                acc = 0;        //  exact result; C's INT64_MIN % -1 would trap
            }
            else
                acc = op == '/' ? acc / rhs : acc % rhs;
        }
    }
    *value = self->checking ? 0 : acc;
    return 0;
}

//  expr := term (('+' | '-') term)*
static int
s_expr (expr_parser_t *self, int64_t *value)
{
    int64_t acc;
    if (s_term (self, &acc))
        return -1;
    while (true) {
        char op = s_peek (self);
        if (op != '+' && op != '-')
            break;
        self->pos++;
        int64_t rhs;
        if (s_term (self, &rhs))
            return -1;
        if (self->checking)
            continue;
        bool overflow = op == '+' ? __builtin_add_overflow (acc, rhs, &acc)
                                  : __builtin_sub_overflow (acc, rhs, &acc);
        if (overflow)
            return s_fail_in (self, "overflow");
    }
    *value = self->checking ? 0 : acc;
    return 0;
}

//  Shared driver for eval and check.
static int
s_run (expr_parser_t *self, const char *text, int64_t *value)
{
    if (self->err && self->errlen > 0)
        self->err [0] = '\0';
    if (!text)
        return s_fail (self, "no expression");
    size_t len = strnlen (text, COMMON_EXPR_MAX_LEN + 1);
    if (len > COMMON_EXPR_MAX_LEN)
        return s_fail (self, "expression longer than %d bytes", COMMON_EXPR_MAX_LEN);
    self->text = text;
    self->len = len;
    self->pos = 0;
    self->depth = 0;
    if (s_peek (self) == 0)
        return s_fail (self, "empty expression");
    int64_t v;
    if (s_expr (self, &v))
        return -1;
    if (s_peek (self) != 0)
        return s_unexpected (self);
    if (value)
        *value = v;
    return 0;
}

int
common_expr_eval (const char *text, const common_expr_var_t *vars, size_t nvars,
                  int64_t *value, char *err, size_t errlen)
{
    expr_parser_t self = {
        .checking = false, .vars = vars, .nvars = vars ? nvars : 0,
        .err = err, .errlen = errlen
    };
    return s_run (&self, text, value);
}

int
common_expr_check (const char *text, const char *const *names, size_t nnames,
                   char *err, size_t errlen)
{
    expr_parser_t self = {
        .checking = true, .names = names, .nnames = names ? nnames : 0,
        .err = err, .errlen = errlen
    };
    return s_run (&self, text, NULL);
}
