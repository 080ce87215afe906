/*
 * workers.c -- the threads that run parts 1..threads-1 of the level-by-level
 * path (levels.c; Part in engine_impl.h).
 *
 * One job at a time per worker, handed over through two counters:
 *
 *     caller                               worker w
 *     set part[w]'s job                    spin (then sleep) until posted != seen
 *     posted++  (release)  ------------->  run engRunPart(part[w])
 *     ... its own share ...                done = posted  (release)
 *     spin until done == posted (acquire) <--
 *
 * A job is a segment (up to 8192 records), so the hand-over is paid once per
 * few thousand records.  A worker spins briefly for the next job (the caller
 * posts one as soon as the previous one is collected) and then sleeps on a
 * condition variable, so a simulator waiting between kvsimRun calls costs no
 * CPU; the sleeper count and the posted counter are sequentially consistent
 * atomics, so a post either sees the sleeper and wakes it or the worker sees
 * the post before it sleeps.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "engine_impl.h"

/* A worker spins for its next job for up to SPIN_NS before it sleeps: waking a
 * sleeping thread costs tens of microseconds, more in a VM whose idle vCPU has
 * halted, which is the length of a whole segment.  (A pause lasts from a few to
 * over a hundred cycles depending on the core, hence a clock, read every
 * SPIN_CHECK pauses.) */
#define SPIN_NS 2000000
#define SPIN_CHECK 256
#define SPIN_YIELD 1024 /* pauses the caller spins for a result between yields */

typedef struct Worker {
    pthread_t th;
    kvsimSim *s;
    uint32_t w;
    int started;
    _Atomic uint32_t posted, done;
} Worker;

struct Workers {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int quit;
    atomic_int sleepers;
    Worker w[KVSIM_MAX_THREADS];
};

static inline void cpuRelax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t nowNs(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *workerMain(void *arg) {
    Worker *me = arg;
    struct Workers *W = me->s->wk;
    uint32_t seen = 0;
    for (;;) {
        uint32_t p;
        uint32_t spins = 0;
        uint64_t t0 = 0;
        while ((p = atomic_load_explicit(&me->posted, memory_order_acquire)) == seen) {
            if (atomic_load(&W->quit)) return NULL;
            cpuRelax();
            if (++spins % SPIN_CHECK) continue;
            const uint64_t t = nowNs();
            if (!t0) t0 = t;
            if (t - t0 < SPIN_NS) continue;
            pthread_mutex_lock(&W->mu);
            atomic_fetch_add(&W->sleepers, 1);
            while (atomic_load(&me->posted) == seen && !atomic_load(&W->quit))
                pthread_cond_wait(&W->cv, &W->mu);
            atomic_fetch_sub(&W->sleepers, 1);
            pthread_mutex_unlock(&W->mu);
            spins = 0;
            t0 = 0;
        }
        seen = p;
        engRunPart(me->s, &me->s->part[me->w]);
        atomic_store_explicit(&me->done, seen, memory_order_release);
    }
}

int engWorkersStart(kvsimSim *s) {
    struct Workers *W = calloc(1, sizeof *W);
    if (!W) return 0;
    s->wk = W;
    pthread_mutex_init(&W->mu, NULL);
    pthread_cond_init(&W->cv, NULL);
    for (uint32_t t = 1; t < s->threads; t++) {
        Worker *me = &W->w[t];
        me->s = s;
        me->w = t;
        if (pthread_create(&me->th, NULL, workerMain, me) != 0) return 0;
        me->started = 1;
    }
    return 1;
}

void engWorkersPost(kvsimSim *s, uint32_t w) {
    struct Workers *W = s->wk;
    Worker *me = &W->w[w];
    atomic_fetch_add(&me->posted, 1); /* sequentially consistent: see the essay */
    if (atomic_load(&W->sleepers)) {
        pthread_mutex_lock(&W->mu);
        pthread_cond_broadcast(&W->cv);
        pthread_mutex_unlock(&W->mu);
    }
}

void engWorkersWait(kvsimSim *s, uint32_t w) {
    Worker *me = &s->wk->w[w];
    const uint32_t p = atomic_load_explicit(&me->posted, memory_order_relaxed);
    uint32_t spins = 0;
    while (atomic_load_explicit(&me->done, memory_order_acquire) != p) {
        cpuRelax();
        if (++spins % SPIN_YIELD == 0) sched_yield(); /* the worker may be descheduled */
    }
}

void engWorkersStop(kvsimSim *s) {
    struct Workers *W = s->wk;
    if (!W) return;
    pthread_mutex_lock(&W->mu);
    atomic_store(&W->quit, 1);
    pthread_cond_broadcast(&W->cv);
    pthread_mutex_unlock(&W->mu);
    for (uint32_t t = 1; t < KVSIM_MAX_THREADS; t++)
        if (W->w[t].started) pthread_join(W->w[t].th, NULL);
    pthread_mutex_destroy(&W->mu);
    pthread_cond_destroy(&W->cv);
    free(W);
    s->wk = NULL;
}
