/*
 * Configuration in redis-server's style, driven by one option table per
 * program:
 *
 *   prog [config-file] [--name value ...]
 *
 * A config file holds `name value` lines; `#` starts a comment; a value may
 * be double-quoted. Command-line flags are applied after the file, so they
 * win. The same table serves CONFIG GET/SET at run time.
 *
 * The table owns no memory: each option points at storage the program
 * owns (an int64_t, a bool, an int for an enum's index, or a char array of
 * CORE_OPT_STRLEN for a string).
 */
#ifndef CORE_CONFIG_H
#define CORE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CORE_OPT_STRLEN 256

enum core_opt_type {
    CORE_OPT_INT,    /* int64_t, within [min, max] */
    CORE_OPT_MEMORY, /* int64_t bytes; accepts 100mb, 1gb, 4k, ... */
    CORE_OPT_BOOL,   /* bool; yes/no, true/false, 1/0 */
    CORE_OPT_ENUM,   /* int index into choices */
    CORE_OPT_STRING, /* char[CORE_OPT_STRLEN] */
};

enum {
    CORE_OPT_IMMUTABLE = 1 << 0, /* settable at start only, not by CONFIG SET */
    CORE_OPT_SECRET = 1 << 1,    /* not printed by core_config_dump */
};

struct core_option {
    const char *name;
    enum core_opt_type type;
    void *ptr;
    int64_t min, max;           /* CORE_OPT_INT, CORE_OPT_MEMORY */
    const char *const *choices; /* CORE_OPT_ENUM: NULL-terminated */
    unsigned flags;
    const char *help;
};
/* A table ends with an entry whose name is NULL. */

/* Parse a memory amount as Redis does: a plain number of bytes, or with a
 * unit k/kb/m/mb/g/gb (k = 1000, kb = 1024; case-insensitive). Returns 0 or
 * CORE_EINVAL / CORE_ERANGE. */
int core_parse_memory(const char *s, int64_t *out);

/* Parse a whole decimal int64; CORE_EINVAL if not a number, CORE_ERANGE if
 * it overflows. */
int core_parse_int64(const char *s, size_t len, int64_t *out);

/* Find an option by name (case-insensitive); NULL if none. */
const struct core_option *core_config_find(const struct core_option *opts, const char *name);

/* Set one option from text. On failure returns CORE_EINVAL, CORE_ERANGE or
 * CORE_ENOTFOUND and writes a one-line reason into err. `at_start` allows
 * CORE_OPT_IMMUTABLE options. */
int core_config_set(const struct core_option *opts, const char *name, const char *value,
                    bool at_start, char *err, size_t errlen);

/* Format an option's current value (memory as bytes, bools as yes/no). */
void core_config_format(const struct core_option *opt, char *out, size_t outlen);

/* Load `name value` lines from a file. Errors name the file and line. */
int core_config_load_file(const struct core_option *opts, const char *path, char *err,
                          size_t errlen);

/* Apply argv: an optional first argument that does not start with "--" is
 * a config file; then `--name value` pairs (a flag that is an option of
 * type BOOL may stand alone, meaning yes). Returns 0, 1 if --help or -h was
 * given (usage already printed to stdout), or a negative code with err set. */
int core_config_parse_args(const struct core_option *opts, int argc, char **argv,
                           const char *usage_line, char *err, size_t errlen);

/* Print the option table as help text. */
void core_config_usage(FILE *out, const struct core_option *opts, const char *usage_line);

#endif
