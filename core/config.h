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
    /* A STRING option a file may repeat, each line adding to the value
     * (Redis's `save 900 1` / `save 300 10`, one
     * `client-output-buffer-limit <class> ...` line per class): the
     * values are joined with spaces. A later file line or a flag that
     * follows a flag replaces the value as usual. */
    CORE_OPT_APPEND = 1 << 2,
    /* Another name for the same setting as an earlier row (Redis 7.0's
     * `hash-max-ziplist-entries` for `hash-max-listpack-entries`): it
     * binds the same field, is read and set like it, and a rewrite adds
     * only the earlier row's name. */
    CORE_OPT_ALIAS = 1 << 3,
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

/* What a config file written for another program (redis.conf for
 * gridsync-server) may hold beyond the option table. */
struct core_config_compat {
    /* NULL-terminated names of that program's directives that have no
     * meaning here: accepted with a logged warning, their values unused. */
    const char *const *ignored;
    /* Called for each ignored directive (e.g. to log it once the log file
     * is open); NULL logs a warning at once. */
    void (*on_ignored)(void *arg, const char *path, int line, const char *name);
    void *arg;
};

/* Split one config line into arguments as Redis's sdssplitargs does:
 * blanks separate arguments; "double quotes" take \n \r \t \b \a \\ \"
 * and \xHH escapes; 'single quotes' take \' only; a closing quote must be
 * followed by a blank or the end. The arguments are written, each NUL
 * terminated, into out (outcap bytes; len + 1 always suffices) and argv[i]
 * points into it. Returns the number of arguments (at most maxargs), or
 * CORE_EINVAL for unbalanced quotes, CORE_ERANGE if there are more than
 * maxargs. A line whose first non-blank byte is '#' has no arguments. */
int core_config_split_args(const char *line, size_t len, char *out, size_t outcap, char **argv,
                           int maxargs);

/* core_config_load_file, plus: Redis's file syntax (several arguments to a
 * directive, joined with single spaces into the option's value; quoting as
 * core_config_split_args), `include <path>` (nested at most 8 deep), and
 * compat->ignored (compat may be NULL). */
int core_config_load_file_compat(const struct core_option *opts,
                                 const struct core_config_compat *compat, const char *path,
                                 char *err, size_t errlen);

/* core_config_parse_args, loading the file with core_config_load_file_compat. */
int core_config_parse_args_compat(const struct core_option *opts,
                                  const struct core_config_compat *compat, int argc, char **argv,
                                  const char *usage_line, char *err, size_t errlen);

/* Redis's CONFIG REWRITE: rewrite the file at path so that it sets every
 * option to its current value. Lines of other directives and comments are
 * kept as they are; the first line of an option is replaced with its
 * current value and later lines of it are dropped; options that differ
 * from their default (the same table bound to default values, `defaults`)
 * and had no line are appended. Written to a temporary file, then renamed
 * over path. CORE_OPT_SECRET options are written too (the file is the
 * owner's). Returns 0 or a CORE_E* code with err set. */
int core_config_rewrite(const struct core_option *opts, const struct core_option *defaults,
                        const char *path, char *err, size_t errlen);

/* Apply argv: an optional first argument that does not start with "--" is
 * a config file; then `--name value` pairs (a flag that is an option of
 * type BOOL may stand alone, meaning yes). Returns 0, 1 if --help or -h was
 * given (usage already printed to stdout), or a negative code with err set. */
int core_config_parse_args(const struct core_option *opts, int argc, char **argv,
                           const char *usage_line, char *err, size_t errlen);

/* Print the option table as help text. */
void core_config_usage(FILE *out, const struct core_option *opts, const char *usage_line);

#endif
