/*
 * workers.c -- the threads that run parts 1..threads-1 of the level-by-level
 * path (segments.c; Part in engine_impl.h; the terms in engine.c's glossary),
 * or the last level of the record-by-record path (lower.c: one worker).
 *
 * One job at a time per worker, handed over through two counters:
 *
 *     caller                               worker w
 *     set part[w]'s job                    wait until posted != seen
 *     posted++  ------------------------>  run engRunPart(part[w])
 *     ... its own work ...                 done = posted
 *     wait until done == posted  <--------
 *
 * A job is a segment (thousands of records), so the hand-over is paid rarely.
 * Either side waits by spinning for a while (a worker for SPIN_WORKER_NS: the
 * next job usually comes within microseconds, and waking a sleeping thread
 * costs tens of microseconds, more in a VM whose idle vCPU has halted; lower.c's
 * worker for SPIN_LOWER_NS, as its buffers come a millisecond or so apart and
 * its spinning would take a core from the TLB thread and the trace's decoding;
 * the caller for SPIN_CALLER_NS) and then sleeping on the condition variable.  A
 * spinner yields the CPU every SPIN_YIELD pauses, so that on an oversubscribed
 * machine the thread it waits for can run.  The counters and the sleeper
 * count are sequentially consistent atomics: a side that publishes a change
 * and then sees no sleeper knows that any later sleeper will see the change
 * before it sleeps.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "engine_impl.h"

#ifndef SPIN_WORKER_NS
#define SPIN_WORKER_NS 2000000
#endif
#ifndef SPIN_CALLER_NS
#define SPIN_CALLER_NS 200000
#endif
#ifndef SPIN_LOWER_NS
#define SPIN_LOWER_NS 50000 /* lower.c's worker: its jobs come milliseconds apart */
#endif
#ifndef SPIN_YIELD
#define SPIN_YIELD 256 /* pauses between yields (and clock reads) */
#endif

typedef struct Worker {
    pthread_t th;
    kvsimSim *s;
    uint32_t w;   /* the part it runs: s->part[w] */
    int started;  /* th was created (engWorkersStop joins it) */
    _Atomic uint32_t posted, done; /* jobs handed over; `posted` at the last job done */
} Worker;

struct Workers {
    pthread_mutex_t mu; /* guards the sleeps on cv */
    pthread_cond_t cv;  /* wakes every sleeper: a job posted or done, or quit */
    _Atomic uint32_t quit;
    atomic_int sleepers; /* threads asleep on cv, or about to be */
    Worker w[KVSIM_MAX_THREADS]; /* w[0] unused: part 0 is the calling thread's */
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

/* Wait until *a != v (or, with `quit`, until the workers are told to stop). */
static void awaitChange(struct Workers *W, _Atomic uint32_t *a, uint32_t v, uint64_t spin_ns,
                        int quit) {
    uint64_t t0 = 0;
    for (uint32_t spins = 1;; spins++) {
        if (atomic_load(a) != v || (quit && atomic_load(&W->quit))) return;
        cpuRelax();
        if (spins % SPIN_YIELD) continue;
        sched_yield();
        const uint64_t t = nowNs();
        if (!t0) t0 = t;
        if (t - t0 >= spin_ns) break;
    }
    pthread_mutex_lock(&W->mu);
    atomic_fetch_add(&W->sleepers, 1);
    while (atomic_load(a) == v && !(quit && atomic_load(&W->quit)))
        pthread_cond_wait(&W->cv, &W->mu);
    atomic_fetch_sub(&W->sleepers, 1);
    pthread_mutex_unlock(&W->mu);
}

/* After a change that a sleeper may wait for. */
static void wake(struct Workers *W) {
    if (!atomic_load(&W->sleepers)) return;
    pthread_mutex_lock(&W->mu);
    pthread_cond_broadcast(&W->cv);
    pthread_mutex_unlock(&W->mu);
}

static void *workerMain(void *arg) {
    Worker *me = arg;
    struct Workers *W = me->s->wk;
    uint32_t seen = 0;
    for (;;) {
        awaitChange(W, &me->posted, seen, me->s->lower ? SPIN_LOWER_NS : SPIN_WORKER_NS, 1);
        if (atomic_load(&W->quit)) return NULL;
        seen = atomic_load(&me->posted);
        if (me->s->lower)
            engLowerJob(me->s);
        else
            engRunPart(me->s, &me->s->part[me->w]);
        atomic_store(&me->done, seen);
        wake(W);
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
    atomic_fetch_add(&s->wk->w[w].posted, 1);
    wake(s->wk);
}

void engWorkersWait(kvsimSim *s, uint32_t w) {
    Worker *me = &s->wk->w[w];
    const uint32_t p = atomic_load(&me->posted);
    /* wait while done differs from p: done only moves towards p */
    for (uint32_t d = atomic_load(&me->done); d != p; d = atomic_load(&me->done))
        awaitChange(s->wk, &me->done, d, SPIN_CALLER_NS, 0);
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
