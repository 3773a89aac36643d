/* clctx.c - OpenCL device choice, context, kernels and errors (see clctx.h) */
#include "clctx.h"

#include <clblast_c.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "fileio.h"
#include "mem.h"
#include "parse.h"

#ifndef NVGKIT_DATADIR
#define NVGKIT_DATADIR "/usr/local/share/nvgkit"
#endif

/* the kernel source every device program is built from */
#define NVCL_SOURCE "nvg.cl"

static const char *const mode_names[] = { "cpu", "opencl", "auto", "both" };

int nvcl_parse_mode(const char *s, nvcl_mode *out)
{
	for (size_t i = 0; i < sizeof(mode_names) / sizeof(mode_names[0]); i++)
		if (strcmp(s, mode_names[i]) == 0) {
			*out = (nvcl_mode)i;
			return 0;
		}
	nv_seterr("expected cpu, opencl, auto or both");
	return -1;
}

const char *nvcl_mode_name(nvcl_mode m)
{
	return (unsigned)m < 4 ? mode_names[m] : "?";
}

struct code_name {
	int code;
	const char *name;
};

#define C(x) { x, #x }
static const struct code_name cl_codes[] = {
	C(CL_SUCCESS), C(CL_DEVICE_NOT_FOUND), C(CL_DEVICE_NOT_AVAILABLE),
	C(CL_COMPILER_NOT_AVAILABLE), C(CL_MEM_OBJECT_ALLOCATION_FAILURE),
	C(CL_OUT_OF_RESOURCES), C(CL_OUT_OF_HOST_MEMORY),
	C(CL_PROFILING_INFO_NOT_AVAILABLE), C(CL_MEM_COPY_OVERLAP), C(CL_IMAGE_FORMAT_MISMATCH),
	C(CL_IMAGE_FORMAT_NOT_SUPPORTED), C(CL_BUILD_PROGRAM_FAILURE), C(CL_MAP_FAILURE),
	C(CL_MISALIGNED_SUB_BUFFER_OFFSET), C(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST),
	C(CL_COMPILE_PROGRAM_FAILURE), C(CL_LINKER_NOT_AVAILABLE), C(CL_LINK_PROGRAM_FAILURE),
	C(CL_DEVICE_PARTITION_FAILED), C(CL_KERNEL_ARG_INFO_NOT_AVAILABLE),
	C(CL_INVALID_VALUE), C(CL_INVALID_DEVICE_TYPE), C(CL_INVALID_PLATFORM),
	C(CL_INVALID_DEVICE), C(CL_INVALID_CONTEXT), C(CL_INVALID_QUEUE_PROPERTIES),
	C(CL_INVALID_COMMAND_QUEUE), C(CL_INVALID_HOST_PTR), C(CL_INVALID_MEM_OBJECT),
	C(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR), C(CL_INVALID_IMAGE_SIZE), C(CL_INVALID_SAMPLER),
	C(CL_INVALID_BINARY), C(CL_INVALID_BUILD_OPTIONS), C(CL_INVALID_PROGRAM),
	C(CL_INVALID_PROGRAM_EXECUTABLE), C(CL_INVALID_KERNEL_NAME),
	C(CL_INVALID_KERNEL_DEFINITION), C(CL_INVALID_KERNEL), C(CL_INVALID_ARG_INDEX),
	C(CL_INVALID_ARG_VALUE), C(CL_INVALID_ARG_SIZE), C(CL_INVALID_KERNEL_ARGS),
	C(CL_INVALID_WORK_DIMENSION), C(CL_INVALID_WORK_GROUP_SIZE),
	C(CL_INVALID_WORK_ITEM_SIZE), C(CL_INVALID_GLOBAL_OFFSET), C(CL_INVALID_EVENT_WAIT_LIST),
	C(CL_INVALID_EVENT), C(CL_INVALID_OPERATION), C(CL_INVALID_GL_OBJECT),
	C(CL_INVALID_BUFFER_SIZE), C(CL_INVALID_MIP_LEVEL), C(CL_INVALID_GLOBAL_WORK_SIZE),
	C(CL_INVALID_PROPERTY), C(CL_INVALID_IMAGE_DESCRIPTOR), C(CL_INVALID_COMPILER_OPTIONS),
	C(CL_INVALID_LINKER_OPTIONS), C(CL_INVALID_DEVICE_PARTITION_COUNT),
	{ -69, "CL_INVALID_PIPE_SIZE" }, { -70, "CL_INVALID_DEVICE_QUEUE" },
	{ -71, "CL_INVALID_SPEC_ID" }, { -72, "CL_MAX_SIZE_RESTRICTION_EXCEEDED" },
	{ -1001, "CL_PLATFORM_NOT_FOUND_KHR" },
};

static const struct code_name blast_codes[] = {
	C(CLBlastSuccess), C(CLBlastOpenCLCompilerNotAvailable), C(CLBlastTempBufferAllocFailure),
	C(CLBlastOpenCLOutOfResources), C(CLBlastOpenCLOutOfHostMemory),
	C(CLBlastOpenCLBuildProgramFailure), C(CLBlastInvalidValue), C(CLBlastInvalidCommandQueue),
	C(CLBlastInvalidMemObject), C(CLBlastInvalidBinary), C(CLBlastInvalidBuildOptions),
	C(CLBlastInvalidProgram), C(CLBlastInvalidProgramExecutable), C(CLBlastInvalidKernelName),
	C(CLBlastInvalidKernelDefinition), C(CLBlastInvalidKernel), C(CLBlastInvalidArgIndex),
	C(CLBlastInvalidArgValue), C(CLBlastInvalidArgSize), C(CLBlastInvalidKernelArgs),
	C(CLBlastInvalidLocalNumDimensions), C(CLBlastInvalidLocalThreadsTotal),
	C(CLBlastInvalidLocalThreadsDim), C(CLBlastInvalidGlobalOffset),
	C(CLBlastInvalidEventWaitList), C(CLBlastInvalidEvent), C(CLBlastInvalidOperation),
	C(CLBlastInvalidBufferSize), C(CLBlastInvalidGlobalWorkSize), C(CLBlastNotImplemented),
	C(CLBlastInvalidMatrixA), C(CLBlastInvalidMatrixB), C(CLBlastInvalidMatrixC),
	C(CLBlastInvalidVectorX), C(CLBlastInvalidVectorY), C(CLBlastInvalidDimension),
	C(CLBlastInvalidLeadDimA), C(CLBlastInvalidLeadDimB), C(CLBlastInvalidLeadDimC),
	C(CLBlastInvalidIncrementX), C(CLBlastInvalidIncrementY), C(CLBlastInsufficientMemoryA),
	C(CLBlastInsufficientMemoryB), C(CLBlastInsufficientMemoryC), C(CLBlastInsufficientMemoryX),
	C(CLBlastInsufficientMemoryY), C(CLBlastInsufficientMemoryTemp), C(CLBlastInvalidBatchCount),
	C(CLBlastInvalidOverrideKernel), C(CLBlastMissingOverrideParameter),
	C(CLBlastInvalidLocalMemUsage), C(CLBlastNoHalfPrecision), C(CLBlastNoDoublePrecision),
	C(CLBlastInvalidVectorScalar), C(CLBlastInsufficientMemoryScalar), C(CLBlastDatabaseError),
	C(CLBlastUnknownError), C(CLBlastUnexpectedError),
};
#undef C

static const char *code_lookup(const struct code_name *t, size_t nt, int code)
{
	static _Thread_local char buf[48];

	for (size_t i = 0; i < nt; i++)
		if (t[i].code == code)
			return t[i].name;
	snprintf(buf, sizeof(buf), "unknown status %d", code);
	return buf;
}

const char *nvcl_strerror(cl_int st)
{
	return code_lookup(cl_codes, sizeof(cl_codes) / sizeof(cl_codes[0]), st);
}

const char *nvcl_blast_strerror(int st)
{
	return code_lookup(blast_codes, sizeof(blast_codes) / sizeof(blast_codes[0]), st);
}

void nvcl_fmt_bytes(size_t bytes, char *out, size_t len)
{
	double b = (double)bytes;

	if (b >= 1024.0 * 1024 * 1024)
		snprintf(out, len, "%.2f GiB", b / (1024.0 * 1024 * 1024));
	else if (b >= 1024.0 * 1024)
		snprintf(out, len, "%.1f MiB", b / (1024.0 * 1024));
	else
		snprintf(out, len, "%zu bytes", bytes);
}

/* ---------------------------------------------------------------- kernels */

static int dir_has_source(const char *dir)
{
	char p[PATH_MAX + 160];

	snprintf(p, sizeof(p), "%s/%s", dir, NVCL_SOURCE);
	return access(p, R_OK) == 0;
}

const char *nvcl_kernel_dir(void)
{
	static _Thread_local char dir[PATH_MAX + 64];
	static const char *const rel[] = { "../share/nvgkit/cl", "../cl", "../../cl" };
	const char *env = getenv("NVG_CL_DIR");
	char exe[PATH_MAX - 64];
	ssize_t k;

	if (env && *env) {
		if (!dir_has_source(env)) {
			nv_seterr("NVG_CL_DIR '%s' holds no readable %s", env, NVCL_SOURCE);
			return NULL;
		}
		snprintf(dir, sizeof(dir), "%s", env);
		return dir;
	}
	k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (k > 0) {
		exe[k] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash)
			*slash = '\0';
		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			snprintf(dir, sizeof(dir), "%s/%s", exe, rel[i]);
			if (dir_has_source(dir))
				return dir;
		}
	}
	snprintf(dir, sizeof(dir), "%s/cl", NVGKIT_DATADIR);
	if (dir_has_source(dir))
		return dir;
	nv_seterr("no %s beside the executable nor in %s/cl (set NVG_CL_DIR)", NVCL_SOURCE,
		  NVGKIT_DATADIR);
	return NULL;
}

static void keep_build_log(nvcl_ctx *c)
{
	size_t len = 0;

	free(c->build_log);
	c->build_log = NULL;
	if (clGetProgramBuildInfo(c->prog, c->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) !=
	    CL_SUCCESS || len == 0)
		return;
	c->build_log = calloc(len + 1, 1);
	if (c->build_log)
		clGetProgramBuildInfo(c->prog, c->device, CL_PROGRAM_BUILD_LOG, len, c->build_log,
				      NULL);
}

static int build_program(nvcl_ctx *c)
{
	const char *dir = nvcl_kernel_dir();
	uint8_t *src;
	size_t len;
	cl_int st;
	char path[PATH_MAX + 128];

	if (!dir)
		return -1;
	snprintf(path, sizeof(path), "%s/%s", dir, NVCL_SOURCE);
	c->src_path = nv_strdup(path);
	if (!c->src_path || nv_read_file(path, &src, &len) < 0)
		return -1;
	const char *s = (const char *)src;
	c->prog = clCreateProgramWithSource(c->ctx, 1, &s, &len, &st);
	free(src);
	if (st != CL_SUCCESS) {
		nv_seterr("creating the program from '%s': %s", path, nvcl_strerror(st));
		return -1;
	}
	st = clBuildProgram(c->prog, 1, &c->device, "-cl-std=CL1.2", NULL, NULL);
	if (st != CL_SUCCESS) {
		keep_build_log(c);
		nv_seterr("building kernels '%s' for '%s': %s", path, c->dev_name,
			  nvcl_strerror(st));
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- devices */

/* an index from the option, else the environment variable, else -1 */
static int pick_index(long opt, const char *env, long *out)
{
	const char *v = getenv(env);

	*out = opt;
	if (opt >= 0 || !v || !*v)
		return 0;
	if (nv_parse_long(v, 0, 1024, out) < 0) {
		nv_preerr("%s '%s'", env, v);
		return -1;
	}
	return 0;
}

/* the platforms present; 0 with *np = 0 when the ICD loader finds none */
static int list_platforms(cl_platform_id *ids, cl_uint max, cl_uint *np)
{
	cl_int st = clGetPlatformIDs(max, ids, np);

	if (st == CL_PLATFORM_NOT_FOUND_KHR || (st == CL_SUCCESS && *np == 0)) {
		*np = 0;
		return 0;
	}
	if (st != CL_SUCCESS) {
		nv_seterr("listing OpenCL platforms: %s", nvcl_strerror(st));
		return -1;
	}
	if (*np > max)
		*np = max;
	return 0;
}

static void fill_info(nvcl_ctx *c)
{
	cl_device_type type = 0;
	cl_ulong v = 0;
	size_t wg = 0;
	const char *lim = getenv("NVG_CL_MEM_LIMIT"), *llim = getenv("NVG_CL_LOCAL_LIMIT");

	clGetPlatformInfo(c->platform, CL_PLATFORM_NAME, sizeof(c->plat_name), c->plat_name, NULL);
	clGetDeviceInfo(c->device, CL_DEVICE_NAME, sizeof(c->dev_name), c->dev_name, NULL);
	clGetDeviceInfo(c->device, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
	c->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
	clGetDeviceInfo(c->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(v), &v, NULL);
	c->max_alloc = (size_t)v;
	clGetDeviceInfo(c->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(v), &v, NULL);
	c->global_mem = (size_t)v;
	clGetDeviceInfo(c->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(v), &v, NULL);
	c->local_mem = (size_t)v;
	clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(wg), &wg, NULL);
	c->max_wg = wg;
	if (lim && *lim) {
		size_t l;
		if (nv_parse_size(lim, 1, SIZE_MAX, &l) == 0) {
			if (l < c->global_mem)
				c->global_mem = l;
			if (l < c->max_alloc)
				c->max_alloc = l;
		}
	}
	if (llim && *llim) {
		size_t l;
		if (nv_parse_size(llim, 1, SIZE_MAX, &l) == 0 && l < c->local_mem)
			c->local_mem = l;
	}
}

/* the OpenCL version the device reports ("OpenCL 3.0 PoCL ..."), at least 1.2 */
static int check_version(nvcl_ctx *c)
{
	char v[128] = "";
	int major = 0, minor = 0;

	clGetDeviceInfo(c->device, CL_DEVICE_VERSION, sizeof(v) - 1, v, NULL);
	if (sscanf(v, "OpenCL %d.%d", &major, &minor) != 2 || major * 10 + minor < 12) {
		nv_seterr("device '%s' lacks OpenCL 1.2 (it reports '%s')", c->dev_name, v);
		return -1;
	}
	return 0;
}

/* find a device: by index, else the first GPU of any platform (gpu_only: or none),
 * else the first device; returns 1 when there is nothing to pick */
static int find_device(long plat, long dev, int gpu_only, nvcl_ctx *c)
{
	cl_platform_id pids[16];
	cl_uint np = 0;

	if (list_platforms(pids, 16, &np) < 0)
		return -1;
	if (np == 0) {
		nv_seterr("no OpenCL platform (the ICD loader found none)");
		return 1;
	}
	if (plat >= (long)np) {
		nv_seterr("--cl-platform %ld: there are %u platform(s), 0 to %u", plat, np, np - 1);
		return -1;
	}
	for (int pass = 0; pass < 2; pass++) {
		cl_device_type want = pass == 0 ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_ALL;
		if (pass == 1 && gpu_only && dev < 0)
			break;
		for (cl_uint p = 0; p < np; p++) {
			cl_device_id dids[16];
			cl_uint nd = 0;
			if (plat >= 0 && p != (cl_uint)plat)
				continue;
			if (dev >= 0)
				want = CL_DEVICE_TYPE_ALL;
			if (clGetDeviceIDs(pids[p], want, 16, dids, &nd) != CL_SUCCESS || nd == 0)
				continue;
			if (nd > 16)
				nd = 16;
			if (dev >= (long)nd) {
				nv_seterr("--cl-device %ld: platform %u has %u device(s), 0 to %u", dev,
					  p, nd, nd - 1);
				return -1;
			}
			c->platform = pids[p];
			c->device = dids[dev >= 0 ? dev : 0];
			fill_info(c);
			return 0;
		}
	}
	nv_seterr(gpu_only ? "no OpenCL GPU" : "no OpenCL device");
	return 1;
}

static int open_found(nvcl_ctx *c)
{
	cl_int st;

	if (check_version(c) < 0)
		return -1;
	c->ctx = clCreateContext(NULL, 1, &c->device, NULL, NULL, &st);
	if (st != CL_SUCCESS) {
		nv_seterr("creating a context on '%s': %s", c->dev_name, nvcl_strerror(st));
		return -1;
	}
	return build_program(c);
}

int nvcl_open(long plat, long dev, nvcl_ctx *c)
{
	int rc;

	memset(c, 0, sizeof(*c));
	if (pick_index(plat, "NVG_CL_PLATFORM", &plat) < 0 ||
	    pick_index(dev, "NVG_CL_DEVICE", &dev) < 0)
		return -1;
	rc = find_device(plat, dev, 0, c);
	if (rc != 0)
		return -1;
	return open_found(c);
}

int nvcl_resolve(nvcl_mode mode, long plat, long dev, nvcl_ctx *c, nvcl_choice *ch)
{
	int rc;

	memset(c, 0, sizeof(*c));
	memset(ch, 0, sizeof(*ch));
	if (mode == NVCL_CPU) {
		ch->use_cpu = 1;
		return 0;
	}
	if (pick_index(plat, "NVG_CL_PLATFORM", &plat) < 0 ||
	    pick_index(dev, "NVG_CL_DEVICE", &dev) < 0)
		return -1;
	rc = find_device(plat, dev, mode == NVCL_AUTO, c);
	if (rc < 0)
		return -1;
	if (rc > 0) {
		if (mode != NVCL_AUTO)
			return -1;
		/* auto: the CPU; a note only when OpenCL is missing altogether */
		if (strstr(nv_err(), "platform"))
			snprintf(ch->note, sizeof(ch->note), "%s: encoding on the CPU", nv_err());
		ch->use_cpu = 1;
		return 0;
	}
	ch->use_cl = 1;
	ch->use_cpu = mode == NVCL_BOTH;
	return open_found(c);
}

void nvcl_close(nvcl_ctx *c)
{
	if (c->prog)
		clReleaseProgram(c->prog);
	if (c->ctx)
		clReleaseContext(c->ctx);
	free(c->build_log);
	free(c->src_path);
	memset(c, 0, sizeof(*c));
}

/* ---------------------------------------------------------------- buffers */

cl_mem nvcl_buffer(nvcl_ctx *c, size_t bytes, const char *what)
{
	char b[32], lim[32];
	cl_int st;
	cl_mem m;

	if (bytes == 0)
		bytes = 4;
	if (bytes > c->max_alloc) {
		nvcl_fmt_bytes(bytes, b, sizeof(b));
		nvcl_fmt_bytes(c->max_alloc, lim, sizeof(lim));
		nv_seterr("device out of memory: %s for %s is over the largest buffer '%s' allows "
			  "(%s)", b, what, c->dev_name, lim);
		return NULL;
	}
	m = clCreateBuffer(c->ctx, CL_MEM_READ_WRITE, bytes, NULL, &st);
	if (st != CL_SUCCESS) {
		nvcl_fmt_bytes(bytes, b, sizeof(b));
		nv_seterr("device out of memory: %s for %s on '%s': %s", b, what, c->dev_name,
			  nvcl_strerror(st));
		return NULL;
	}
	return m;
}

