/*
 * nvg.cl - the element-wise, row and column kernels of the device encoder
 * (cl/nvg_cl.c).  f32, row-major; every matrix argument says its shape.
 * The matrix products themselves go through clBLAST.
 */

/* out[offo + i*ldo + j] = in[i*ldi + j] * (rs ? rs[i] : 1) * (cs ? cs[j] : 1)
 * out (rows × cols, leading dimension ldo, from offo), in (rows × cols, ldi) */
__kernel void scale_rc(__global float *out, const ulong offo, const uint ldo,
		       __global const float *in,
		       const uint ldi, __global const float *rs, __global const float *cs,
		       const uint use_rs, const uint use_cs, const uint rows, const uint cols)
{
	const uint i = get_global_id(0), j = get_global_id(1);
	if (i >= rows || j >= cols)
		return;
	float v = in[(size_t)i * ldi + j];
	if (use_rs)
		v *= rs[i];
	if (use_cs)
		v *= cs[j];
	out[offo + (size_t)i * ldo + j] = v;
}

/* out = a - b, all (len) */
__kernel void sub(__global float *out, __global const float *a, __global const float *b,
		  const ulong len)
{
	const size_t i = get_global_id(0);
	if (i < len)
		out[i] = a[i] - b[i];
}

/* a *= b, both (len) */
__kernel void hadamard(__global float *a, __global const float *b, const ulong len)
{
	const size_t i = get_global_id(0);
	if (i < len)
		a[i] *= b[i];
}

/* out[i] = sum_j a[i*lda + j] * b[i*ldb + j], one work-group a row, local sums
 * a (rows × cols, lda, from offa), b (ldb, from offb), out (rows); local size a power of two */
__kernel void rowdot(__global float *out, __global const float *a, const ulong offa,
		     const uint lda, __global const float *b, const ulong offb, const uint ldb,
		     const uint cols, __local float *scr)
{
	a += offa;
	b += offb;
	const uint i = get_group_id(0), t = get_local_id(0), ls = get_local_size(0);
	float s = 0.0f;
	for (uint j = t; j < cols; j += ls)
		s += a[(size_t)i * lda + j] * b[(size_t)i * ldb + j];
	scr[t] = s;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (uint h = ls / 2; h > 0; h /= 2) {
		if (t < h)
			scr[t] += scr[t + h];
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (t == 0)
		out[i] = scr[0];
}

/* out[k] = sum_i a[i*lda + k] * b[i*ldb + k], one work-item a column
 * a (rows × cols, lda, from offa), b (ldb, from offb), out (cols) */
__kernel void coldot(__global float *out, __global const float *a, const ulong offa,
		     const uint lda, __global const float *b, const ulong offb, const uint ldb,
		     const uint rows, const uint cols)
{
	a += offa;
	b += offb;
	const uint k = get_global_id(0);
	if (k >= cols)
		return;
	float s = 0.0f;
	for (uint i = 0; i < rows; i++)
		s += a[(size_t)i * lda + k] * b[(size_t)i * ldb + k];
	out[k] = s;
}

/* out[i,k] = (in[i,k] >= 0 ? 1 : -1) * w[i]; in, out (rows × cols) */
__kernel void sign_w(__global float *out, __global const float *in, __global const float *w,
		     const uint rows, const uint cols)
{
	const uint i = get_global_id(0), k = get_global_id(1);
	if (i >= rows || k >= cols)
		return;
	const size_t o = (size_t)i * cols + k;
	out[o] = (in[o] >= 0.0f ? 1.0f : -1.0f) * w[i];
}

/* out (n × m) row j = column perm[j] of in (m × n) */
__kernel void perm_t(__global float *out, __global const float *in, __global const int *perm,
		     const uint m, const uint n)
{
	const uint j = get_global_id(0), i = get_global_id(1);
	if (j >= n || i >= m)
		return;
	out[(size_t)j * m + i] = in[(size_t)i * n + perm[j]];
}

/* gather (dir 0): out row j = in row perm[j]; scatter (dir 1): out row perm[j] = in row j
 * in, out (rows × cols) */
__kernel void perm_rows(__global float *out, __global const float *in, __global const int *perm,
			const uint dir, const uint rows, const uint cols)
{
	const uint j = get_global_id(0), k = get_global_id(1);
	if (j >= rows || k >= cols)
		return;
	const size_t p = (size_t)perm[j] * cols + k, q = (size_t)j * cols + k;
	if (dir == 0)
		out[q] = in[p];
	else
		out[p] = in[q];
}

/*
 * Row flips on S_U, one work-item a row: exact single-bit deltas of the row's
 * binary quadratic, greedy passes (at most 4) until no flip lowers it.
 * su, qs (m × r) updated in place (qs = su·Q kept current), q (r × r),
 * whb (m × r), l, qd (r), h (m), flips (m) the count per row.
 * thr: the relative size a delta must beat (f32 resolution).
 */
__kernel void flip_rows(__global float *su, __global float *qs, __global const float *q,
			__global const float *whb, __global const float *l,
			__global const float *qd, __global const float *h,
			__global uint *flips, const uint m, const uint r, const float thr)
{
	const uint i = get_global_id(0);
	if (i >= m)
		return;
	__global float *s = su + (size_t)i * r;
	__global float *qr = qs + (size_t)i * r;
	__global const float *wr = whb + (size_t)i * r;
	const float hi = h[i];
	uint nf = 0;
	for (int pass = 0; pass < 4; pass++) {
		uint changed = 0;
		for (uint k = 0; k < r; k++) {
			const float sk = s[k];
			const float d = -4.0f * hi * hi * sk * (qr[k] - qd[k] * sk) +
					4.0f * hi * sk * wr[k] * l[k];
			if (d < -thr * (hi * hi * qd[k] + 1e-30f)) {
				__global const float *qk = q + (size_t)k * r;
				for (uint t = 0; t < r; t++)
					qr[t] -= 2.0f * sk * qk[t];
				s[k] = -sk;
				changed++;
			}
		}
		nf += changed;
		if (!changed)
			break;
	}
	flips[i] = nf;
}

/* the sum of v over the work-group (all work-items call it) */
static float wg_sum(float v, __local float *scr)
{
	const uint t = get_local_id(0), ls = get_local_size(0);
	barrier(CLK_LOCAL_MEM_FENCE);
	scr[t] = v;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (uint h = ls / 2; h > 0; h /= 2) {
		if (t < h)
			scr[t] += scr[t + h];
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	const float s = scr[0];
	barrier(CLK_LOCAL_MEM_FENCE);
	return s;
}

/* the first index of the least value over the work-group; *best gets the value */
static uint wg_argmin(float v, uint idx, __local float *scr, __local uint *iscr, float *best)
{
	const uint t = get_local_id(0), ls = get_local_size(0);
	barrier(CLK_LOCAL_MEM_FENCE);
	scr[t] = v;
	iscr[t] = idx;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (uint h = ls / 2; h > 0; h /= 2) {
		if (t < h) {
			const float o = scr[t + h];
			const uint oi = iscr[t + h];
			if (o < scr[t] || (o == scr[t] && oi < iscr[t])) {
				scr[t] = o;
				iscr[t] = oi;
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	*best = scr[0];
	const uint b = iscr[0];
	barrier(CLK_LOCAL_MEM_FENCE);
	return b;
}

/*
 * The column-sequential sign search on S_V for one block of nb columns (act
 * order), one work-group; the r entries of a column are spread over the
 * work-items.  Everything is in rank space: with M = diag(h) S_U diag(ℓ),
 *   bv_j = Mᵀ w_j = bv0_j − Σ_{j'<j} Uc[j',j] · pe_j'     (earlier columns' feedback)
 *   pe_j = Mᵀ e_j = (bv_j − g_j · K s_j) / Uc[j,j]        (K = MᵀM)
 * so the m-long error rows are formed afterwards by the caller with GEMMs.
 * bv0, ks0, s, pe (nb × r); k (r × r); kd (r); uc (n × n) from row/col b0;
 * g (nb) out; flips (1) accumulated.  Local: ks, bv (r each), scr, iscr (ls).
 */
__kernel void gptq_block(__global const float *bv0, __global const float *ks0,
			 __global float *s, __global float *pe, __global float *g,
			 __global const float *k, __global const float *kd,
			 __global const float *uc, const uint n, const uint b0, const uint nb,
			 const uint r, const float thr, __global uint *flips,
			 __local float *ks, __local float *bv, __local float *scr,
			 __local uint *iscr)
{
	const uint t = get_local_id(0), ls = get_local_size(0);
	uint total = 0;
	for (uint jl = 0; jl < nb; jl++) {
		__global float *sj = s + (size_t)jl * r;
		const size_t cj = (size_t)(b0 + jl);
		for (uint x = t; x < r; x += ls) {
			float v = bv0[(size_t)jl * r + x];
			for (uint jp = 0; jp < jl; jp++)
				v -= uc[(size_t)(b0 + jp) * n + cj] * pe[(size_t)jp * r + x];
			bv[x] = v;
			ks[x] = ks0[(size_t)jl * r + x];
		}
		barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
		float a = 0.0f, d = 0.0f;
		for (uint x = t; x < r; x += ls) {
			a += bv[x] * sj[x];
			d += sj[x] * ks[x];
		}
		a = wg_sum(a, scr);
		d = wg_sum(d, scr);
		float gj = a / fmax(d, 1e-30f);
		if (gj < 0.0f) {
			for (uint x = t; x < r; x += ls) {
				sj[x] = -sj[x];
				ks[x] = -ks[x];
			}
			gj = -gj;
		}
		barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
		for (int round = 0; round < 3; round++) {
			uint nf = 0;
			while (nf < 4 * r) {
				float lv = INFINITY;
				uint li = r;
				for (uint x = t; x < r; x += ls) {
					const float dl = -4.0f * gj * gj * sj[x] * (ks[x] - kd[x] * sj[x]) +
							 4.0f * gj * sj[x] * bv[x];
					if (dl < lv) {
						lv = dl;
						li = x;
					}
				}
				float best;
				const uint bi = wg_argmin(lv, li, scr, iscr, &best);
				if (best >= -thr * (gj * gj * kd[bi] + 1e-30f))
					break;
				const float sb = sj[bi];
				for (uint x = t; x < r; x += ls)
					ks[x] -= 2.0f * sb * k[(size_t)bi * r + x];
				barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
				if (t == 0)
					sj[bi] = -sb;
				barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
				nf++;
			}
			total += nf;
			a = 0.0f;
			d = 0.0f;
			for (uint x = t; x < r; x += ls) {
				a += bv[x] * sj[x];
				d += sj[x] * ks[x];
			}
			a = wg_sum(a, scr);
			d = wg_sum(d, scr);
			float g2 = a / fmax(d, 1e-30f);
			if (g2 < 0.0f) {
				for (uint x = t; x < r; x += ls) {
					sj[x] = -sj[x];
					ks[x] = -ks[x];
				}
				g2 = -g2;
			}
			barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
			const int done = nf == 0 || fabs(g2 - gj) <= 1e-6f * fabs(gj);
			gj = g2;
			if (done)
				break;
		}
		const float ujj = uc[cj * n + cj];
		for (uint x = t; x < r; x += ls)
			pe[(size_t)jl * r + x] = (bv[x] - gj * ks[x]) / ujj;
		if (t == 0)
			g[jl] = gj;
		barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
	}
	if (t == 0)
		flips[0] += total;
}
