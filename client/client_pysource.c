/*  client_pysource - what a Python module declares, read without running it.

    One pass over the bytes, logical line by logical line (Python's own
    rules: a newline inside brackets or after a backslash does not end a
    line; blank and comment lines do not count for indentation). A line
    at column 0 is a top-level statement: `class`/`def` open a scope that
    the indented lines after it belong to; `NAME = INT` is a constant.
    Every identifier of a scope's lines that refers to a name (not an
    attribute, not a keyword argument) is remembered for _uses.
*/
#include "client_pysource.h"
#include <czmq.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PYSOURCE_MAX_DEPTH   200        //  brackets open at once (Python's own limit)
#define PYSOURCE_MAX_INDENT  100        //  indentation levels (Python's own limit)
#define PYSOURCE_MAX_CONSTS  4096       //  constants kept; more are not read as constants
#define PYSOURCE_HEAD_TOKENS 5          //  tokens of a logical line kept to classify it
#define PYSOURCE_NAME_MAX    256        //  bytes of an identifier kept

typedef enum { T_NONE, T_NAME, T_NUMBER, T_STRING, T_OP } s_kind_t;

//  One token of a line's head.
typedef struct {
    s_kind_t kind;
    const char *text;           //  into the source
    size_t len;
} s_token_t;

//  One top-level class or function.
typedef struct {
    char kind;                  //  'c' class, 'd' def
    zhashx_t *uses;             //  identifiers its lines mention (keys only)
} s_scope_t;

//  One integer constant.
typedef struct {
    char *name;
    int64_t value;
} s_const_t;

struct client_pysource_t {
    char *error;                //  the first syntax error, or NULL
    zhashx_t *scopes;           //  name -> s_scope_t (the last definition)
    zhashx_t *defined;          //  names defined at the top level (keys only)
    s_const_t *consts;          //  constants in source order
    size_t nconsts;             //  entries used
};

//  The reader's state during new.
typedef struct {
    client_pysource_t *self;
    const char *src;            //  the source
    size_t len;                 //  its bytes
    size_t pos;                 //  next byte
    size_t line;                //  1-based line of pos
    char brackets [PYSOURCE_MAX_DEPTH];     //  open brackets
    size_t bracket_line [PYSOURCE_MAX_DEPTH];
    size_t depth;               //  entries used
    size_t indents [PYSOURCE_MAX_INDENT];   //  indentation stack (columns)
    size_t nindents;            //  entries used (>= 1)
    size_t header_line;         //  line of the last logical line when it ended in ':' (0: it did not)
    s_scope_t *scope;           //  the scope lines belong to, or NULL
} s_reader_t;

static void
s_scope_destroy (void **item)
{
    s_scope_t *scope = (s_scope_t *) *item;
    if (scope) {
        zhashx_destroy (&scope->uses);
        free (scope);
        *item = NULL;
    }
}

//  Record the first syntax error; -1.
static int
s_fail (s_reader_t *r, size_t line, const char *fmt, ...)
{
    if (r->self->error)
        return -1;
    char text [256];
    va_list args;
    va_start (args, fmt);
    vsnprintf (text, sizeof text, fmt, args);
    va_end (args);
    r->self->error = zsys_sprintf ("line %zu: %s", line, text);
    return -1;
}

static bool
s_ident_start (unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}

static bool
s_ident_char (unsigned char c)
{
    return s_ident_start (c) || (c >= '0' && c <= '9');
}

static bool
s_token_is (const s_token_t *token, s_kind_t kind, const char *text)
{
    return token->kind == kind
        && (!text || (token->len == strlen (text) && memcmp (token->text, text, token->len) == 0));
}

//  Consume a newline at pos ("\n", "\r\n" or "\r"); true when there was one.
static bool
s_newline (s_reader_t *r)
{
    if (r->pos < r->len && r->src [r->pos] == '\r') {
        r->pos++;
        if (r->pos < r->len && r->src [r->pos] == '\n')
            r->pos++;
        r->line++;
        return true;
    }
    if (r->pos < r->len && r->src [r->pos] == '\n') {
        r->pos++;
        r->line++;
        return true;
    }
    return false;
}

//  A string literal whose quote is at pos (its prefix already passed).
static int
s_string (s_reader_t *r)
{
    char quote = r->src [r->pos];
    size_t start = r->line;
    bool triple = r->pos + 2 < r->len && r->src [r->pos + 1] == quote && r->src [r->pos + 2] == quote;
    r->pos += triple? 3: 1;
    while (r->pos < r->len) {
        char c = r->src [r->pos];
        if (c == '\\') {
            r->pos++;
            if (!s_newline (r) && r->pos < r->len)
                r->pos++;
            continue;
        }
        if (c == '\n' || c == '\r') {
            if (!triple)
                return s_fail (r, start, "unterminated string literal");
            s_newline (r);
            continue;
        }
        if (c == quote) {
            if (!triple) {
                r->pos++;
                return 0;
            }
            if (r->pos + 2 < r->len && r->src [r->pos + 1] == quote && r->src [r->pos + 2] == quote) {
                r->pos += 3;
                return 0;
            }
        }
        r->pos++;
    }
    return s_fail (r, start, triple? "unterminated triple-quoted string literal"
                                   : "unterminated string literal");
}

//  True when the name just read is a string prefix (r, b, u, f and pairs).
static bool
s_string_prefix (const char *text, size_t len)
{
    if (len == 0 || len > 2)
        return false;
    char a = (char) (text [0] | 0x20), b = len == 2? (char) (text [1] | 0x20): 0;
    if (len == 1)
        return a == 'r' || a == 'b' || a == 'u' || a == 'f';
    return (a == 'r' && (b == 'b' || b == 'f')) || ((a == 'b' || a == 'f') && b == 'r');
}

//  A non-negative integer literal (decimal, 0x, 0o, 0b, with single '_'
//  between digits) into *value: 0, or -1 when it is not one or overflows.
static int
s_int_literal (const char *text, size_t len, int64_t *value)
{
    unsigned base = 10;
    size_t i = 0;
    if (len > 2 && text [0] == '0') {
        char p = (char) (text [1] | 0x20);
        base = p == 'x'? 16: p == 'o'? 8: p == 'b'? 2: 10;
        if (base != 10)
            i = 2;
    }
    if (i < len && text [i] == '_' && base != 10)
        i++;                        //  0x_ff is allowed
    uint64_t v = 0;
    bool digit = false, underscore = false;
    for (; i < len; i++) {
        char c = text [i];
        if (c == '_') {
            if (!digit || underscore)
                return -1;
            underscore = true;
            continue;
        }
        unsigned d = (c >= '0' && c <= '9')? (unsigned) (c - '0')
                   : ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')? (unsigned) ((c | 0x20) - 'a' + 10): 99;
        if (d >= base)
            return -1;
        if (v > ((uint64_t) INT64_MAX - d) / base)
            return -1;
        v = v * base + d;
        digit = true;
        underscore = false;
    }
    if (!digit || underscore)
        return -1;
    *value = (int64_t) v;
    return 0;
}

//  A number at pos.
static int
s_number (s_reader_t *r)
{
    size_t start = r->pos;
    bool hex = r->pos + 1 < r->len && r->src [r->pos] == '0' && (r->src [r->pos + 1] | 0x20) == 'x';
    while (r->pos < r->len) {
        char c = r->src [r->pos];
        if (s_ident_char ((unsigned char) c) || c == '.')
            r->pos++;
        else
        if ((c == '+' || c == '-') && !hex && (r->src [r->pos - 1] | 0x20) == 'e')
            r->pos++;
        else
            break;
    }
    //  Python 3 has no octal 017: zeros then another digit is an error.
    const char *text = r->src + start;
    size_t len = r->pos - start;
    if (len > 1 && text [0] == '0' && strspn (text, "0123456789_") >= len) {
        for (size_t i = 0; i < len; i++)
            if (text [i] >= '1' && text [i] <= '9')
                return s_fail (r, r->line, "leading zeros in decimal integer literals are not permitted");
    }
    return 0;
}

//  Operators, longest first within each first character.
static const char *const s_ops [] = {
    "**=", "//=", ">>=", "<<=", "...",
    "**", "//", ">>", "<<", "<=", ">=", "==", "!=", "->", "+=", "-=", "*=", "/=", "%=",
    "&=", "|=", "^=", "@=", ":=",
    "+", "-", "*", "/", "%", "@", "&", "|", "^", "~", "<", ">", "=", ".", ",", ":", ";",
    NULL
};

//  An operator or bracket at pos into token.
static int
s_operator (s_reader_t *r, s_token_t *token)
{
    char c = r->src [r->pos];
    if (c == '(' || c == '[' || c == '{') {
        if (r->depth == PYSOURCE_MAX_DEPTH)
            return s_fail (r, r->line, "too many nested parentheses");
        r->brackets [r->depth] = c;
        r->bracket_line [r->depth++] = r->line;
        token->kind = T_OP;
        token->text = r->src + r->pos++;
        token->len = 1;
        return 0;
    }
    if (c == ')' || c == ']' || c == '}') {
        char open = c == ')'? '(': c == ']'? '[': '{';
        if (r->depth == 0)
            return s_fail (r, r->line, "unmatched '%c'", c);
        if (r->brackets [r->depth - 1] != open)
            return s_fail (r, r->line, "closing parenthesis '%c' does not match opening parenthesis "
                           "'%c' on line %zu", c, r->brackets [r->depth - 1],
                           r->bracket_line [r->depth - 1]);
        r->depth--;
        token->kind = T_OP;
        token->text = r->src + r->pos++;
        token->len = 1;
        return 0;
    }
    for (size_t i = 0; s_ops [i]; i++) {
        size_t n = strlen (s_ops [i]);
        if (r->pos + n <= r->len && memcmp (r->src + r->pos, s_ops [i], n) == 0) {
            token->kind = T_OP;
            token->text = r->src + r->pos;
            token->len = n;
            r->pos += n;
            return 0;
        }
    }
    if ((unsigned char) c < 0x20 || c == 0x7f)
        return s_fail (r, r->line, "invalid non-printable character U+%04X", (unsigned char) c);
    return s_fail (r, r->line, "invalid character '%c'", c);
}

//  Remember an identifier in the current scope.
static void
s_use (s_reader_t *r, const s_token_t *token)
{
    if (!r->scope || token->len > PYSOURCE_NAME_MAX)
        return;
    char name [PYSOURCE_NAME_MAX + 1];
    memcpy (name, token->text, token->len);
    name [token->len] = 0;
    zhashx_insert (r->scope->uses, name, (void *) 1);
}

//  A token's text as a new string (NULL when too long).
static char *
s_text (const s_token_t *token)
{
    return token->len <= PYSOURCE_NAME_MAX? strndup (token->text, token->len): NULL;
}

//  Open the scope of a top-level class or def whose name is token.
static int
s_open_scope (s_reader_t *r, char kind, const s_token_t *token)
{
    char *name = s_text (token);
    s_scope_t *scope = name? (s_scope_t *) calloc (1, sizeof (s_scope_t)): NULL;
    if (scope)
        scope->uses = zhashx_new ();
    if (!scope || !scope->uses) {
        free (name);
        if (scope)
            free (scope);
        return -1;
    }
    scope->kind = kind;
    zhashx_update (r->self->scopes, name, scope);       //  a later definition wins
    zhashx_insert (r->self->defined, name, (void *) 1);
    r->scope = scope;
    free (name);
    return 0;
}

//  Forget the constant name (assigned something else).
static void
s_const_drop (client_pysource_t *self, const char *name)
{
    for (size_t i = 0; i < self->nconsts; i++)
        if (streq (self->consts [i].name, name)) {
            free (self->consts [i].name);
            memmove (&self->consts [i], &self->consts [i + 1],
                     (self->nconsts - i - 1) * sizeof (s_const_t));
            self->nconsts--;
            return;
        }
}

//  name = value: an existing constant keeps its place.
static void
s_const_set (client_pysource_t *self, const char *name, int64_t value)
{
    for (size_t i = 0; i < self->nconsts; i++)
        if (streq (self->consts [i].name, name)) {
            self->consts [i].value = value;
            return;
        }
    if (self->nconsts == PYSOURCE_MAX_CONSTS)
        return;
    char *copy = strdup (name);
    if (!copy)
        return;
    self->consts [self->nconsts].name = copy;
    self->consts [self->nconsts++].value = value;
}

static bool
s_is_assign_op (const s_token_t *token)
{
    static const char *const ops [] = {
        "=", "+=", "-=", "*=", "/=", "//=", "%=", "@=", "&=", "|=", "^=", ">>=", "<<=", "**=", NULL
    };
    for (size_t i = 0; ops [i]; i++)
        if (s_token_is (token, T_OP, ops [i]))
            return true;
    return false;
}

//  A top-level statement whose head is tokens: assignments and constants
//  (classes and defs opened their scope while being read).
static void
s_statement (s_reader_t *r, const s_token_t *head, size_t ntokens)
{
    if (ntokens < 2 || head [0].kind != T_NAME || !s_is_assign_op (&head [1]))
        return;
    char *name = s_text (&head [0]);
    if (!name)
        return;
    zhashx_insert (r->self->defined, name, (void *) 1);
    int64_t value;
    if (ntokens == 3 && s_token_is (&head [1], T_OP, "=") && head [2].kind == T_NUMBER
    &&  s_int_literal (head [2].text, head [2].len, &value) == 0)
        s_const_set (r->self, name, value);
    else
        s_const_drop (r->self, name);
    free (name);
}

//  The indentation of a new logical line at column col.
static int
s_indent (s_reader_t *r, size_t col)
{
    size_t top = r->indents [r->nindents - 1];
    if (col > top) {
        if (!r->header_line)
            return s_fail (r, r->line, "unexpected indent");
        if (r->nindents == PYSOURCE_MAX_INDENT)
            return s_fail (r, r->line, "too many levels of indentation");
        r->indents [r->nindents++] = col;
    }
    else {
        if (r->header_line)
            return s_fail (r, r->line, "expected an indented block after the ':' on line %zu",
                           r->header_line);
        while (col < r->indents [r->nindents - 1])
            r->nindents--;
        if (col != r->indents [r->nindents - 1])
            return s_fail (r, r->line, "unindent does not match any outer indentation level");
    }
    r->header_line = 0;
    return 0;
}

//  One logical line from pos (at its first token). 0, or -1 on a syntax error.
static int
s_logical_line (s_reader_t *r, size_t col)
{
    size_t first_line = r->line;
    bool top = col == 0;
    if (top)
        r->scope = NULL;
    s_token_t head [PYSOURCE_HEAD_TOKENS];
    s_token_t last = { T_NONE, NULL, 0 };
    s_token_t none = last, pending = last, previous = last;
    size_t ntokens = 0;
    while (r->pos < r->len) {
        char c = r->src [r->pos];
        s_token_t token = { T_NONE, NULL, 0 };
        if (c == ' ' || c == '\t' || c == '\f') {
            r->pos++;
            continue;
        }
        if (c == '#') {
            while (r->pos < r->len && r->src [r->pos] != '\n' && r->src [r->pos] != '\r')
                r->pos++;
            continue;
        }
        if (c == '\\') {
            r->pos++;
            if (!s_newline (r))
                return s_fail (r, r->line, r->pos < r->len?
                               "unexpected character after line continuation character"
                               : "unexpected end of file after line continuation character");
            continue;
        }
        if (c == '\n' || c == '\r') {
            s_newline (r);
            if (r->depth)
                continue;
            break;
        }
        if (c == '\'' || c == '"') {
            token.kind = T_STRING;
            if (s_string (r))
                return -1;
        }
        else
        if ((c >= '0' && c <= '9')
        ||  (c == '.' && r->pos + 1 < r->len && r->src [r->pos + 1] >= '0' && r->src [r->pos + 1] <= '9')) {
            token.kind = T_NUMBER;
            token.text = r->src + r->pos;
            if (s_number (r))
                return -1;
            token.len = (size_t) (r->src + r->pos - token.text);
        }
        else
        if (s_ident_start ((unsigned char) c)) {
            token.text = r->src + r->pos;
            while (r->pos < r->len && s_ident_char ((unsigned char) r->src [r->pos]))
                r->pos++;
            token.len = (size_t) (r->src + r->pos - token.text);
            if (r->pos < r->len && (r->src [r->pos] == '\'' || r->src [r->pos] == '"')
            &&  s_string_prefix (token.text, token.len)) {
                token.kind = T_STRING;
                if (s_string (r))
                    return -1;
            }
            else
                token.kind = T_NAME;
        }
        else
        if (s_operator (r, &token))
            return -1;

        if (ntokens < PYSOURCE_HEAD_TOKENS)
            head [ntokens] = token;
        ntokens++;
        last = token;
        //  class NAME / def NAME / async def NAME at the top level open a scope.
        if (top && token.kind == T_NAME && (ntokens == 2 || ntokens == 3)) {
            const s_token_t *keyword = &head [ntokens - 2];
            bool is_class = ntokens == 2 && s_token_is (keyword, T_NAME, "class");
            bool is_def = s_token_is (keyword, T_NAME, "def")
                       && (ntokens == 2 || s_token_is (&head [0], T_NAME, "async"));
            if ((is_class || is_def) && s_open_scope (r, is_class? 'c': 'd', &token))
                return s_fail (r, r->line, "out of memory");
            if (is_class || is_def) {
                previous = token;
                continue;
            }
        }
        //  A name is a reference unless it is an attribute (after '.') or a
        //  keyword argument (before '=' inside brackets): decided at the next token.
        if (pending.kind == T_NAME && !(r->depth && s_token_is (&token, T_OP, "=")))
            s_use (r, &pending);
        pending = token.kind == T_NAME && !s_token_is (&previous, T_OP, ".")? token: none;
        previous = token;
    }
    if (pending.kind == T_NAME)
        s_use (r, &pending);
    if (r->pos >= r->len && r->depth)
        return s_fail (r, r->bracket_line [r->depth - 1], "'%c' was never closed",
                       r->brackets [r->depth - 1]);
    //  A def or class must be followed by its name, and that by '(' (or ':').
    size_t n = ntokens < PYSOURCE_HEAD_TOKENS? ntokens: PYSOURCE_HEAD_TOKENS;
    size_t k = n && s_token_is (&head [0], T_NAME, "async")? 1: 0;
    if (n > k && (s_token_is (&head [k], T_NAME, "def") || s_token_is (&head [k], T_NAME, "class"))) {
        bool is_def = s_token_is (&head [k], T_NAME, "def");
        if (n < k + 2 || head [k + 1].kind != T_NAME)
            return s_fail (r, first_line, "'%s' must be followed by a name", is_def? "def": "class");
        if (n < k + 3 || !(s_token_is (&head [k + 2], T_OP, "(")
                           || (!is_def && s_token_is (&head [k + 2], T_OP, ":"))))
            return s_fail (r, first_line, is_def? "'def %.*s' must be followed by '('"
                                               : "'class %.*s' must be followed by '(' or ':'",
                           (int) head [k + 1].len, head [k + 1].text);
    }
    if (top)
        s_statement (r, head, n);
    r->header_line = s_token_is (&last, T_OP, ":")? first_line: 0;
    return 0;
}

static int
s_read (s_reader_t *r)
{
    //  A UTF-8 byte order mark is allowed.
    if (r->len >= 3 && memcmp (r->src, "\xEF\xBB\xBF", 3) == 0)
        r->pos = 3;
    while (r->pos < r->len) {
        //  At the start of a physical line outside brackets: indentation.
        size_t col = 0;
        while (r->pos < r->len) {
            char c = r->src [r->pos];
            if (c == ' ')
                col++;
            else
            if (c == '\t')
                col = (col / 8 + 1) * 8;
            else
            if (c == '\f')
                col = 0;
            else
                break;
            r->pos++;
        }
        if (r->pos >= r->len)
            break;
        char c = r->src [r->pos];
        if (c == '#') {
            while (r->pos < r->len && r->src [r->pos] != '\n' && r->src [r->pos] != '\r')
                r->pos++;
            s_newline (r);
            continue;
        }
        if (c == '\n' || c == '\r') {
            s_newline (r);
            continue;
        }
        if (s_indent (r, col) || s_logical_line (r, col))
            return -1;
    }
    if (r->header_line)
        return s_fail (r, r->header_line, "expected an indented block after the ':' here, "
                       "found the end of the file");
    return 0;
}

client_pysource_t *
client_pysource_new (const char *source, size_t len)
{
    client_pysource_t *self = (client_pysource_t *) calloc (1, sizeof (client_pysource_t));
    if (!self)
        return NULL;
    self->scopes = zhashx_new ();
    self->defined = zhashx_new ();
    self->consts = (s_const_t *) calloc (PYSOURCE_MAX_CONSTS, sizeof (s_const_t));
    s_reader_t *r = (s_reader_t *) calloc (1, sizeof (s_reader_t));
    if (!self->scopes || !self->defined || !self->consts || !r) {
        free (r);
        client_pysource_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->scopes, s_scope_destroy);
    r->self = self;
    r->src = source? source: "";
    r->len = source? len: 0;
    r->line = 1;
    r->nindents = 1;
    s_read (r);
    free (r);
    return self;
}

void
client_pysource_destroy (client_pysource_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    client_pysource_t *self = *self_p;
    for (size_t i = 0; self->consts && i < self->nconsts; i++)
        free (self->consts [i].name);
    free (self->consts);
    zhashx_destroy (&self->scopes);
    zhashx_destroy (&self->defined);
    free (self->error);
    free (self);
    *self_p = NULL;
}

const char *
client_pysource_error (client_pysource_t *self)
{
    return self->error;
}

static bool
s_has (client_pysource_t *self, const char *name, char kind)
{
    s_scope_t *scope = (s_scope_t *) zhashx_lookup (self->scopes, name);
    return scope && scope->kind == kind;
}

bool
client_pysource_has_class (client_pysource_t *self, const char *name)
{
    return s_has (self, name, 'c');
}

bool
client_pysource_has_def (client_pysource_t *self, const char *name)
{
    return s_has (self, name, 'd');
}

bool
client_pysource_defines (client_pysource_t *self, const char *name)
{
    return zhashx_lookup (self->defined, name) != NULL;
}

bool
client_pysource_uses (client_pysource_t *self, const char *scope_name, const char *name)
{
    s_scope_t *scope = (s_scope_t *) zhashx_lookup (self->scopes, scope_name);
    return scope && zhashx_lookup (scope->uses, name) != NULL;
}

size_t
client_pysource_constants (client_pysource_t *self)
{
    return self->nconsts;
}

const char *
client_pysource_constant_name (client_pysource_t *self, size_t i)
{
    return i < self->nconsts? self->consts [i].name: NULL;
}

int64_t
client_pysource_constant_value (client_pysource_t *self, size_t i)
{
    return i < self->nconsts? self->consts [i].value: 0;
}

int
client_pysource_constant (client_pysource_t *self, const char *name, int64_t *value)
{
    for (size_t i = 0; i < self->nconsts; i++)
        if (streq (self->consts [i].name, name)) {
            *value = self->consts [i].value;
            return 0;
        }
    return -1;
}
