/* The U-Net/SLE paper's JIVE benchmarks in C, equivalent to Bench.java.
 *
 *   bench REPS TARGET_NS NAME N [NAME N]...
 *
 * calls NAME(N) once for the checksum every runtime must agree on, sizes
 * its own count M so that one call takes about TARGET_NS, then calls
 * NAME(M) REPS times timed with CLOCK_MONOTONIC, and prints
 * "NAME N CHECKSUM M MEDIAN_NS" per benchmark.
 * Built by `unet bench jive` with gcc -O0 and -O2 (both with -fwrapv: int
 * arithmetic wraps as in Java). The class fields and one-element arrays are
 * volatile so that -O2 performs every access the Java code performs; the
 * calls in null-call and native-call are not inlined. Results go to a
 * volatile sink and are printed, and benchmarks are called through a table,
 * so no work is deleted as dead code; every microbenchmark's loop reads
 * the volatile `stop` at each iteration, as Bench.java's do, and math's x
 * changes at each iteration; -O2 may still hoist loop-invariant work (as
 * the paper notes for optimised C). */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile int fx = 3;
static volatile int fy;
static volatile int ax[1] = {3};
static volatile int ay[1];
static int sort_data[1000];
static int rand_state[55];
static int rand_j;
static int fibs[40];
volatile int sink;
/* Always 0; every microbenchmark's loop reads it, as in Bench.java. */
static volatile int stop;

static int null_loop(int n) {
    int i;
    for (i = 0; i < n && !stop; i++) {
    }
    return i;
}

__attribute__((noinline)) static int nothing(void) {
    __asm__ volatile("");
    return 1;
}

static int null_call(int n) {
    int y = 0;
    for (int i = 0; i < n && !stop; i++) y = nothing();
    return y + n;
}

static int field_read(int n) {
    int y = 0;
    for (int i = 0; i < n && !stop; i++) y = fx;
    return y + n;
}

static int field_write(int n) {
    for (int i = 0; i < n && !stop; i++) fy = i;
    return fy;
}

static int array_read(int n) {
    volatile int *a = ax;
    int y = 0;
    for (int i = 0; i < n && !stop; i++) y = a[0];
    return y + n;
}

static int array_write(int n) {
    volatile int *a = ay;
    for (int i = 0; i < n && !stop; i++) a[0] = i;
    return a[0];
}

static int math(int n) {
    int y = 0;
    for (int i = 0; i < n && !stop; i++) {
        int x = i;
        y = x + x + x + x + x + x + x + x + x + x;
    }
    return y + n;
}

static int math_field(int n) {
    for (int i = 0; i < n && !stop; i++) fy = fx + fx + fx + fx + fx + fx + fx + fx + fx + fx;
    return fy + n;
}

static int math_array(int n) {
    volatile int *x = ax;
    volatile int *y = ay;
    for (int i = 0; i < n && !stop; i++)
        y[0] = x[0] + x[0] + x[0] + x[0] + x[0] + x[0] + x[0] + x[0] + x[0] + x[0];
    return y[0] + n;
}

__attribute__((noinline)) static void nop(void) { __asm__ volatile(""); }

static int native_call(int n) {
    for (int i = 0; i < n && !stop; i++) nop();
    return n;
}

static void qsort_range(int *a, int lo, int hi) {
    if (lo >= hi) return;
    int pivot = a[hi];
    int i = lo - 1;
    for (int j = lo; j < hi; j++) {
        if (a[j] <= pivot) {
            i++;
            int t = a[i];
            a[i] = a[j];
            a[j] = t;
        }
    }
    int t = a[i + 1];
    a[i + 1] = a[hi];
    a[hi] = t;
    qsort_range(a, lo, i);
    qsort_range(a, i + 2, hi);
}

static int qsort_bench(int n) {
    int *a = sort_data;
    int len = 1000;
    int check = 0;
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < len; i++) a[i] = len - i;
        qsort_range(a, 0, len - 1);
        check = check * 31 + a[r % len];
    }
    return check;
}

static int mult(int p, int q) {
    int p1 = p / 10000, p0 = p % 10000, q1 = q / 10000, q0 = q % 10000;
    return (((p0 * q1 + p1 * q0) % 10000) * 10000 + p0 * q0) % 100000000;
}

static void rand_init(int seed) {
    int *a = rand_state;
    a[0] = seed;
    for (int j = 1; j < 55; j++) a[j] = (mult(31415821, a[j - 1]) + 1) % 100000000;
    rand_j = 0;
}

static int random_int(int r) {
    int *a = rand_state;
    int j = (rand_j + 1) % 55;
    rand_j = j;
    a[j] = (a[(j + 23) % 55] + a[(j + 54) % 55]) % 100000000;
    return ((a[j] / 10000) * r) / 10000;
}

static int rand_bench(int n) {
    int check = 0;
    for (int r = 0; r < n; r++) {
        rand_init(1234567);
        for (int i = 0; i < 100; i++) check += random_int(1000);
    }
    return check;
}

static int fibonacci(int n) {
    int *f = fibs;
    int len = 40;
    int check = 0;
    for (int r = 0; r < n; r++) {
        f[0] = 0;
        f[1] = 1;
        for (int i = 2; i < len; i++) f[i] = f[i - 1] + f[i - 2];
        check += f[len - 1] + r;
    }
    return check;
}

static const struct {
    const char *name;
    int (*fn)(int);
} benches[] = {
    {"nullLoop", null_loop},   {"nullCall", null_call},     {"fieldRead", field_read},
    {"fieldWrite", field_write}, {"arrayRead", array_read}, {"arrayWrite", array_write},
    {"math", math},            {"mathField", math_field},   {"mathArray", math_array},
    {"nativeCall", native_call}, {"qsort", qsort_bench},    {"rand", rand_bench},
    {"fibonacci", fibonacci},
};

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Largest count a benchmark is sized to. */
#define MAX_N (1 << 29)

static long long time_call(int (*fn)(int), int n) {
    long long t0 = now_ns();
    sink = fn(n);
    return now_ns() - t0;
}

/* The count whose call takes about `target` ns, from `n`. */
static int size(int (*fn)(int), int n, long long target) {
    long long t = time_call(fn, n);
    int m = n;
    if (t > 2 * target) {
        double s = (double)n * (double)target / (double)t;
        m = s < 1.0 ? 1 : (int)s;
        t = time_call(fn, m);
    }
    while (t < target && m < MAX_N) {
        double grow = (double)target / (double)(t > 100 ? t : 100) * 1.2;
        if (grow < 2.0) grow = 2.0;
        if (grow > 64.0) grow = 64.0;
        double next = (double)m * grow;
        m = next > MAX_N ? MAX_N : (int)next;
        t = time_call(fn, m);
    }
    return m;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s REPS TARGET_NS NAME N [NAME N]...\n", argv[0]);
        return 2;
    }
    int reps = atoi(argv[1]);
    long long target = atoll(argv[2]);
    long long *t = calloc((size_t)reps, sizeof *t);
    for (int k = 3; k + 1 < argc; k += 2) {
        int (*fn)(int) = NULL;
        for (size_t b = 0; b < sizeof benches / sizeof benches[0]; b++)
            if (strcmp(benches[b].name, argv[k]) == 0) fn = benches[b].fn;
        if (!fn) {
            fprintf(stderr, "no benchmark %s\n", argv[k]);
            return 2;
        }
        int n = atoi(argv[k + 1]);
        int check = fn(n);
        int m = size(fn, n, target);
        int check_m = fn(m);
        for (int r = 0; r < reps; r++) {
            long long t0 = now_ns();
            int c = fn(m);
            t[r] = now_ns() - t0;
            if (c != check_m) {
                fprintf(stderr, "%s: checksum %d then %d\n", argv[k], check_m, c);
                return 1;
            }
            sink = c;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_ll);
        printf("%s %d %d %d %lld\n", argv[k], n, check, m, t[reps / 2]);
    }
    free(t);
    return 0;
}
