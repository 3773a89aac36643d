/*
 * clctx.h - the OpenCL side of nvg-encode's device path: which device,
 * its context, the kernels of the cl directory, buffers and error strings.
 *
 * Device choice (nvg-encode --device):
 *   cpu     the f64 CPU encoder only
 *   opencl  an OpenCL device (the first GPU, else the first device of the
 *           platform); no platform or no device is an error
 *   auto    an OpenCL GPU when one exists, else the CPU (a note is given
 *           when there is no OpenCL platform at all)
 *   both    the CPU and an OpenCL device, with a [cmp] line per tensor
 * A platform and device are picked by index with --cl-platform/--cl-device
 * or NVG_CL_PLATFORM/NVG_CL_DEVICE (the options win).
 *
 * Kernels: the .cl sources are read from $NVG_CL_DIR, else from beside the
 * executable (../share/nvgkit/cl, then the source tree's cl/ for bin/ and
 * build/unit/), else NVGKIT_DATADIR/cl.  A program that fails to build
 * leaves its compiler log in nvcl_ctx.build_log.
 *
 * NVG_CL_MEM_LIMIT and NVG_CL_LOCAL_LIMIT (bytes) make the device's global
 * and local memory look smaller than they are, so the out-of-memory and
 * missing-feature paths can be tested on any machine.  A device below
 * OpenCL 1.2 is refused by name.
 *
 * Like common/, nothing here prints or exits: failures set the reason
 * (err.h) and return -1 or NULL.
 */
#ifndef NV_CLCTX_H
#define NV_CLCTX_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stddef.h>

typedef enum { NVCL_CPU = 0, NVCL_OPENCL, NVCL_AUTO, NVCL_BOTH } nvcl_mode;

/* "cpu", "opencl", "auto", "both" -> mode; -1 with reason on anything else */
int nvcl_parse_mode(const char *s, nvcl_mode *out);
const char *nvcl_mode_name(nvcl_mode m);

typedef struct {
	cl_platform_id platform;
	cl_device_id device;
	cl_context ctx;
	cl_program prog;
	char dev_name[256];
	char plat_name[256];
	int is_gpu;
	size_t max_alloc;  /* CL_DEVICE_MAX_MEM_ALLOC_SIZE (or the limit) */
	size_t global_mem; /* CL_DEVICE_GLOBAL_MEM_SIZE (or the limit) */
	size_t local_mem;  /* CL_DEVICE_LOCAL_MEM_SIZE */
	size_t max_wg;     /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
	char *build_log;   /* set when the program failed to build */
	char *src_path;    /* the .cl file built */
} nvcl_ctx;

/* the outcome of resolving a mode against the machine */
typedef struct {
	int use_cpu;    /* run the CPU encoder */
	int use_cl;     /* run the OpenCL encoder (ctx opened) */
	char note[256]; /* a note for the user ("" when none) */
} nvcl_choice;

/*
 * Resolve the mode: plat/dev are indices (-1: from the environment, else the
 * default).  When use_cl comes back set, c is open (context and program
 * built) and must be closed with nvcl_close.  -1 with reason set when an
 * OpenCL device was required and cannot be had, or when the program does
 * not build (c->build_log then holds the log, and c must still be closed).
 */
int nvcl_resolve(nvcl_mode mode, long plat, long dev, nvcl_ctx *c, nvcl_choice *ch);

/* open a specific device (indices as above; no GPU preference) */
int nvcl_open(long plat, long dev, nvcl_ctx *c);
void nvcl_close(nvcl_ctx *c);

/* the directory the kernels are read from (NULL with reason when none) */
const char *nvcl_kernel_dir(void);

/* the name of an OpenCL status (CL_OUT_OF_RESOURCES, ...) */
const char *nvcl_strerror(cl_int st);
/* the name of a CLBlast status (CLBlastInvalidLeadDimA, ...) */
const char *nvcl_blast_strerror(int st);

/* a device buffer of bytes, with a reason naming what and the size on failure */
cl_mem nvcl_buffer(nvcl_ctx *c, size_t bytes, const char *what);

/* "1.5 GiB", "12.0 MiB": bytes for messages */
void nvcl_fmt_bytes(size_t bytes, char *out, size_t len);

#endif
