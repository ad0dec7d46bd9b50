/*
 * Lazy free: the thread and its queue (lazyfree.h). The thread only frees
 * what it is given; the store decides what goes (store.c, gs_store_unlink).
 */
#include "gridsync/store/lazyfree.h"

#include <pthread.h>
#include <stdlib.h>

#include "gridsync/types/value.h"

struct lazy_item {
    struct lazy_item *next;
    struct gs_obj obj;
};

struct gs_lazyfree {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    struct lazy_item *head;
    bool stop;
    uint64_t pending; /* items queued, not yet freed (under mu) */
};

static void *lazyfree_main(void *arg)
{
    struct gs_lazyfree *lf = arg;
    pthread_mutex_lock(&lf->mu);
    for (;;) {
        while (!lf->head && !lf->stop)
            pthread_cond_wait(&lf->cv, &lf->mu);
        struct lazy_item *it = lf->head;
        if (!it)
            break; /* stop, and nothing left */
        lf->head = it->next;
        pthread_mutex_unlock(&lf->mu);
        gs_obj_free(&it->obj);
        free(it);
        pthread_mutex_lock(&lf->mu);
        lf->pending--;
    }
    pthread_mutex_unlock(&lf->mu);
    return NULL;
}

static struct gs_lazyfree *lazyfree_get(struct gs_lazyfree **slot)
{
    if (*slot)
        return *slot;
    struct gs_lazyfree *lf = calloc(1, sizeof(*lf));
    if (!lf)
        return NULL;
    pthread_mutex_init(&lf->mu, NULL);
    pthread_cond_init(&lf->cv, NULL);
    if (pthread_create(&lf->thread, NULL, lazyfree_main, lf) != 0) {
        pthread_cond_destroy(&lf->cv);
        pthread_mutex_destroy(&lf->mu);
        free(lf);
        return NULL;
    }
    *slot = lf;
    return lf;
}

bool gs_lazyfree_push(struct gs_lazyfree **slot, const struct gs_obj *o)
{
    struct gs_lazyfree *lf = lazyfree_get(slot);
    struct lazy_item *it = lf ? malloc(sizeof(*it)) : NULL;
    if (!it)
        return false;
    it->obj = *o;
    pthread_mutex_lock(&lf->mu);
    it->next = lf->head;
    lf->head = it;
    lf->pending++;
    pthread_cond_signal(&lf->cv);
    pthread_mutex_unlock(&lf->mu);
    return true;
}

uint64_t gs_lazyfree_pending(struct gs_lazyfree *lf)
{
    if (!lf)
        return 0;
    pthread_mutex_lock(&lf->mu);
    uint64_t n = lf->pending;
    pthread_mutex_unlock(&lf->mu);
    return n;
}

void gs_lazyfree_stop(struct gs_lazyfree **slot)
{
    struct gs_lazyfree *lf = *slot;
    if (!lf)
        return;
    pthread_mutex_lock(&lf->mu);
    lf->stop = true;
    pthread_cond_signal(&lf->cv);
    pthread_mutex_unlock(&lf->mu);
    pthread_join(lf->thread, NULL);
    pthread_cond_destroy(&lf->cv);
    pthread_mutex_destroy(&lf->mu);
    free(lf);
    *slot = NULL;
}
