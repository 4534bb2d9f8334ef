/*  client_extract - a model's completion -> the candidate of a PyTorch task.

    Fenced blocks are found as CommonMark opens and closes them (up to three
    spaces of indent, three or more backticks or tildes, a closing fence at
    least as long), exactly as python/kgym/extract.py's code_blocks does.
*/
#include "client_extract.h"
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXTRACT_HINT \
    "Expected: the whole module in one ```python block defining `class ModelNew(nn.Module)` " \
    "(your Triton kernels, or a load_inline extension, and the class whose forward runs them), " \
    "as the prompt asks."

//  One fenced block.
typedef struct {
    char tag [32];              //  the info string's first word, lower case ("" untagged)
    const char *body;           //  into the text
    size_t len;                 //  bytes of body
    size_t line;                //  1-based line of the opening fence
    bool closed;                //  a closing fence was found
} s_block_t;

//  What is missing, in a few words, into problem.
static void
s_feedback (char *problem, size_t len, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    vsnprintf (problem, len, fmt, args);
    va_end (args);
}

void
client_extract_feedback (const char *problem, char *feedback, size_t len)
{
    snprintf (feedback, len, "kgym could not grade this completion: %s. %s", problem, EXTRACT_HINT);
}

static bool
s_word (char c)
{
    return isalnum ((unsigned char) c) || c == '_' || (unsigned char) c >= 0x80;
}

bool
client_extract_defines (const char *source, size_t len, const char *name)
{
    size_t n = strlen (name);
    const char *end = source + len;
    for (const char *line = source; line < end; ) {
        const char *eol = memchr (line, '\n', (size_t) (end - line));
        eol = eol? eol: end;
        const char *p = line;
        //  class NAME / def NAME / async def NAME
        static const char *const keywords [] = { "class", "def", "async", NULL };
        for (size_t k = 0; keywords [k]; k++) {
            size_t kl = strlen (keywords [k]);
            if ((size_t) (eol - p) <= kl || strncmp (p, keywords [k], kl) || (p [kl] != ' ' && p [kl] != '\t'))
                continue;
            const char *q = p + kl;
            while (q < eol && (*q == ' ' || *q == '\t'))
                q++;
            if (k == 2) {               //  async must be followed by def
                if ((size_t) (eol - q) <= 3 || strncmp (q, "def", 3) || (q [3] != ' ' && q [3] != '\t'))
                    continue;
                q += 3;
                while (q < eol && (*q == ' ' || *q == '\t'))
                    q++;
            }
            if ((size_t) (eol - q) >= n && strncmp (q, name, n) == 0 && (q + n == eol || !s_word (q [n])))
                return true;
        }
        //  NAME = ... (or NAME: type = ...), not NAME == ...
        if ((size_t) (eol - p) > n && strncmp (p, name, n) == 0) {
            const char *q = p + n;
            while (q < eol && (*q == ' ' || *q == '\t'))
                q++;
            if (q < eol && *q == ':') {
                while (q < eol && *q != '=')
                    q++;
            }
            if (q < eol && *q == '=' && (q + 1 == eol || q [1] != '='))
                return true;
        }
        line = eol + 1;
    }
    return false;
}

//  The fence of a closing line for fence (flen of it), or false.
static bool
s_closes (const char *line, size_t n, char fence, size_t flen)
{
    size_t i = 0;
    while (i < 3 && i < n && line [i] == ' ')
        i++;
    size_t c = 0;
    while (i + c < n && line [i + c] == fence)
        c++;
    size_t rest = i + c;
    while (rest < n && (line [rest] == ' ' || line [rest] == '\t' || line [rest] == '\r'))
        rest++;
    return c >= flen && rest == n;
}

//  The length of the line at p (to its '\n' or the end).
static size_t
s_line_len (const char *p)
{
    const char *eol = strchr (p, '\n');
    return eol? (size_t) (eol - p): strlen (p);
}

//  Every fenced block of text in order, at most max; their number. An
//  unclosed block runs to the end.
static size_t
s_blocks (const char *text, s_block_t *blocks, size_t max)
{
    size_t count = 0, lineno = 1;
    const char *line = text;
    const char *end = text + strlen (text);
    while (line <= end && count < max) {
        size_t n = s_line_len (line);
        size_t indent = 0;
        while (indent < 3 && indent < n && line [indent] == ' ')
            indent++;
        char fence = indent < n? line [indent]: 0;
        size_t flen = 0;
        while (indent + flen < n && line [indent + flen] == fence)
            flen++;
        const char *info = line + indent + flen;
        size_t info_len = n - indent - flen;
        bool opener = (fence == '`' || fence == '~') && flen >= 3
                   && memchr (info, '`', info_len) == NULL;
        if (!opener) {
            if (line + n >= end)
                break;
            line += n + 1;
            lineno++;
            continue;
        }
        s_block_t *block = &blocks [count++];
        memset (block, 0, sizeof *block);
        //  The tag: the info string's first word, lower case, {.lang} braces off.
        while (info_len && (*info == ' ' || *info == '\t')) {
            info++;
            info_len--;
        }
        size_t t = 0;
        while (t < info_len && !isspace ((unsigned char) info [t]))
            t++;
        const char *tag = info;
        while (t && (*tag == '{' || *tag == '.')) {
            tag++;
            t--;
        }
        while (t && tag [t - 1] == '}')
            t--;
        for (size_t i = 0; i < t && i + 1 < sizeof block->tag; i++)
            block->tag [i] = (char) tolower ((unsigned char) tag [i]);
        block->line = lineno;
        if (line + n >= end) {
            //  The opening fence is the last line: an empty, unclosed block.
            block->body = end;
            return count;
        }
        block->body = line + n + 1;
        const char *at = block->body;
        lineno++;
        while (true) {
            size_t m = s_line_len (at);
            if (s_closes (at, m, fence, flen)) {
                block->len = at > block->body? (size_t) (at - block->body) - 1: 0;
                block->closed = true;
                break;
            }
            if (at + m >= end) {
                block->len = (size_t) (end - block->body);
                return count;
            }
            at += m + 1;
            lineno++;
        }
        //  Past the closing fence.
        size_t m = s_line_len (at);
        if (at + m >= end)
            break;
        line = at + m + 1;
        lineno++;
    }
    return count;
}

static bool
s_is_python (const char *tag)
{
    return strcmp (tag, "python") == 0 || strcmp (tag, "py") == 0 || strcmp (tag, "python3") == 0;
}

const char *
client_extract_entry (json_t *task)
{
    json_t *reference = json_object_get (task, "reference");
    const char *lang = json_string_value (json_object_get (reference, "lang"));
    if (!lang || strcmp (lang, "python"))
        return NULL;
    json_t *python = json_object_get (task, "python");
    const char *given = json_string_value (json_object_get (python, "candidate_entry"));
    if (given && *given)
        return given;
    const char *entry = json_string_value (json_object_get (python, "entry"));
    if (!entry)
        return "ModelNew";
    return isupper ((unsigned char) entry [0])? "ModelNew": entry;
}

json_t *
client_extract_python (const char *completion, const char *entry, char *problem, size_t len)
{
    const char *text = completion;
    const char *think_end = NULL;
    for (const char *at = strstr (text, "</think>"); at; at = strstr (at + 1, "</think>"))
        think_end = at;
    if (think_end)
        text = think_end + strlen ("</think>");
    else
    if (strstr (text, "<think>")) {
        s_feedback (problem, len, "the completion ends inside <think>...</think> (cut off while "
                    "reasoning?): there is no answer after the reasoning");
        return NULL;
    }
    if (strspn (text, " \t\r\n") == strlen (text)) {
        s_feedback (problem, len, "the completion is empty");
        return NULL;
    }
    //  Enough for any real answer; more blocks than this are not looked at.
    s_block_t blocks [256];
    size_t count = s_blocks (text, blocks, sizeof blocks / sizeof blocks [0]);
    const s_block_t *chosen = NULL, *open = NULL;
    size_t python = 0;
    for (size_t i = 0; i < count; i++) {
        const s_block_t *block = &blocks [i];
        bool defines = client_extract_defines (block->body, block->len, entry);
        if (!s_is_python (block->tag) && !(block->tag [0] == 0 && defines))
            continue;
        python++;
        if (defines && block->closed)
            chosen = block;
        else
        if (defines)
            open = block;
    }
    if (chosen) {
        if (strspn (chosen->body, " \t\r\n") >= chosen->len) {
            s_feedback (problem, len, "the ```python block at line %zu is empty", chosen->line);
            return NULL;
        }
        json_t *source = json_stringn (chosen->body, chosen->len);
        if (!source) {
            s_feedback (problem, len, "the ```python block at line %zu is not UTF-8 text", chosen->line);
            return NULL;
        }
        return json_pack ("{s:s, s:o}", "lang", "python", "source", source);
    }
    if (open)
        s_feedback (problem, len, "the ```python block opened at line %zu, which defines `%s`, is "
                    "never closed (was the completion cut off?)", open->line, entry);
    else
    if (python)
        s_feedback (problem, len, "no ```python block defines `%s` (%zu ```python block%s, none with "
                    "`class %s` at the start of a line)", entry, python, python == 1? "": "s", entry);
    else
    if (count) {
        char tags [256] = "";
        size_t at = 0;
        for (size_t i = 0; i < count && at < sizeof tags; i++) {
            if (!blocks [i].tag [0] || strstr (tags, blocks [i].tag))
                continue;
            at += (size_t) snprintf (tags + at, sizeof tags - at, "%s```%s", at? ", ": "", blocks [i].tag);
        }
        if (at)
            s_feedback (problem, len, "no ```python block: found only %s", tags);
        else
            s_feedback (problem, len, "no ```python block defines `%s`", entry);
    }
    else
        s_feedback (problem, len, "no fenced ```python block with the module");
    return NULL;
}
