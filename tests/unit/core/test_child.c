/* core/child: a snapshot child keeps only the descriptor it names (and
 * 0-2), so it holds none of its parent's sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/child.h"

static int child_status(int keep, int gone1, int gone2)
{
    pid_t pid = fork();
    if (pid == 0) {
        core_child_close_fds(keep);
        int ok = fcntl(gone1, F_GETFD) == -1 && fcntl(gone2, F_GETFD) == -1 &&
                 fcntl(2, F_GETFD) != -1 && (keep < 0 || fcntl(keep, F_GETFD) != -1);
        _exit(ok ? 0 : 1);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    return st;
}

static void test_keeps_only_the_named_descriptor(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int extra = open("/dev/null", O_RDONLY);
    assert_true(extra > 2);
    /* the one kept lies between two that go, then below and above them */
    assert_int_equal(child_status(sv[1], sv[0], extra), 0);
    assert_int_equal(child_status(sv[0], sv[1], extra), 0);
    assert_int_equal(child_status(extra, sv[0], sv[1]), 0);
    assert_int_equal(child_status(-1, sv[0], extra), 0);
    /* the parent's own are untouched */
    assert_true(fcntl(sv[0], F_GETFD) != -1 && fcntl(extra, F_GETFD) != -1);
    close(sv[0]);
    close(sv[1]);
    close(extra);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keeps_only_the_named_descriptor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
