/* bench/dsm_kernels.c - ArgoDSM's benchmark kernels on trapkit/dsm.h and
 * the same kernels written with plain MPI messages; and the protocol's
 * costs (a remote read fault, a write fault, a diff, beside an MPI
 * ping-pong of one page).  Run under mpirun by bench/dsm.py:
 *
 *   bench_dsm_kernels MODE KERNEL SIZE ITERS [KERNEL SIZE ITERS ...]
 *     MODE ivy | rc | mpi; KERNEL daxpy | stream | matmul | matvec | jacobi
 *   bench_dsm_kernels micro PROTOCOL PAGES
 *
 * Rank 0 prints one JSON object on stdout per kernel, which run in turn in
 * the one DSM (each frees what it allocated).  A kernel's time runs from a
 * barrier after the data is set up (each rank its own part) to a barrier
 * after the last iteration, the longest of the ranks; then rank 0 checks
 * the result against the same kernel run serially in private memory
 * ("ok").  Every rank works on the part of the arrays at its home (block
 * placement), as a hand-written MPI program keeps its part: the DSM moves
 * only what a rank reads of another's part (matmul's B, matvec's vector,
 * jacobi's boundary rows). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <trapkit/dsm.h>
#include <trapkit/error.h>

static int rank, np;
static bool dsm;
static unsigned long long moved; /* pages this rank received while timed */

/* The end of a kernel's timed part: the time, and the pages moved. */
static double timed_end(double t0)
{
    double t = MPI_Wtime() - t0;
    if (dsm) {
        tk_dsm_stats s;
        tk_dsm_get_stats(&s);
        moved = s.pages_in - moved;
    }
    return t;
}

static double timed_start(void)
{
    if (dsm) {
        tk_dsm_stats s;
        tk_dsm_get_stats(&s);
        moved = s.pages_in;
    }
    return MPI_Wtime();
}

static void die(const char *what)
{
    fprintf(stderr, "bench_dsm_kernels: rank %d: %s: %s\n", rank, what, tk_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void *shared(size_t bytes)
{
    void *p = tk_dsm_alloc(bytes);
    if (!p) die("tk_dsm_alloc");
    return p;
}

static void sync_all(void)
{
    if (dsm)
        tk_dsm_barrier();
    else
        MPI_Barrier(MPI_COMM_WORLD);
}

/* [lo, hi) of n items for this rank */
static void part(size_t n, size_t *lo, size_t *hi)
{
    *lo = n * (size_t)rank / (size_t)np;
    *hi = n * (size_t)(rank + 1) / (size_t)np;
}

/* Every rank's part of n items of `unit` doubles each, as part() splits
 * them: the counts and displacements of MPI's v-collectives. */
static void split(size_t n, size_t unit, int *cnt, int *dis)
{
    for (int r = 0; r < np; r++) {
        dis[r] = (int)(unit * (n * (size_t)r / (size_t)np));
        cnt[r] = (int)(unit * (n * (size_t)(r + 1) / (size_t)np)) - dis[r];
    }
}

static double init_x(size_t i)
{
    return (double)(i % 1000) * 0.001 + 1.0;
}
static double init_y(size_t i)
{
    return (double)(i % 777) * 0.002;
}

static bool close_to(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b) + 1);
}

/* ---- daxpy: y = a x + y, ITERS times ---- */
static double daxpy(size_t n, int iters, bool *ok)
{
    size_t lo, hi;
    part(n, &lo, &hi);
    double *x, *y;
    if (dsm) {
        x = shared(n * 8);
        y = shared(n * 8);
    } else { /* this rank's part only, indexed as the whole */
        x = (double *)malloc((hi - lo) * 8) - lo;
        y = (double *)malloc((hi - lo) * 8) - lo;
    }
    for (size_t i = lo; i < hi; i++) {
        x[i] = init_x(i);
        y[i] = init_y(i);
    }
    sync_all();
    double t0 = timed_start();
    for (int it = 0; it < iters; it++) {
        for (size_t i = lo; i < hi; i++) y[i] += 0.5 * x[i];
        sync_all();
    }
    double t = timed_end(t0);
    /* rank 0 checks every element */
    double *all = rank == 0 ? malloc(n * 8) : NULL;
    if (dsm) {
        if (rank == 0) memcpy(all, y, n * 8);
    } else {
        int cnt[np], dis[np];
        split(n, 1, cnt, dis);
        MPI_Gatherv(y + lo, (int)(hi - lo), MPI_DOUBLE, all, cnt, dis, MPI_DOUBLE, 0,
                    MPI_COMM_WORLD);
    }
    if (rank == 0) {
        *ok = true;
        for (size_t i = 0; i < n && *ok; i++) {
            double v = init_y(i);
            for (int it = 0; it < iters; it++) v += 0.5 * init_x(i);
            *ok = close_to(all[i], v);
        }
        free(all);
    }
    sync_all();
    if (dsm) {
        tk_dsm_free(x);
        tk_dsm_free(y);
    } else {
        free(x + lo);
        free(y + lo);
    }
    return t;
}

/* ---- stream's triad: a = b + s c, ITERS times ---- */
static double stream(size_t n, int iters, bool *ok)
{
    size_t lo, hi;
    part(n, &lo, &hi);
    double *a, *b, *c;
    if (dsm) {
        a = shared(n * 8);
        b = shared(n * 8);
        c = shared(n * 8);
    } else {
        a = (double *)malloc((hi - lo) * 8) - lo;
        b = (double *)malloc((hi - lo) * 8) - lo;
        c = (double *)malloc((hi - lo) * 8) - lo;
    }
    for (size_t i = lo; i < hi; i++) {
        a[i] = 0;
        b[i] = init_x(i);
        c[i] = init_y(i);
    }
    sync_all();
    double t0 = timed_start();
    for (int it = 0; it < iters; it++) {
        double s = 1.0 + it * 0.25;
        for (size_t i = lo; i < hi; i++) a[i] = b[i] + s * c[i];
        sync_all();
    }
    double t = timed_end(t0);
    double sum = 0, tot;
    for (size_t i = lo; i < hi; i++) sum += a[i];
    MPI_Reduce(&sum, &tot, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double s = 1.0 + (iters - 1) * 0.25, want = 0;
        for (size_t i = 0; i < n; i++) want += init_x(i) + s * init_y(i);
        *ok = close_to(tot, want);
        if (dsm) /* and every element, read through the DSM */
            for (size_t i = 0; i < n && *ok; i++) *ok = close_to(a[i], init_x(i) + s * init_y(i));
    }
    sync_all();
    if (dsm) {
        tk_dsm_free(a);
        tk_dsm_free(b);
        tk_dsm_free(c);
    } else {
        free(a + lo);
        free(b + lo);
        free(c + lo);
    }
    return t;
}

static double mat_a(size_t i, size_t j)
{
    return (double)((i * 7 + j * 3) % 17) * 0.125;
}
static double mat_b(size_t i, size_t j)
{
    return (double)((i * 5 + j * 11) % 13) * 0.25 - 1;
}

/* ---- matmul: C = A B, n x n, rows by rank ---- */
static double matmul(size_t n, int iters, bool *ok)
{
    (void)iters;
    size_t lo, hi;
    part(n, &lo, &hi);
    double *A, *B, *C;
    if (dsm) {
        A = shared(n * n * 8);
        B = shared(n * n * 8);
        C = shared(n * n * 8);
    } else { /* A and C: this rank's rows; B: all of it, gathered */
        A = (double *)malloc((hi - lo) * n * 8) - lo * n;
        C = (double *)malloc((hi - lo) * n * 8) - lo * n;
        B = malloc(n * n * 8);
    }
    for (size_t i = lo; i < hi; i++)
        for (size_t j = 0; j < n; j++) {
            A[i * n + j] = mat_a(i, j);
            B[i * n + j] = mat_b(i, j);
        }
    sync_all();
    double t0 = timed_start();
    if (!dsm) {
        int cnt[np], dis[np];
        split(n, n, cnt, dis); /* (rows of B) */
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DOUBLE, B, cnt, dis, MPI_DOUBLE, MPI_COMM_WORLD);
    }
    for (size_t i = lo; i < hi; i++) {
        double *c = &C[i * n];
        for (size_t j = 0; j < n; j++) c[j] = 0;
        for (size_t k = 0; k < n; k++) {
            double a = A[i * n + k];
            const double *b = &B[k * n];
            for (size_t j = 0; j < n; j++) c[j] += a * b[j];
        }
    }
    sync_all();
    double t = timed_end(t0);
    /* rank 0: a checksum per row, against the serial product */
    double *rows = malloc(n * 8), *all = rank == 0 ? malloc(n * 8) : NULL;
    for (size_t i = lo; i < hi; i++) {
        double s = 0;
        for (size_t j = 0; j < n; j++) s += C[i * n + j] * (double)(j % 5 + 1);
        rows[i - lo] = s;
    }
    int cnt[np], dis[np];
    split(n, 1, cnt, dis);
    MPI_Gatherv(rows, (int)(hi - lo), MPI_DOUBLE, all, cnt, dis, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        *ok = true;
        double *c = malloc(n * 8);
        for (size_t i = 0; i < n && *ok; i++) {
            for (size_t j = 0; j < n; j++) c[j] = 0;
            for (size_t k = 0; k < n; k++)
                for (size_t j = 0; j < n; j++) c[j] += mat_a(i, k) * mat_b(k, j);
            double s = 0;
            for (size_t j = 0; j < n; j++) s += c[j] * (double)(j % 5 + 1);
            *ok = close_to(all[i], s);
        }
        free(c);
        free(all);
    }
    free(rows);
    sync_all();
    if (dsm) {
        tk_dsm_free(A);
        tk_dsm_free(B);
        tk_dsm_free(C);
    } else {
        free(A + lo * n);
        free(C + lo * n);
        free(B);
    }
    return t;
}

/* ---- matvec: v <- A v, ITERS times (A's rows sum to 1) ---- */
static double mv_a(size_t i, size_t j, size_t n)
{
    return ((i + j) % 3 + 1) / (2.0 * (double)n); /* rows sum to ~1 */
}

static double matvec(size_t n, int iters, bool *ok)
{
    size_t lo, hi;
    part(n, &lo, &hi);
    double *A, *v[2];
    if (dsm) {
        A = shared(n * n * 8);
        v[0] = shared(n * 8);
        v[1] = shared(n * 8);
    } else {
        A = (double *)malloc((hi - lo) * n * 8) - lo * n;
        v[0] = malloc(n * 8);
        v[1] = malloc(n * 8);
    }
    for (size_t i = lo; i < hi; i++) {
        for (size_t j = 0; j < n; j++) A[i * n + j] = mv_a(i, j, n);
        v[0][i] = init_x(i);
    }
    if (!dsm) /* every rank starts with the whole vector */
        for (size_t i = 0; i < n; i++) v[0][i] = init_x(i);
    int cnt[np], dis[np];
    split(n, 1, cnt, dis);
    sync_all();
    double t0 = timed_start();
    for (int it = 0; it < iters; it++) {
        const double *x = v[it & 1];
        double *y = v[(it & 1) ^ 1];
        for (size_t i = lo; i < hi; i++) {
            double s = 0;
            const double *a = &A[i * n];
            for (size_t j = 0; j < n; j++) s += a[j] * x[j];
            y[i] = s;
        }
        if (dsm)
            tk_dsm_barrier();
        else
            MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DOUBLE, y, cnt, dis, MPI_DOUBLE, MPI_COMM_WORLD);
    }
    sync_all();
    double t = timed_end(t0);
    if (rank == 0) {
        double *x = malloc(n * 8), *y = malloc(n * 8);
        for (size_t i = 0; i < n; i++) x[i] = init_x(i);
        for (int it = 0; it < iters; it++) {
            for (size_t i = 0; i < n; i++) {
                double s = 0;
                for (size_t j = 0; j < n; j++) s += mv_a(i, j, n) * x[j];
                y[i] = s;
            }
            double *tt = x;
            x = y;
            y = tt;
        }
        const double *got = v[iters & 1];
        *ok = true;
        for (size_t i = 0; i < n && *ok; i++) *ok = close_to(got[i], x[i]);
        free(x);
        free(y);
    }
    sync_all();
    if (dsm) {
        tk_dsm_free(A);
        tk_dsm_free(v[0]);
        tk_dsm_free(v[1]);
    } else {
        free(A + lo * n);
        free(v[0]);
        free(v[1]);
    }
    return t;
}

/* ---- jacobi: a 5-point stencil on an n x n grid, rows by rank ---- */
static double grid0(size_t i, size_t j, size_t n)
{
    return (i == 0 || j == 0 || i == n - 1 || j == n - 1) ? 1.0 : (double)((i * j) % 10) * 0.1;
}

static void jstep(const double *o, double *w, size_t n, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++) {
        if (i == 0 || i == n - 1) {
            for (size_t j = 0; j < n; j++) w[i * n + j] = o[i * n + j];
            continue;
        }
        w[i * n] = o[i * n];
        w[i * n + n - 1] = o[i * n + n - 1];
        for (size_t j = 1; j < n - 1; j++)
            w[i * n + j] = 0.25 * (o[(i - 1) * n + j] + o[(i + 1) * n + j] + o[i * n + j - 1] +
                                   o[i * n + j + 1]);
    }
}

static double jacobi(size_t n, int iters, bool *ok)
{
    size_t lo, hi;
    part(n, &lo, &hi);
    double *g[2];
    if (dsm) {
        g[0] = shared(n * n * 8);
        g[1] = shared(n * n * 8);
    } else { /* this rank's rows and one row of halo on each side */
        size_t rows = hi - lo + 2;
        g[0] = (double *)calloc(rows * n, 8) + n - lo * n;
        g[1] = (double *)calloc(rows * n, 8) + n - lo * n;
    }
    for (size_t i = lo; i < hi; i++)
        for (size_t j = 0; j < n; j++) g[0][i * n + j] = g[1][i * n + j] = grid0(i, j, n);
    sync_all();
    double t0 = timed_start();
    for (int it = 0; it < iters; it++) {
        double *o = g[it & 1], *w = g[(it & 1) ^ 1];
        if (!dsm) { /* halo rows from the neighbours */
            int up = rank > 0 ? rank - 1 : MPI_PROC_NULL,
                down = rank < np - 1 ? rank + 1 : MPI_PROC_NULL;
            MPI_Sendrecv(&o[lo * n], (int)n, MPI_DOUBLE, up, 1, &o[hi * n], (int)n, MPI_DOUBLE,
                         down, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Sendrecv(&o[(hi - 1) * n], (int)n, MPI_DOUBLE, down, 2, &o[(lo - 1) * n], (int)n,
                         MPI_DOUBLE, up, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        jstep(o, w, n, lo, hi);
        if (dsm) tk_dsm_barrier();
    }
    sync_all();
    double t = timed_end(t0);
    const double *res = g[iters & 1];
    double sum = 0, tot;
    for (size_t i = lo; i < hi; i++)
        for (size_t j = 0; j < n; j++) sum += res[i * n + j] * (double)((i + j) % 7 + 1);
    MPI_Reduce(&sum, &tot, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double *s0 = malloc(n * n * 8), *s1 = malloc(n * n * 8);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) s0[i * n + j] = grid0(i, j, n);
        for (int it = 0; it < iters; it++) {
            jstep(s0, s1, n, 0, n);
            double *tt = s0;
            s0 = s1;
            s1 = tt;
        }
        double want = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) want += s0[i * n + j] * (double)((i + j) % 7 + 1);
        *ok = close_to(tot, want);
        free(s0);
        free(s1);
    }
    sync_all();
    if (dsm) {
        tk_dsm_free(g[0]);
        tk_dsm_free(g[1]);
    } else {
        free(g[0] - n + lo * n);
        free(g[1] - n + lo * n);
    }
    return t;
}

/* ---- the protocol's costs (2 ranks; rank 1 takes the faults) ---- */
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void micro(int pages)
{
    size_t ps = tk_dsm_page_size();
    /* all of it homed on rank 0: the allocation is 2 x pages, rank 0 home
     * of the first half (block placement) */
    char *m = shared(2 * (size_t)pages * ps);
    const int reps = 7;
    double rd[7], wr[7], df[7], pp[7];
    bool rc = tk_dsm_protocol() == TK_DSM_RC;
    for (int r = 0; r < reps; r++) {
        /* rank 0 writes every page: rank 1's copies go (ivy: invalidated; rc: at the barrier) */
        if (rank == 0)
            for (int p = 0; p < pages; p++) m[(size_t)p * ps] = (char)(r + p);
        tk_dsm_barrier();
        /* read faults: rank 1 reads one byte of each page */
        double t0 = MPI_Wtime();
        long sum = 0;
        if (rank == 1)
            for (int p = 0; p < pages; p++) sum += ((volatile char *)m)[(size_t)p * ps];
        rd[r] = (MPI_Wtime() - t0) / pages;
        if (rank == 1 && sum < 0) puts("");
        tk_dsm_barrier();
        /* ivy: both hold copies (rank 0 owns): rank 1's writes take the
         * pages over, invalidating rank 0's; rc: rank 1's writes to its
         * cached copies make twins */
        if (rank == 1)
            for (int p = 0; p < pages; p++) sum += ((volatile char *)m)[(size_t)p * ps];
        tk_dsm_barrier();
        t0 = MPI_Wtime();
        if (rank == 1)
            for (int p = 0; p < pages; p++) m[(size_t)p * ps + 8] = (char)(r * 3 + p);
        wr[r] = (MPI_Wtime() - t0) / pages;
        /* rc: the release sends a diff per page (8 bytes changed); timed
         * against a release with nothing written */
        double d = 0;
        if (rc && rank == 1) {
            t0 = MPI_Wtime();
            tk_dsm_lock(0);
            tk_dsm_unlock(0); /* the diffs go here */
            double with = MPI_Wtime() - t0;
            t0 = MPI_Wtime();
            tk_dsm_lock(0);
            tk_dsm_unlock(0);
            double without = MPI_Wtime() - t0;
            d = (with - without) / pages;
        }
        df[r] = d;
        tk_dsm_barrier();
        /* an MPI ping-pong of one page between the same two ranks */
        char *buf = calloc(1, ps);
        const int n = 200;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            if (rank == 0) {
                MPI_Send(buf, (int)ps, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)ps, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, (int)ps, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)ps, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
            }
        }
        pp[r] = (MPI_Wtime() - t0) / n;
        free(buf);
        tk_dsm_barrier();
    }
    /* rank 1's figures to rank 0 */
    MPI_Bcast(rd, reps, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    MPI_Bcast(wr, reps, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    MPI_Bcast(df, reps, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("{\"protocol\": \"%s\", \"pages\": %d, \"mech\": \"%s\", ",
               tk_dsm_protocol_name(tk_dsm_protocol()), pages, tk_mech_name(tk_dsm_mech()));
        const char *names[] = {"read", "write", "diff", "pingpong"};
        double *v[] = {rd, wr, df, pp};
        for (int k = 0; k < 4; k++) {
            printf("\"%s\": [", names[k]);
            for (int r = 0; r < reps; r++) printf("%s%.9g", r ? ", " : "", v[k][r]);
            printf("]%s", k < 3 ? ", " : "}\n");
        }
        (void)cmp_d;
    }
    tk_dsm_free(m);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc >= 4 && !strcmp(argv[1], "micro")) {
        if (np != 2) {
            fprintf(stderr, "bench_dsm_kernels micro: run it on 2 ranks\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        tk_dsm_config c = {.protocol = !strcmp(argv[2], "rc") ? TK_DSM_RC : TK_DSM_IVY};
        if (tk_dsm_init_config(MPI_COMM_WORLD, &c)) die("tk_dsm_init");
        micro(atoi(argv[3]));
        tk_dsm_finalize();
        MPI_Finalize();
        return 0;
    }
    if (argc < 5 || (argc - 2) % 3 != 0) {
        if (!rank)
            fprintf(stderr, "usage: bench_dsm_kernels ivy|rc|mpi daxpy|stream|matmul|matvec|jacobi "
                            "SIZE ITERS [KERNEL SIZE ITERS ...]\n"
                            "       bench_dsm_kernels micro ivy|rc PAGES\n");
        MPI_Finalize();
        return 2;
    }
    const char *mode = argv[1];
    dsm = strcmp(mode, "mpi") != 0;
    if (dsm) {
        tk_dsm_config c = {.protocol = !strcmp(mode, "rc") ? TK_DSM_RC : TK_DSM_IVY};
        if (tk_dsm_init_config(MPI_COMM_WORLD, &c)) die("tk_dsm_init");
    }
    for (int a = 2; a + 2 < argc; a += 3) {
        const char *kernel = argv[a];
        size_t n = strtoull(argv[a + 1], NULL, 10);
        int iters = atoi(argv[a + 2]);
        bool ok = false;
        double t;
        moved = 0;
        if (!strcmp(kernel, "daxpy"))
            t = daxpy(n, iters, &ok);
        else if (!strcmp(kernel, "stream"))
            t = stream(n, iters, &ok);
        else if (!strcmp(kernel, "matmul"))
            t = matmul(n, iters, &ok);
        else if (!strcmp(kernel, "matvec"))
            t = matvec(n, iters, &ok);
        else if (!strcmp(kernel, "jacobi"))
            t = jacobi(n, iters, &ok);
        else {
            if (!rank) fprintf(stderr, "bench_dsm_kernels: unknown kernel %s\n", kernel);
            MPI_Abort(MPI_COMM_WORLD, 2);
            return 2;
        }
        double tmax;
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        unsigned long long total = 0;
        MPI_Reduce(&moved, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("{\"mode\": \"%s\", \"kernel\": \"%s\", \"ranks\": %d, \"size\": %zu, "
                   "\"iters\": %d, \"seconds\": %.9g, \"pages_in\": %llu, \"ok\": %s, "
                   "\"mech\": \"%s\"}\n",
                   mode, kernel, np, n, iters, tmax, total, ok ? "true" : "false",
                   dsm ? tk_mech_name(tk_dsm_mech()) : "none");
            fflush(stdout);
        }
    }
    if (dsm) tk_dsm_finalize();
    MPI_Finalize();
    return 0;
}
