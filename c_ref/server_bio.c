/*
 * server_bio.c -- the server's background threads, idle as a standalone Valkey's are.
 *
 * Valkey starts its bio workers at start-up (src/server.c InitServerLast -> src/bio.c
 * bioInit: one thread per worker, "bio_close_file", "bio_aof", "bio_lazy_free", each
 * blocked in pthread_cond_wait on its own job list) and they stay idle unless a file is
 * closed, an AOF fsynced or a value freed lazily -- none of which a GET/SET/MGET/MSET
 * benchmark on a server without persistence does.  They still change the main thread's
 * work: once a second thread exists glibc's process is multi-threaded, so every read,
 * write and epoll_wait takes the cancellable syscall path (__pthread_enable_asynccancel /
 * __pthread_disable_asynccancel around the call) and the allocator's arena paths take
 * their locks.  Valkey also makes its main thread and each worker killable (server.c
 * makeThreadKillable, called by initServer and by bio.c's worker: cancel state enabled,
 * cancel type asynchronous), so the cancellable wrappers find the asynchronous type already
 * set: __pthread_enable_asynccancel changes nothing and __pthread_disable_asynccancel
 * returns at once.  c_ref's server starts the same workers, idle the same way, and makes
 * the same threads killable, so its main thread runs the same C library paths as the
 * reference server (docs/server.md, "Instruction counts").  Nothing ever cancels a thread:
 * the asynchronous type only decides which path the wrappers take.
 *
 *   ksBioInit ──> BIO_WORKER_NUM threads, every signal blocked: lock, wait on the
 *                 worker's condition until a job or the stop flag, unlock (no job kind)
 *   ksBioKillThreads ──> the stop flag under each worker's lock, a signal, a join
 *
 * Valkey's bioKillThreads cancels the threads (pthread_cancel); here a flag ends them,
 * so shutdown joins cleanly under the sanitizers.  The workers touch no keyspace state
 * and emit nothing: a traced server's trace holds the main thread's accesses only.
 *
 * Conventions: public ks...; static internals without prefix.
 */
#include "server_bio.h"

#include <assert.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>

static const char *const bio_worker_title[] = {"bio_close_file", "bio_aof", "bio_lazy_free"};
#define BIO_WORKER_NUM (sizeof(bio_worker_title) / sizeof(*bio_worker_title))
static_assert(BIO_WORKER_NUM == 3, "Valkey's bio workers: close-file, aof, lazy-free");

static pthread_t bio_threads[BIO_WORKER_NUM];
static pthread_mutex_t bio_mutex[BIO_WORKER_NUM];
static pthread_cond_t bio_newjob_cond[BIO_WORKER_NUM];
static int bio_stop[BIO_WORKER_NUM];
static int bio_started;

int ksMakeThreadKillable(void) {
    int old = PTHREAD_CANCEL_DEFERRED;
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old);
    return old;
}

void ksRestoreCancelType(int type) { pthread_setcanceltype(type, NULL); }

/* bio.c bioProcessBackgroundJobs: wait for a job; none is ever queued, so wait for stop. */
static void *bioProcessBackgroundJobs(void *arg) {
    size_t worker = (uintptr_t)arg;
    pthread_setname_np(pthread_self(), bio_worker_title[worker]);
    ksMakeThreadKillable();
    pthread_mutex_lock(&bio_mutex[worker]);
    while (!bio_stop[worker]) pthread_cond_wait(&bio_newjob_cond[worker], &bio_mutex[worker]);
    pthread_mutex_unlock(&bio_mutex[worker]);
    return NULL;
}

int ksBioInit(void) {
    if (bio_started) return 0;
    for (size_t j = 0; j < BIO_WORKER_NUM; j++) {
        pthread_mutex_init(&bio_mutex[j], NULL);
        pthread_cond_init(&bio_newjob_cond[j], NULL);
        bio_stop[j] = 0;
    }
    /* Workers start with every signal blocked (they inherit the creator's mask), so a
     * process-directed SIGTERM/SIGINT always reaches the main thread's epoll_pwait; one taken
     * by a worker would set the stop flag while the main thread slept on.  Valkey's worker
     * blocks the watchdog's SIGALRM for the same reason (bio.c bioProcessBackgroundJobs). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = 0;
    for (size_t j = 0; j < BIO_WORKER_NUM; j++) {
        if (pthread_create(&bio_threads[j], NULL, bioProcessBackgroundJobs, (void *)(uintptr_t)j)) {
            bio_started = (int)j; /* stop the ones that run */
            ksBioKillThreads();
            rc = -1;
            break;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!rc) bio_started = (int)BIO_WORKER_NUM;
    return rc;
}

void ksBioKillThreads(void) {
    for (size_t j = 0; j < (size_t)bio_started; j++) {
        pthread_mutex_lock(&bio_mutex[j]);
        bio_stop[j] = 1;
        pthread_cond_signal(&bio_newjob_cond[j]);
        pthread_mutex_unlock(&bio_mutex[j]);
        pthread_join(bio_threads[j], NULL);
    }
    for (size_t j = 0; j < BIO_WORKER_NUM; j++) {
        pthread_mutex_destroy(&bio_mutex[j]);
        pthread_cond_destroy(&bio_newjob_cond[j]);
    }
    bio_started = 0;
}
