/* core/list.h: the intrusive list's invariants under insert, remove, move. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/list.h"

struct item {
    int value;
    struct core_list link;
};

static struct item *item_of(struct core_list *l)
{
    return CORE_CONTAINER_OF(l, struct item, link);
}

/* Check invariant 1 over the whole list and return the values in order. */
static size_t collect(struct core_list *head, int *out, size_t max)
{
    size_t n = 0;
    struct core_list *l;
    core_list_foreach(l, head)
    {
        assert_ptr_equal(l->next->prev, l);
        assert_ptr_equal(l->prev->next, l);
        assert_true(n < max);
        out[n++] = item_of(l)->value;
    }
    assert_ptr_equal(head->next->prev, head);
    return n;
}

static void test_empty_list(void **state)
{
    struct core_list head;
    core_list_init(&head);
    assert_true(core_list_empty(&head));
    assert_null(core_list_first(&head));
    assert_null(core_list_last(&head));
    int v[1];
    assert_int_equal(collect(&head, v, 1), 0);
}

static void test_push_front_and_back_order(void **state)
{
    struct core_list head;
    core_list_init(&head);
    struct item it[4] = {{.value = 1}, {.value = 2}, {.value = 3}, {.value = 4}};
    core_list_push_back(&head, &it[1].link);  /* 2 */
    core_list_push_front(&head, &it[0].link); /* 1 2 */
    core_list_push_back(&head, &it[2].link);  /* 1 2 3 */
    core_list_push_back(&head, &it[3].link);  /* 1 2 3 4 */
    int v[4];
    assert_int_equal(collect(&head, v, 4), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(v[i], i + 1);
    assert_int_equal(item_of(core_list_first(&head))->value, 1);
    assert_int_equal(item_of(core_list_last(&head))->value, 4);
}

static void test_remove_ends_and_middle(void **state)
{
    struct core_list head;
    core_list_init(&head);
    struct item it[5] = {{.value = 1}, {.value = 2}, {.value = 3}, {.value = 4}, {.value = 5}};
    for (int i = 0; i < 5; i++) {
        core_list_init(&it[i].link);
        assert_false(core_list_linked(&it[i].link));
        core_list_push_back(&head, &it[i].link);
        assert_true(core_list_linked(&it[i].link));
    }
    core_list_remove(&it[0].link); /* head end */
    core_list_remove(&it[4].link); /* tail end */
    core_list_remove(&it[2].link); /* middle */
    assert_false(core_list_linked(&it[2].link));
    core_list_remove(&it[2].link); /* invariant 3: a second remove is harmless */
    int v[5];
    assert_int_equal(collect(&head, v, 5), 2);
    assert_int_equal(v[0], 2);
    assert_int_equal(v[1], 4);
    core_list_remove(&it[1].link);
    core_list_remove(&it[3].link);
    assert_true(core_list_empty(&head));
}

static void test_safe_foreach_allows_freeing(void **state)
{
    struct core_list head;
    core_list_init(&head);
    for (int i = 0; i < 10; i++) {
        struct item *it = malloc(sizeof *it);
        assert_non_null(it);
        it->value = i;
        core_list_push_back(&head, &it->link);
    }
    struct core_list *l, *tmp;
    int seen = 0;
    core_list_foreach_safe(l, tmp, &head)
    {
        struct item *it = item_of(l);
        assert_int_equal(it->value, seen++);
        if (it->value % 2 == 0) {
            core_list_remove(l);
            free(it);
        }
    }
    assert_int_equal(seen, 10);
    int v[10];
    assert_int_equal(collect(&head, v, 10), 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(v[i], 2 * i + 1);
    core_list_foreach_safe(l, tmp, &head)
    {
        core_list_remove(l);
        free(item_of(l));
    }
    assert_true(core_list_empty(&head));
}

static void test_moved_node_is_relinked(void **state)
{
    struct core_list head;
    core_list_init(&head);
    struct item a = {.value = 1}, c = {.value = 3};
    struct item *b = malloc(sizeof *b);
    assert_non_null(b);
    b->value = 2;
    core_list_push_back(&head, &a.link);
    core_list_push_back(&head, &b->link);
    core_list_push_back(&head, &c.link);
    /* Move b as a realloc would: the bytes are copied, the neighbours
     * still point at the old address until core_list_moved. */
    struct item *nb = malloc(sizeof *nb);
    assert_non_null(nb);
    memcpy(nb, b, sizeof *b);
    free(b);
    core_list_moved(&nb->link);
    int v[3];
    assert_int_equal(collect(&head, v, 3), 3);
    assert_int_equal(v[1], 2);
    assert_ptr_equal(a.link.next, &nb->link);
    assert_ptr_equal(c.link.prev, &nb->link);
    core_list_remove(&nb->link);
    free(nb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_list),
        cmocka_unit_test(test_push_front_and_back_order),
        cmocka_unit_test(test_remove_ends_and_middle),
        cmocka_unit_test(test_safe_foreach_allows_freeing),
        cmocka_unit_test(test_moved_node_is_relinked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
