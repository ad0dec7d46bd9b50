/* Table-driven configuration: files, flags and run-time CONFIG SET. */
#include "core/config.h"

#include "core/error.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* Split a config line into name and value in place. Returns 0 for a blank
 * or comment line, 1 for name+value, CORE_EINVAL if malformed. */
static int split_line(char *line, char **name, char **value)
{
    char *p = line;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == 0 || *p == '#')
        return 0;
    *name = p;
    while (*p && !isspace((unsigned char)*p))
        p++;
    if (*p == 0)
        return CORE_EINVAL;
    *p++ = 0;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '"') {
        p++;
        char *end = strchr(p, '"');
        if (!end)
            return CORE_EINVAL;
        *end = 0;
        *value = p;
        return 1;
    }
    *value = p;
    char *end = p + strlen(p);
    while (end > p && isspace((unsigned char)end[-1]))
        *--end = 0;
    return 1;
}

int core_config_load_file(const struct core_option *opts, const char *path, char *err,
                          size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "can't open config file '%s': %s", path, strerror(errno));
        return core_from_errno(errno);
    }
    char line[1024];
    int lineno = 0;
    int rc = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *name, *value;
        int s = split_line(line, &name, &value);
        if (s == 0)
            continue;
        char why[256];
        if (s < 0) {
            snprintf(err, errlen, "%s:%d: expected 'name value'", path, lineno);
            rc = CORE_EINVAL;
            break;
        }
        rc = core_config_set(opts, name, value, true, why, sizeof(why));
        if (rc) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
            break;
        }
    }
    fclose(f);
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
    int i = 1;
    for (int j = 1; j < argc; j++) {
        if (!strcmp(argv[j], "--help") || !strcmp(argv[j], "-h")) {
            core_config_usage(stdout, opts, usage_line);
            return 1;
        }
    }
    if (i < argc && strncmp(argv[i], "--", 2) != 0) {
        int rc = core_config_load_file(opts, argv[i], err, errlen);
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
