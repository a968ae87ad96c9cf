/* The platform's timer floor for the control-loop jitter figures (benchmarks/policy_inference.py):
 * a C loop sleeping to absolute deadlines (clock_nanosleep, TIMER_ABSTIME) at a fixed rate, like
 * cyclictest. Prints |period - 1/rate| p50 / p99 / max in ms. No Python, no GIL, no work per tick:
 * what it measures is the kernel's and the hypervisor's wake-up noise, a floor no loop on this
 * machine can beat.
 *
 *     cc -O2 -o rt_floor rt_floor.c && ./rt_floor RATE_HZ TICKS [FIFO_PRIORITY]
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s RATE_HZ TICKS [FIFO_PRIORITY]\n", argv[0]);
        return 2;
    }
    double rate = atof(argv[1]);
    int n = atoi(argv[2]);
    int priority = argc > 3 ? atoi(argv[3]) : 0;
    const char *policy = "SCHED_OTHER";
    if (priority > 0) {
        struct sched_param sp = {.sched_priority = priority};
        if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0)
            policy = "SCHED_FIFO";
        else
            perror("SCHED_FIFO not permitted; normal scheduling");
    }
    long period_ns = (long)(1e9 / rate);
    double *err = malloc(sizeof(double) * (size_t)n);
    struct timespec deadline, now, prev;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    prev = deadline;
    for (int i = 0; i < n; i++) {
        deadline.tv_nsec += period_ns;
        while (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_nsec -= 1000000000L;
            deadline.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        double ms = (now.tv_sec - prev.tv_sec) * 1e3 + (now.tv_nsec - prev.tv_nsec) / 1e6;
        double e = ms - period_ns / 1e6;
        err[i] = e < 0 ? -e : e;
        prev = now;
    }
    qsort(err, (size_t)n, sizeof(double), by_value);
    printf("%s p50 %.3f p99 %.3f max %.3f\n", policy, err[n / 2], err[(int)(n * 0.99)], err[n - 1]);
    free(err);
    return 0;
}
