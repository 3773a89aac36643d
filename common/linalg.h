/*
 * linalg.h - row-major f64 dense linear algebra over OpenBLAS and LAPACKE.
 *
 * A matrix carries its shape; d holds rows·cols doubles row-major.  Every
 * O(n³) operation goes to BLAS or LAPACK: nothing here multiplies matrices
 * by hand.  Functions that can fail on data (a matrix that is not positive
 * definite, an allocation) set the reason (err.h) and return -1; a shape
 * mismatch between arguments is a programming error and asserts.
 *
 * Every LAPACK wrapper checks the entries it reads and the ones it returns:
 * a NaN or an infinity, in or out (a finite 1e308 can overflow inside), is
 * an error naming the entry ("matrix entry (i,j) = inf is not finite"), never
 * an abort, so no value in a file can reach LAPACKE's own NaN check.  BLAS
 * products are not checked: their callers check what they keep.
 *
 * Results do not depend on the thread count.  OpenBLAS's threaded calls
 * did (its threads split a product's output in parts whose shapes follow
 * the thread count, and its kernels' sums follow the part's shape; its
 * level-2 and LAPACK routines split sums), so OpenBLAS runs on one thread
 * (nv_set_threads) and the level-3 products go through the fixed tiles
 * below, on threads of our own.
 */
#ifndef NV_LINALG_H
#define NV_LINALG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
	size_t r, c; /* rows, cols */
	double *d;   /* (r × c) row-major, owned */
} nv_mat;

/* a zeroed r × c matrix (r or c may be 0); -1 with reason on exhaustion */
int nv_mat_zeros(nv_mat *a, size_t r, size_t c);
/* a copy of src */
int nv_mat_copy(nv_mat *dst, const nv_mat *src);
/* the identity n × n */
int nv_mat_eye(nv_mat *a, size_t n);
void nv_mat_free(nv_mat *a);

static inline double *nv_row(const nv_mat *a, size_t i)
{
	return a->d + i * a->c;
}

/* C = alpha·op(A)·op(B) + beta·C; op(X) = Xᵀ when tX; C must have the result's shape */
void nv_gemm(double alpha, const nv_mat *a, int ta, const nv_mat *b, int tb, double beta,
	     nv_mat *c);
/* C = op(A)·op(B), freshly allocated; -1 with reason on exhaustion */
int nv_gemm_new(const nv_mat *a, int ta, const nv_mat *b, int tb, nv_mat *c);

/* a matrix held in f32 (a Gram as its file stores it: half the f64 bytes,
 * and exactly its values); a square one may carry its diagonal in f64 (a
 * damped Gram: the Gram's f32 values off the diagonal, the ridge on it) */
typedef struct {
	size_t r, c;
	float *d;     /* (r × c) row-major, owned */
	double *diag; /* (r) the diagonal, owned, d's own ignored; or NULL */
} nv_mat32;

void nv_mat32_free(nv_mat32 *a);
/* entry (i, j) */
double nv_mat32_at(const nv_mat32 *a, size_t i, size_t j);
/* the f64 matrix it stands for (fresh) */
int nv_mat32_widen(const nv_mat32 *a, nv_mat *out);
/* C = A·B (fresh) with A in f32, in f64 arithmetic: A widened 256 rows at a
 * time, so no f64 copy of it is ever whole */
int nv_gemm32a_new(const nv_mat32 *a, const nv_mat *b, nv_mat *c);
/* C = A·B (fresh) with A in f32, in f32 arithmetic: B rounded to f32, the
 * sums of nv_sgemm (fixed tiles: the same bits at any thread count), 256
 * rows of C at a time, widened; a diagonal in f64 enters in f64 (d's own
 * is no entry: the bits do not depend on it).  Each entry is within
 * γ_{k+1}·(|A|·|B|)_ij of the exact A·B (γ_j = j·u/(1 − j·u), u = 2⁻²⁴;
 * B's rounding included): at twice nv_gemm32a_new's rate, for products
 * whose users need no more */
int nv_gemm32s_new(const nv_mat32 *a, const nv_mat *b, nv_mat *c);
/* out[i] = x[i] rounded to f32, and back: widened to f64 (exactly), n entries */
void nv_f32_round(const double *x, size_t n, float *out);
void nv_f64_widen(const float *x, size_t n, double *out);
/* C = op(A)·B (fresh), A and B rounded to f32, in f32 arithmetic (one
 * nv_sgemm: fixed tiles), widened: each entry within γ_(k+2)·(|op(A)|·|B|)_ij
 * of the exact product (nv_gemm32s_new's bound, A's rounding added) */
int nv_gemm_f32_new(const nv_mat *a, int ta, const nv_mat *b, nv_mat *c);
/* C = A·B (fresh) with B in f32, widened 256 columns at a time */
int nv_gemm32b_new(const nv_mat *a, const nv_mat32 *b, nv_mat *c);
/* the same into c (A's rows × B's columns), already made */
int nv_gemm32b(const nv_mat *a, const nv_mat32 *b, nv_mat *c);

/* C = alpha·A·Aᵀ (ta = 0) or alpha·Aᵀ·A (ta = 1), both triangles filled, freshly allocated */
int nv_syrk_new(double alpha, const nv_mat *a, int ta, nv_mat *c);
/* c's lower triangle (c: n × n, n = a's columns) = beta·c + aᵀ·a, the
 * upper not touched: aᵀ·a summed over row blocks of a taller matrix */
void nv_syrk_t_lower(const nv_mat *a, double beta, nv_mat *c);
/* c's upper triangle copied from its lower */
void nv_sym_mirror(nv_mat *c);

/* R (k × k, upper triangular, freshly allocated) of A = QR for A (m × k, m ≥ k):
 * RᵀR = AᵀA, also when A has not full rank (Householder QR, dgeqrf); -1
 * with reason on exhaustion or an entry that is not finite */
int nv_qr_r(const nv_mat *a, nv_mat *r);
/* the same for A given column-major in q (m × k, leading dimension m),
 * which the factorisation overwrites: for a caller that can write A in that
 * order itself, so that no row-major copy is held beside it */
int nv_qr_r_cm(double *q, size_t m, size_t k, nv_mat *r);

/* in place: A (n × n, SPD) becomes its lower Cholesky factor (upper zeroed);
 * 1 with reason "not positive definite (leading minor k)" when it is not
 * (A then partly overwritten), -1 with reason when an entry of its lower
 * triangle or of the factor is not finite */
int nv_potrf_lower(nv_mat *a);

/* in place: a lower triangular A with nonzero diagonal becomes its inverse */
int nv_trtri_lower(nv_mat *a);

/* the top k eigenpairs of symmetric A (its lower triangle read):
 * A·E = E·diag(lam), lam (k entries) descending, E (n × k, orthonormal
 * columns) freshly allocated, each column's entry of largest modulus
 * positive.  a is spent: its buffer is LAPACK's workspace (dsytrd, dstemr's
 * MRRR for the k pairs only, dormtr), and is freed (a->d NULL, its dims
 * kept) whether or not the decomposition succeeds, unless a's entries are
 * refused first (not finite) */
int nv_sym_eig_top(nv_mat *a, size_t k, double *lam, nv_mat *e);
/* the same on a caller's buffers: a (n × n, lower triangle read) spent but
 * not freed, the eigenvectors into vec (n × k, row-major) */
int nv_sym_eig_top_in(double *a, size_t n, size_t k, double *lam, double *vec);
/* all n of them */
int nv_sym_eig(nv_mat *a, double *lam, nv_mat *e);

/* the eigen route's floor on λ_min(AᵀA)/λ_max(AᵀA): below it, the SVD */
#define NV_POLAR_EIG_MIN 1e-8

/*
 * the orthogonal polar factor Q = U·Vᵀ of A = U·Σ·Vᵀ (square), A taken (a
 * is freed either way): Q = A·(AᵀA)^{-1/2} from the eigenpairs of AᵀA
 * (dsytrd, MRRR, dormtr: 0.7-0.8x dgesdd's time on the ITQ's products,
 * half its memory),
 * exact to about n·ε·κ(A)²; where κ(A)² exceeds 1/NV_POLAR_EIG_MIN, by
 * dgesdd on A's buffer (*by_svd 1; may be NULL)
 */
int nv_polar_take(nv_mat *a, nv_mat *q, int *by_svd);
/* the same, A copied */
int nv_polar(const nv_mat *a, nv_mat *q);
/* the factor by dgesdd alone: the reference, exact to about n·ε·κ(A) */
int nv_polar_svd(const nv_mat *a, nv_mat *q);

/* x = (A + ridge·mean(diag A)·I)⁻¹·b for symmetric A (n × n, its lower
 * triangle read), through dposv; ridge 1e-10 in the encoders.  A is not
 * modified.  0 solved; 1 when the shifted matrix is not positive definite
 * (reason set: the encoders keep their old values); -1 with reason when an
 * entry read or solved is not finite, or on exhaustion. */
int nv_solve_spd(const nv_mat *a, const double *b, double *x, double ridge);

/* nv_solve_spd without its n × n copy: A's buffer is spent (the
 * factor's), the same x bit for bit */
int nv_solve_spd_take(nv_mat *a, const double *b, double *x, double ridge);

/* the solve under both: x (b on entry) = (A + shift·I)⁻¹·x for the uplo ('L'
 * or 'U') triangle of row-major a (n × n); w is n × n workspace.  Returns
 * LAPACK's info: 0, or > 0 when the shifted matrix is not positive definite;
 * -1 with reason when an entry of that triangle, of b, of x or the shift is
 * not finite. */
int nv_posv_rm(const double *a, size_t n, char uplo, double shift, double *w, double *x);

/* X (n × k) ← (A + shift·I)⁻¹·X for symmetric A (n × n), every column at once
 * (dposv); a matrix that is not positive definite is an error with reason */
int nv_posv_many(const nv_mat *a, double shift, nv_mat *x);

/*
 * The thread count of our own threads (the tiles' products, the forward's
 * jobs); tools call nv_set_threads once.  Until they do it is what
 * OpenBLAS found (OPENBLAS_NUM_THREADS or the CPUs).  OpenBLAS itself
 * runs on one thread from the first call of either on: its own threads
 * would split products and sums by the thread count, and would spin
 * between calls on the cores that ours need (on the 2-core VM an encode at
 * 2 threads took 1.3× its time with OpenBLAS's pool awake beside the
 * tiles).  nv_get_threads is 1 inside a serial section.
 */
void nv_set_threads(int n);
int nv_get_threads(void);

/*
 * the core whose kernels OpenBLAS runs (its name for it), and into hint
 * (cap bytes) one line when the CPU outruns those kernels, whether OpenBLAS
 * chose them or OPENBLAS_CORETYPE did: OpenBLAS takes an unknown CPU (a
 * virtual one, say) for a generic Prescott, whose products ran 4x slower
 * than SkylakeX's on an AVX-512 machine, and some environments set
 * OPENBLAS_CORETYPE=Haswell on AVX-512 CPUs, whose dgemm then ran at 0.6 of
 * SkylakeX's.  hint is "" otherwise.
 */
const char *nv_blas_core(char *hint, size_t cap);

/* A serial section: work that runs on the calling thread alone (jobs
 * already spread over our threads, r-vector work a thread's wake-up would
 * only slow), between nv_serial() and nv_unserial(): the tiles' products
 * inside take one thread.  The count is global: sections may overlap on
 * several threads (nvg-encode --jobs), and it is one while any is open. */
void nv_serial(void);
void nv_unserial(void);


/*
 * The level-3 products in fixed tiles (tiles.c): the output cut into tiles
 * whose shape depends on the product's shape alone, each a single-threaded
 * BLAS call, shared among nv_get_threads() threads of our own, so that the
 * bits do not depend on the thread count.  Row-major with leading
 * dimensions; not counted in nv_flops (their callers count).
 *
 * nv_sgemm, nv_dgemm: C (M × N) = alpha·op(A)·op(B) + beta·C.
 * nv_dsyrk, nv_ssyrk: C (N × N) = alpha·op(A)·op(A)ᵀ + beta·C, op(A) N × K,
 * on C's upper triangle (upper 1) or lower one; the other is not touched.
 * nv_dtrsm_left: B (M × N) = alpha·op(A)⁻¹·B, A (M × M) upper (upper 1) or
 * lower triangular, its diagonal taken as ones where unit is 1.
 */
void nv_sgemm(int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *A,
	      size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc);
void nv_dgemm(int ta, int tb, size_t M, size_t N, size_t K, double alpha, const double *A,
	      size_t lda, const double *B, size_t ldb, double beta, double *C, size_t ldc);
void nv_dsyrk(int upper, int ta, size_t N, size_t K, double alpha, const double *A,
	      size_t lda, double beta, double *C, size_t ldc);
void nv_ssyrk(int upper, int ta, size_t N, size_t K, float alpha, const float *A, size_t lda,
	      float beta, float *C, size_t ldc);
void nv_dtrsm_left(int upper, int ta, int unit, size_t M, size_t N, double alpha,
		   const double *A, size_t lda, double *B, size_t ldb);

/* floating-point operations counted from the shapes of every call above,
 * process-wide (LAPACK routines by their textbook leading terms) */
uint64_t nv_flops(void);
void nv_flops_reset(void);
void nv_flops_add(uint64_t n);

/* -1 with reason "what (i,j) = v is not finite" at a's first such entry */
int nv_mat_check_finite(const nv_mat *a, const char *what);

/* -1 with reason "what (i,j) = v is not finite" ("what j = v ..." when r
 * is 1) at the first such entry of a (r × c, row-major) in the triangle
 * LAPACK reads: tri 'L' (j ≤ i), 'U' (j ≥ i), or 0 for every entry */
int nv_check_finite(const double *a, size_t r, size_t c, char tri, const char *what);

/*
 * a LAPACKE info, for callers of LAPACKE: 0 done, > 0 the routine's own
 * failure on these values (returned for the caller to name), -1 with reason
 * when LAPACKE could not allocate its workspace.  Any other negative info is
 * an argument the caller got wrong and asserts: inputs are checked finite
 * first (nv_check_finite), so LAPACKE's NaN check cannot be what answers.
 */
int nv_lapack_info(int info);

/* Σ a_ij·b_ij over two matrices of one shape */
double nv_dot_all(const nv_mat *a, const nv_mat *b);

/* s + Σ a_i·b_i over n entries, added in i's order: nv_dot_all's sum taken
 * a piece at a time gives its bits */
double nv_dot_acc(double s, const double *a, const double *b, size_t n);

#endif
