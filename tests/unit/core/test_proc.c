/* core/proc: the scaffold's exit decisions (--help, --version, a bad option
 * or log level, a good one) and the signal stop (the stop function runs
 * once; the signal handles do not keep the loop alive). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/config.h"
#include "core/proc.h"

static int64_t width = 7;
static char loglevel[CORE_OPT_STRLEN] = "notice";

static const struct core_option options[] = {
    {"width", CORE_OPT_INT, &width, 1, 100, NULL, 0, "a number"},
    {"loglevel", CORE_OPT_STRING, loglevel, 0, 0, NULL, 0, "debug|verbose|notice|warning"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

static bool run_options(int argc, char **argv, int *code)
{
    return core_proc_options("test-proc", 'T', options, loglevel, argc, argv, code);
}

static void test_options_exit_codes(void **state)
{
    int code = -1;
    char *help[] = {"test-proc", "--help"};
    assert_true(run_options(2, help, &code));
    assert_int_equal(code, 0);

    code = -1;
    char *version[] = {"test-proc", "--width", "3", "--version"};
    assert_true(run_options(4, version, &code));
    assert_int_equal(code, 0);

    code = -1;
    char *bad[] = {"test-proc", "--no-such-option", "1"};
    assert_true(run_options(3, bad, &code));
    assert_int_equal(code, 2);

    code = -1;
    char *range[] = {"test-proc", "--width", "1000"};
    assert_true(run_options(3, range, &code));
    assert_int_equal(code, 2);

    code = -1;
    char *level[] = {"test-proc", "--loglevel", "no-such-level"};
    assert_true(run_options(3, level, &code));
    assert_int_equal(code, 2); /* refused, not silently "notice" */

    code = -1;
    char *good[] = {"test-proc", "--width", "42", "--loglevel", "warning"};
    assert_false(run_options(5, good, &code));
    assert_int_equal(code, -1); /* untouched: the process runs */
    assert_int_equal(width, 42);
}

static void test_early_flags_for_own_parsers(void **state)
{
    const char *usage = "usage: tool [FILE]\n";
    char *help[] = {"tool", "file", "-h"};
    assert_int_equal(core_proc_early("tool", usage, 3, help), 0);
    char *version[] = {"tool", "--version"};
    assert_int_equal(core_proc_early("tool", usage, 2, version), 0);
    char *plain[] = {"tool", "--help-me", "file"};
    assert_int_equal(core_proc_early("tool", usage, 3, plain), -1);
    /* After "--" a file may be called --help. */
    char *operand[] = {"tool", "--", "--help"};
    assert_int_equal(core_proc_early("tool", usage, 3, operand), -1);
    assert_int_equal(core_proc_bad_usage("tool", "unknown option '%s'", "-x"), 2);
}

struct stopper {
    int stops;
    uv_timer_t timer;
};

static void on_stop(struct core_proc *p, void *data)
{
    struct stopper *s = data;
    s->stops++;
    uv_close((uv_handle_t *)&s->timer, NULL);
}

static void on_timer(uv_timer_t *t)
{
    raise(SIGTERM);
}

static void test_signal_stops_once(void **state)
{
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct stopper s = {0};
    struct core_proc p;
    core_proc_signals_start(&p, &loop, "test", on_stop, &s);
    /* A repeating timer raises SIGTERM until the stop closes it; the loop
     * returns once the timer is closed (the signal handles hold no ref). */
    uv_timer_init(&loop, &s.timer);
    uv_timer_start(&s.timer, on_timer, 1, 1);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(s.stops, 1);
    core_proc_signals_close(&p, &loop);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* A stop that takes three loop turns, with a SIGTERM in each. */
struct slow_stop {
    struct core_proc p;
    int stops, turns;
    uv_timer_t timer;
};

static void slow_on_stop(struct core_proc *p, void *data)
{
    struct slow_stop *s = data;
    (void)p;
    s->stops++;
}

static void slow_on_timer(uv_timer_t *t)
{
    struct slow_stop *s = t->data;
    raise(SIGTERM);
    if (s->stops > 0 && ++s->turns == 3)
        uv_close((uv_handle_t *)&s->timer, NULL);
}

static void test_signal_while_stopping_is_ignored(void **state)
{
    /* A supervisor that sends SIGTERM again while the process stops (or
     * after its loop ended, while main frees and removes its pidfile)
     * must not cut the stop short: the process lives on to return. */
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct slow_stop s = {0};
    core_proc_signals_start(&s.p, &loop, "test", slow_on_stop, &s);
    uv_timer_init(&loop, &s.timer);
    s.timer.data = &s;
    uv_timer_start(&s.timer, slow_on_timer, 1, 1);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(s.stops, 1);
    assert_int_equal(s.turns, 3);
    core_proc_signals_close(&s.p, &loop);
    raise(SIGTERM); /* the end of main: ignored too */
    raise(SIGINT);
    assert_int_equal(uv_loop_close(&loop), 0);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
}

static void on_idle_close(uv_timer_t *t)
{
    uv_close((uv_handle_t *)t, NULL);
}

static void test_loop_ends_without_a_signal(void **state)
{
    /* A process that stops itself (SHUTDOWN) closes its handles; the loop
     * ends although the signal handles are still open. */
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct stopper s = {0};
    struct core_proc p;
    core_proc_signals_start(&p, &loop, "test", on_stop, &s);
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    uv_timer_start(&t, on_idle_close, 1, 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(s.stops, 0);
    core_proc_signals_close(&p, &loop);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_write_to_a_gone_peer_fails_instead_of_killing(void **state)
{
    /* A write to a socket whose peer stopped reading would raise SIGPIPE;
     * after core_proc_signals_start it fails with EPIPE and we live on. */
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct stopper s = {0};
    struct core_proc p;
    core_proc_signals_start(&p, &loop, "test", on_stop, &s);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(shutdown(sv[1], SHUT_RD), 0);
    errno = 0;
    assert_int_equal(write(sv[0], "x", 1), -1);
    assert_int_equal(errno, EPIPE);
    close(sv[0]);
    close(sv[1]);
    core_proc_signals_close(&p, &loop);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_exit_codes),
        cmocka_unit_test(test_early_flags_for_own_parsers),
        cmocka_unit_test(test_signal_stops_once),
        cmocka_unit_test(test_signal_while_stopping_is_ignored),
        cmocka_unit_test(test_loop_ends_without_a_signal),
        cmocka_unit_test(test_write_to_a_gone_peer_fails_instead_of_killing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
