/* Table-driven configuration: files, flags and run-time CONFIG SET. */
#include "core/config.h"

#include "core/error.h"
#include "core/log.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int core_parse_int64(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 20)
        return CORE_EINVAL;
    size_t i = 0;
    bool neg = false;
    if (s[0] == '-' || s[0] == '+') {
        neg = s[0] == '-';
        i = 1;
        if (len == 1)
            return CORE_EINVAL;
    }
    uint64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return CORE_EINVAL;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return CORE_ERANGE;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return CORE_ERANGE;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX)
            return CORE_ERANGE;
        *out = (int64_t)v;
    }
    return 0;
}

int core_parse_memory(const char *s, int64_t *out)
{
    size_t len = strlen(s);
    size_t digits = 0;
    while (digits < len && (isdigit((unsigned char)s[digits]) || (digits == 0 && s[0] == '-')))
        digits++;
    const char *unit = s + digits;
    int64_t mul;
    if (*unit == 0 || strcasecmp(unit, "b") == 0)
        mul = 1;
    else if (strcasecmp(unit, "k") == 0)
        mul = 1000;
    else if (strcasecmp(unit, "kb") == 0)
        mul = 1024;
    else if (strcasecmp(unit, "m") == 0)
        mul = 1000 * 1000;
    else if (strcasecmp(unit, "mb") == 0)
        mul = 1024 * 1024;
    else if (strcasecmp(unit, "g") == 0)
        mul = 1000LL * 1000 * 1000;
    else if (strcasecmp(unit, "gb") == 0)
        mul = 1024LL * 1024 * 1024;
    else
        return CORE_EINVAL;
    int64_t v;
    int rc = core_parse_int64(s, digits, &v);
    if (rc)
        return rc;
    if (v < 0)
        return CORE_ERANGE;
    if (v > INT64_MAX / mul)
        return CORE_ERANGE;
    *out = v * mul;
    return 0;
}

const struct core_option *core_config_find(const struct core_option *opts, const char *name)
{
    for (const struct core_option *o = opts; o->name; o++)
        if (strcasecmp(o->name, name) == 0)
            return o;
    return NULL;
}

static int parse_bool(const char *v, bool *out)
{
    if (!strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcmp(v, "1")) {
        *out = true;
        return 0;
    }
    if (!strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcmp(v, "0")) {
        *out = false;
        return 0;
    }
    return CORE_EINVAL;
}

int core_config_set(const struct core_option *opts, const char *name, const char *value,
                    bool at_start, char *err, size_t errlen)
{
    const struct core_option *o = core_config_find(opts, name);
    if (!o) {
        snprintf(err, errlen, "Unknown option or number of arguments for CONFIG SET - '%s'", name);
        return CORE_ENOTFOUND;
    }
    if ((o->flags & CORE_OPT_IMMUTABLE) && !at_start) {
        snprintf(err, errlen, "can't set immutable config '%s'", o->name);
        return CORE_EINVAL;
    }
    int64_t v;
    int rc;
    switch (o->type) {
    case CORE_OPT_INT:
        rc = core_parse_int64(value, strlen(value), &v);
        goto range;
    case CORE_OPT_MEMORY:
        rc = core_parse_memory(value, &v);
    range:
        if (rc == 0 && (v < o->min || v > o->max))
            rc = CORE_ERANGE;
        if (rc) {
            snprintf(err, errlen, "argument '%s' for '%s' must be %s in [%" PRId64 ", %" PRId64 "]",
                     value, o->name, o->type == CORE_OPT_MEMORY ? "a memory amount" : "an integer",
                     o->min, o->max);
            return rc;
        }
        *(int64_t *)o->ptr = v;
        return 0;
    case CORE_OPT_BOOL:
        if (parse_bool(value, (bool *)o->ptr)) {
            snprintf(err, errlen, "argument '%s' for '%s' must be 'yes' or 'no'", value, o->name);
            return CORE_EINVAL;
        }
        return 0;
    case CORE_OPT_ENUM:
        for (int i = 0; o->choices[i]; i++) {
            if (strcasecmp(o->choices[i], value) == 0) {
                *(int *)o->ptr = i;
                return 0;
            }
        }
        snprintf(err, errlen, "argument '%s' for '%s' is not one of its choices", value, o->name);
        return CORE_EINVAL;
    case CORE_OPT_STRING:
        if (strlen(value) >= CORE_OPT_STRLEN) {
            snprintf(err, errlen, "argument for '%s' is too long", o->name);
            return CORE_ERANGE;
        }
        strcpy((char *)o->ptr, value);
        return 0;
    }
    return CORE_EINVAL;
}

void core_config_format(const struct core_option *o, char *out, size_t outlen)
{
    switch (o->type) {
    case CORE_OPT_INT:
    case CORE_OPT_MEMORY:
        snprintf(out, outlen, "%" PRId64, *(int64_t *)o->ptr);
        break;
    case CORE_OPT_BOOL:
        snprintf(out, outlen, "%s", *(bool *)o->ptr ? "yes" : "no");
        break;
    case CORE_OPT_ENUM:
        snprintf(out, outlen, "%s", o->choices[*(int *)o->ptr]);
        break;
    case CORE_OPT_STRING:
        snprintf(out, outlen, "%s", (const char *)o->ptr);
        break;
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int core_config_split_args(const char *line, size_t len, char *out, size_t outcap, char **argv,
                           int maxargs)
{
    size_t i = 0, o = 0;
    int argc = 0;
    while (i < len && isspace((unsigned char)line[i]))
        i++;
    if (i < len && line[i] == '#')
        return 0;
    while (i < len) {
        if (argc == maxargs)
            return CORE_ERANGE;
        if (o >= outcap)
            return CORE_ERANGE;
        argv[argc++] = out + o;
        char quote = 0;
        if (line[i] == '"' || line[i] == '\'')
            quote = line[i++];
        for (;;) {
            if (i == len) {
                if (quote)
                    return CORE_EINVAL; /* unterminated quotes */
                break;
            }
            char ch = line[i];
            if (!quote && isspace((unsigned char)ch))
                break;
            if (quote && ch == quote) {
                i++;
                /* sdssplitargs: "closing quote must be followed by a space
                 * or nothing at all". */
                if (i < len && !isspace((unsigned char)line[i]))
                    return CORE_EINVAL;
                break;
            }
            if (quote == '"' && ch == '\\' && i + 3 < len && line[i + 1] == 'x' &&
                hexval((unsigned char)line[i + 2]) >= 0 &&
                hexval((unsigned char)line[i + 3]) >= 0) {
                ch = (char)(hexval((unsigned char)line[i + 2]) * 16 +
                            hexval((unsigned char)line[i + 3]));
                i += 4;
            } else if (quote == '"' && ch == '\\' && i + 1 < len) {
                static const char from[] = "nrtba", to[] = "\n\r\t\b\a";
                const char *k = strchr(from, line[i + 1]);
                ch = k && line[i + 1] ? to[k - from] : line[i + 1];
                i += 2;
            } else if (quote == '\'' && ch == '\\' && i + 1 < len && line[i + 1] == '\'') {
                ch = '\'';
                i += 2;
            } else {
                i++;
            }
            if (o + 1 >= outcap)
                return CORE_ERANGE;
            out[o++] = ch;
        }
        out[o++] = 0;
        while (i < len && isspace((unsigned char)line[i]))
            i++;
    }
    return argc;
}

static bool is_ignored(const struct core_config_compat *compat, const char *name)
{
    if (!compat || !compat->ignored)
        return false;
    for (const char *const *n = compat->ignored; *n; n++)
        if (strcasecmp(*n, name) == 0)
            return true;
    return false;
}

#define MAX_LINE_ARGS 64
#define MAX_INCLUDE   8

/* Apply one file; `seen` marks APPEND options already set by a line of this
 * load (indexed like opts), so that their later lines add to the value. */
static int load_file(const struct core_option *opts, const struct core_config_compat *compat,
                     const char *path, int depth, bool *seen, char *err, size_t errlen)
{
    if (depth > MAX_INCLUDE) {
        snprintf(err, errlen, "%s: includes nested too deep", path);
        return CORE_ERANGE;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "can't open config file '%s': %s", path, strerror(errno));
        return core_from_errno(errno);
    }
    char *line = NULL, *args = NULL;
    size_t cap = 0, args_cap = 0;
    ssize_t n;
    int lineno = 0, rc = 0;
    while (rc == 0 && (n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (args_cap < (size_t)n + 1) {
            char *p = realloc(args, (size_t)n + 1);
            if (!p) {
                rc = CORE_ENOMEM;
                snprintf(err, errlen, "%s:%d: out of memory", path, lineno);
                break;
            }
            args = p;
            args_cap = (size_t)n + 1;
        }
        char *argv[MAX_LINE_ARGS];
        int argc = core_config_split_args(line, (size_t)n, args, args_cap, argv, MAX_LINE_ARGS);
        if (argc == 0)
            continue;
        if (argc < 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno,
                     argc == CORE_EINVAL ? "unbalanced quotes in configuration line"
                                         : "too many arguments");
            rc = CORE_EINVAL;
            break;
        }
        if (argc == 1) {
            snprintf(err, errlen, "%s:%d: expected 'name value'", path, lineno);
            rc = CORE_EINVAL;
            break;
        }
        if (strcasecmp(argv[0], "include") == 0) {
            for (int i = 1; i < argc && rc == 0; i++)
                rc = load_file(opts, compat, argv[i], depth + 1, seen, err, errlen);
            continue;
        }
        const struct core_option *o = core_config_find(opts, argv[0]);
        if (!o && is_ignored(compat, argv[0])) {
            if (compat->on_ignored)
                compat->on_ignored(compat->arg, path, lineno, argv[0]);
            else
                core_log(CORE_LOG_WARNING, "%s:%d: '%s' does not apply here; ignored", path, lineno,
                         argv[0]);
            continue;
        }
        /* The arguments joined with single spaces, after what an APPEND
         * option already holds from an earlier line. */
        char value[CORE_OPT_STRLEN];
        size_t used = 0;
        bool append = o && (o->flags & CORE_OPT_APPEND) && seen[o - opts];
        if (append)
            used = (size_t)snprintf(value, sizeof(value), "%s", (const char *)o->ptr);
        for (int i = 1; i < argc && used < sizeof(value); i++)
            used += (size_t)snprintf(value + used, sizeof(value) - used, "%s%s", used ? " " : "",
                                     argv[i]);
        char why[300];
        if (used >= sizeof(value)) {
            snprintf(why, sizeof(why), "argument for '%s' is too long", argv[0]);
            rc = CORE_ERANGE;
        } else {
            rc = core_config_set(opts, argv[0], value, true, why, sizeof(why));
        }
        if (rc) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
            break;
        }
        seen[o - opts] = true;
    }
    free(line);
    free(args);
    fclose(f);
    return rc;
}

int core_config_load_file_compat(const struct core_option *opts,
                                 const struct core_config_compat *compat, const char *path,
                                 char *err, size_t errlen)
{
    size_t count = 0;
    while (opts[count].name)
        count++;
    bool *seen = calloc(count + 1, sizeof(*seen));
    if (!seen)
        return CORE_ENOMEM;
    int rc = load_file(opts, compat, path, 0, seen, err, errlen);
    free(seen);
    return rc;
}

int core_config_load_file(const struct core_option *opts, const char *path, char *err,
                          size_t errlen)
{
    return core_config_load_file_compat(opts, NULL, path, err, errlen);
}

/* A value as a config file line holds it: quoted when empty or when it
 * has blanks, quotes or control bytes. */
static void write_directive(FILE *f, const struct core_option *o)
{
    char v[CORE_OPT_STRLEN + 32];
    core_config_format(o, v, sizeof(v));
    bool plain = v[0] != 0;
    for (const char *p = v; *p; p++)
        if (isspace((unsigned char)*p) || *p == '"' || *p == '\'' || *p == '\\' ||
            (unsigned char)*p < 32)
            plain = false;
    /* An APPEND option's words are separate arguments in the file. */
    if (plain || (v[0] && (o->flags & CORE_OPT_APPEND) && !strpbrk(v, "\"'\\"))) {
        fprintf(f, "%s %s\n", o->name, v);
        return;
    }
    fprintf(f, "%s \"", o->name);
    for (const char *p = v; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 32 || ch == 127)
            fprintf(f, "\\x%02x", ch);
        else
            fputc(ch, f);
    }
    fprintf(f, "\"\n");
}

int core_config_rewrite(const struct core_option *opts, const struct core_option *defaults,
                        const char *path, char *err, size_t errlen)
{
    size_t count = 0;
    while (opts[count].name)
        count++;
    bool *done = calloc(count + 1, sizeof(*done));
    char tmp[CORE_OPT_STRLEN + 32];
    snprintf(tmp, sizeof(tmp), "%s.rewrite-%d", path, (int)getpid());
    FILE *in = fopen(path, "r"), *out = done ? fopen(tmp, "w") : NULL;
    if (!in || !out) {
        int e = errno;
        snprintf(err, errlen, "Rewriting config file: %s", strerror(e));
        if (in)
            fclose(in);
        if (out)
            fclose(out);
        free(done);
        return done ? core_from_errno(e) : CORE_ENOMEM;
    }
    char *line = NULL, *args = NULL;
    size_t cap = 0, args_cap = 0;
    ssize_t n;
    int rc = 0;
    while ((n = getline(&line, &cap, in)) >= 0) {
        if (args_cap < (size_t)n + 1) {
            char *p = realloc(args, (size_t)n + 1);
            if (!p) {
                rc = CORE_ENOMEM;
                break;
            }
            args = p;
            args_cap = (size_t)n + 1;
        }
        char *argv[MAX_LINE_ARGS];
        int argc = core_config_split_args(line, (size_t)n, args, args_cap, argv, MAX_LINE_ARGS);
        const struct core_option *o = argc > 0 ? core_config_find(opts, argv[0]) : NULL;
        if (!o) {
            fputs(line, out);
            if (n > 0 && line[n - 1] != '\n')
                fputc('\n', out);
            continue;
        }
        if (!done[o - opts])
            write_directive(out, o);
        done[o - opts] = true;
    }
    bool header = false;
    for (size_t i = 0; i < count && rc == 0; i++) {
        if (done[i] || (opts[i].flags & CORE_OPT_ALIAS))
            continue;
        char now[CORE_OPT_STRLEN + 32], dflt[CORE_OPT_STRLEN + 32];
        core_config_format(&opts[i], now, sizeof(now));
        core_config_format(&defaults[i], dflt, sizeof(dflt));
        if (strcmp(now, dflt) == 0)
            continue;
        if (!header)
            fprintf(out, "# Generated by CONFIG REWRITE\n");
        header = true;
        write_directive(out, &opts[i]);
    }
    free(line);
    free(args);
    free(done);
    fclose(in);
    if (fflush(out) || fsync(fileno(out)))
        rc = rc ? rc : core_from_errno(errno);
    if (fclose(out) && !rc)
        rc = core_from_errno(errno);
    if (!rc && rename(tmp, path))
        rc = core_from_errno(errno);
    if (rc) {
        snprintf(err, errlen, "Rewriting config file: %s", core_strerror(rc));
        unlink(tmp);
    }
    return rc;
}

void core_config_usage(FILE *out, const struct core_option *opts, const char *usage_line)
{
    fprintf(out, "%s\n\nOptions (also as `name value` lines in the config file):\n", usage_line);
    for (const struct core_option *o = opts; o->name; o++) {
        char def[CORE_OPT_STRLEN + 32];
        if (o->flags & CORE_OPT_SECRET)
            snprintf(def, sizeof(def), "(unset)");
        else
            core_config_format(o, def, sizeof(def));
        fprintf(out, "  --%-24s %s [default: %s]\n", o->name, o->help ? o->help : "",
                def[0] ? def : "\"\"");
        if (o->type == CORE_OPT_ENUM) {
            fprintf(out, "  %-26s one of:", "");
            for (int i = 0; o->choices[i]; i++)
                fprintf(out, " %s", o->choices[i]);
            fprintf(out, "\n");
        }
    }
}

int core_config_parse_args(const struct core_option *opts, int argc, char **argv,
                           const char *usage_line, char *err, size_t errlen)
{
    return core_config_parse_args_compat(opts, NULL, argc, argv, usage_line, err, errlen);
}

int core_config_parse_args_compat(const struct core_option *opts,
                                  const struct core_config_compat *compat, int argc, char **argv,
                                  const char *usage_line, char *err, size_t errlen)
{
    int i = 1;
    for (int j = 1; j < argc; j++) {
        if (!strcmp(argv[j], "--help") || !strcmp(argv[j], "-h")) {
            core_config_usage(stdout, opts, usage_line);
            return 1;
        }
    }
    if (i < argc && strncmp(argv[i], "--", 2) != 0) {
        int rc = core_config_load_file_compat(opts, compat, argv[i], err, errlen);
        if (rc)
            return rc;
        i++;
    }
    while (i < argc) {
        if (strncmp(argv[i], "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument '%s' (options are --name value)", argv[i]);
            return CORE_EINVAL;
        }
        const char *name = argv[i] + 2;
        const struct core_option *o = core_config_find(opts, name);
        const char *value;
        if (o && o->type == CORE_OPT_BOOL && (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))) {
            value = "yes";
            i += 1;
        } else {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "option '--%s' needs a value", name);
                return CORE_EINVAL;
            }
            value = argv[i + 1];
            i += 2;
        }
        char why[300];
        int rc = core_config_set(opts, name, value, true, why, sizeof(why));
        if (rc) {
            snprintf(err, errlen, "%s", rc == CORE_ENOTFOUND ? "" : why);
            if (rc == CORE_ENOTFOUND)
                snprintf(err, errlen, "unknown option '--%s'", name);
            return rc;
        }
    }
    return 0;
}
