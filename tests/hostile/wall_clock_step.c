/* An LD_PRELOAD library that steps one process's wall clock, as NTP steps it,
 * and leaves its monotonic clocks alone: CLOCK_REALTIME (and its coarse form),
 * gettimeofday() and time() run ahead or behind by the whole seconds written
 * in the file named by $WALL_CLOCK_STEP_FILE (e.g. "+3600"), re-read every
 * 10 ms. Built by tests/hostile/wall_clock.py for tests only.
 *
 * Not libfaketime: Debian's 0.9.10 with DONT_FAKE_MONOTONIC turns the
 * clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) of Python 3.11's time.sleep
 * into EINVAL (wolfcw/libfaketime#426), and without it steps the monotonic
 * clock too, which is what the tests must leave alone. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime(void) {
    static clock_gettime_fn real;
    clock_gettime_fn fn = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (fn == NULL) {
        fn = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
        __atomic_store_n(&real, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

static long long step_ns(void) {
    static long long step, next_read;
    struct timespec mono;
    real_clock_gettime()(CLOCK_MONOTONIC, &mono);
    long long now = mono.tv_sec * 1000000000LL + mono.tv_nsec;
    if (now >= __atomic_load_n(&next_read, __ATOMIC_RELAXED)) {
        __atomic_store_n(&next_read, now + 10000000LL, __ATOMIC_RELAXED);
        const char *path = getenv("WALL_CLOCK_STEP_FILE");
        FILE *f = path ? fopen(path, "re") : NULL;
        long long seconds;
        if (f != NULL) {
            if (fscanf(f, "%lld", &seconds) == 1)
                __atomic_store_n(&step, seconds * 1000000000LL, __ATOMIC_RELAXED);
            fclose(f);
        }
    }
    return __atomic_load_n(&step, __ATOMIC_RELAXED);
}

static void add_ns(struct timespec *ts, long long ns) {
    long long total = ts->tv_sec * 1000000000LL + ts->tv_nsec + ns;
    ts->tv_sec = total / 1000000000LL;
    ts->tv_nsec = total % 1000000000LL;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int rc = real_clock_gettime()(clock, ts);
    if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE))
        add_ns(ts, step_ns());
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;
    (void)tz;
    clock_gettime(CLOCK_REALTIME, &ts);
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
