#!/bin/bash
# device.sh - nvg-encode's device path against its CPU path, on a lent GPU
# machine that has no internet.  Not run by make check or make bench.
#
#   here, with apt:   tests/bench/device.sh --fetch build/debs
#                     (build/ is ignored: name build/debs in the device tool's carry)
#   there:            tests/bench/device.sh build/debs
#
# There it unpacks the Debian packages (OpenCL ICD loader and headers,
# clBLAST, OpenBLAS/LAPACKE, cJSON, zlib) into a private prefix
# (build/devprefix; nothing is installed), builds nvgkit against it, points
# the ICD loader at the GPU's OpenCL driver when the system has no ICD file
# for it, measures the card's clBLAST sgemm rate, checks parity on the seed's
# synthetic layer, then times SmolLM2-135M-shaped tensors (q 576x576, k
# 192x576, gate 1536x576, down 576x1536) at BPW on the CPU
# path and on the device: medians, the device/CPU speed-up, the SEL errors
# and their relative difference, the device's GFLOP/s against the sgemm
# rate, and the q/k/v of one input in flight (--jobs 3) against one at a time.
#
# Then the shapes of one Llama-2-7B layer (q/k/v/o 4096x4096, gate/up
# 11008x4096, down 4096x11008) at BPW7B on the device, one run each with the
# stage profile, and the device's GFLOP/s against the sgemm rate; the CPU
# path only on CPU7B_SHAPES (none by default: a 4096x4096 at 1.0 bpw is some
# 50 TFLOP on the CPU path, minutes even on 16 cores with the right kernels,
# so it is a call of its own: SHAPES= SHAPES7B=4096x4096
# CPU7B_SHAPES=4096x4096, with OPENBLAS_CORETYPE set for that machine's CPU).
#
# Knobs (environment): BPW (0.55), SHAPES ("576x576 192x576 1536x576
# 576x1536"; 2048x2048 and up are a SHAPES away, minutes each on the CPU
# path), SHAPES7B (the three above; empty: none), CPU7B_SHAPES (none),
# BPW7B (1.0), CPU_RUNS (1), DEV_RUNS (3), TOKENS_MIN (2048), SGEMM_N (4096),
# NVG_CL_PLATFORM / NVG_CL_DEVICE, NVG_PY (a python3 with numpy: python3 by
# default; here, build/venv/bin/python3).  With SKIP_DEBS=1 the system's packages
# are used (a machine that has them).  The device must be a GPU: a try-out on
# PoCL sets ALLOW_CPU_DEVICE=1.  The CPU path's times depend on the core
# OpenBLAS detects, printed first: the lent H200 machine's Xeon is detected
# as the generic "Prescott" (OPENBLAS_CORETYPE set in the environment
# overrides it for both paths; the script never sets it).
#
# There, the build, the yardstick, the parity and three of the four shapes
# took under 265 s, on a machine already started (before the g step and the
# polar factors moved onto the device).  The 7B shapes have not run there yet:
# their Grams (11008² in f64, 1 GB) and contexts are made on the host (the
# context's eigenproblem of 11008² in f64 is a minute or more); with
# SHAPES7B= the run fits in 400 s.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/../.." && pwd)
PKGS="ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers
libclblast1 libclblast-dev libopenblas0 libopenblas0-pthread libopenblas-dev
libopenblas-pthread-dev libblas3 liblapack3 liblapacke liblapacke-dev libtmglib3
libgfortran5 libquadmath0 libcjson1 libcjson-dev zlib1g zlib1g-dev"

if [ "${1:-}" = "--fetch" ]; then
	dir=${2:?"usage: device.sh --fetch DIR"}
	mkdir -p "$dir"
	(cd "$dir" && apt-get download $PKGS)
	du -sh "$dir"
	exit 0
fi
DEBS=${1:-$TOP/build/debs}
BPW=${BPW:-0.55}
SHAPES=${SHAPES:-"576x576 192x576 1536x576 576x1536"}
CPU_RUNS=${CPU_RUNS:-1}
DEV_RUNS=${DEV_RUNS:-3}
TOKENS_MIN=${TOKENS_MIN:-2048}
SHAPES7B=${SHAPES7B-"4096x4096 11008x4096 4096x11008"}
CPU7B_SHAPES=${CPU7B_SHAPES-}
BPW7B=${BPW7B:-1.0}
NCPU=$(nproc)
P=$TOP/build/devprefix
W=$TOP/build/devbench
LIBD=$P/usr/lib/x86_64-linux-gnu

say() { printf '%s\n' "$*"; }
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# ---------------------------------------------------------------- prefix and build
if [ "${SKIP_DEBS:-0}" != 1 ]; then
	ls "$DEBS"/*.deb >/dev/null || { say "device.sh: no .deb files in $DEBS (run --fetch here first)"; exit 1; }
	rm -rf "$P" && mkdir -p "$P"
	for d in "$DEBS"/*.deb; do dpkg-deb -x "$d" "$P"; done
	# the alternatives links that dpkg's scripts would have made
	for l in libblas.so.3 liblapack.so.3 libopenblas.so.0 libopenblas.so; do
		[ -e "$LIBD/openblas-pthread/$l" ] && ln -sf "openblas-pthread/$l" "$LIBD/$l"
	done
	export LD_LIBRARY_PATH="$LIBD:$LIBD/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	PKG_CFLAGS="-I$P/usr/include -I$P/usr/include/x86_64-linux-gnu/openblas-pthread -I$P/usr/include/cjson"
	PKG_LIBS="-L$LIBD -L$LIBD/openblas-pthread -Wl,-rpath-link,$LIBD:$LIBD/openblas-pthread -lopenblas -llapacke -lcjson -lz -lOpenCL -lclblast"
	MAKEVARS=(PKG_CFLAGS="$PKG_CFLAGS" PKG_LIBS="$PKG_LIBS")
else
	MAKEVARS=()
fi
make -C "$TOP" -j"$NCPU" "${MAKEVARS[@]}" bin/nvg-encode bin/hctx-build build/libnvgkit.a >/dev/null
LIBS_ALL=${PKG_LIBS:-$(pkg-config --libs openblas lapacke libcjson zlib OpenCL clblast)}
CFL_ALL=${PKG_CFLAGS:-$(pkg-config --cflags openblas lapacke libcjson zlib OpenCL clblast)}
cc -O2 -std=c11 -D_GNU_SOURCE -I"$TOP/common" -I"$TOP/cl" $CFL_ALL -o "$TOP/build/sgemm-cl" \
	"$TOP/tests/bench/sgemm-cl.c" "$TOP/build/libnvgkit.a" $LIBS_ALL -lm -pthread
BIN=$TOP/bin
if [ "${SKIP_DEBS:-0}" != 1 ]; then
	# every library of the tool must resolve, and the brought ones from the prefix
	missing=$(ldd "$BIN/nvg-encode" | grep "not found" || true)
	[ -z "$missing" ] || { say "device.sh: unresolved libraries: $missing"; exit 1; }
	ldd "$BIN/nvg-encode" | grep -E "clblast|OpenCL|openblas|lapack|tmglib|gfortran" | sed 's/^[[:space:]]*/lib: /'
fi

# ---------------------------------------------------------------- the GPU's OpenCL driver
# The lent H200 machine mounts the driver's libnvidia-opencl.so.1 but its
# /etc/OpenCL/vendors names only PoCL: the ICD loader then offers the CPU alone.
# When no vendor file names NVIDIA's library and the library is there, a private
# vendors folder holds the system's files and one for it.
if [ -z "${OCL_ICD_VENDORS:-}" ] && ! grep -qs libnvidia-opencl /etc/OpenCL/vendors/*.icd; then
	lib=$( (ldconfig -p 2>/dev/null | sed -n 's/.*libnvidia-opencl.so.1 .*=> //p'; \
		find /usr/local/nvidia /usr/lib /usr/lib64 -name 'libnvidia-opencl.so.1' 2>/dev/null) | head -n 1 || true)
	if [ -n "$lib" ]; then
		rm -rf "$P/icd" && mkdir -p "$P/icd"
		cp /etc/OpenCL/vendors/*.icd "$P/icd/" 2>/dev/null || true
		echo "$lib" >"$P/icd/nvidia.icd"
		export OCL_ICD_VENDORS=$P/icd
		say "ICD: $lib (through $P/icd)"
	fi
fi

# ---------------------------------------------------------------- yardsticks
export POCL_CACHE_DIR=$TOP/build/pocl-cache
say "machine: $NCPU CPUs, $(uname -m); $(OPENBLAS_VERBOSE=2 OPENBLAS_NUM_THREADS=1 "$BIN/hctx-build" -h 2>&1 | sed -n 's/^Core: *//p' | head -n 1 | sed 's/^/OpenBLAS core /')"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/gpu: /'
SGEMM=$("$TOP/build/sgemm-cl" "${SGEMM_N:-4096}" 5)
say "$SGEMM"
case $SGEMM in
*"(GPU)"*) ;;
*)	[ "${ALLOW_CPU_DEVICE:-0}" = 1 ] || {
		say "device.sh: the OpenCL device is not a GPU (no GPU driver found by the ICD loader;"
		say "  set OCL_ICD_VENDORS, or ALLOW_CPU_DEVICE=1 for a try-out on PoCL)"
		exit 1
	} ;;
esac
RATE=$(sed -n 's/.* \([0-9.]*\) GFLOP\/s$/\1/p' <<<"$SGEMM")

# ---------------------------------------------------------------- data
PY=${NVG_PY:-python3}
rm -rf "$W" && mkdir -p "$W"
synth() { # m n dir
	local t=$(( $2 * 2 > TOKENS_MIN ? $2 * 2 : TOKENS_MIN ))
	mkdir -p "$3"
	"$PY" "$TOP/tests/ref/synth-layer.py" layer "$1" "$2" 7 "$3" "$t"
	"$BIN/hctx-build" "$3/fit.gram" -o "$3/fit.hctx"
}
sel_of() { sed -n 's/.* sel \([0-9.]*\)$/\1/p' "$1"; }
pick_of() { sed -n 's/^pick \(P[12] r[0-9]*\) .*/\1/p' "$1"; }

# ---------------------------------------------------------------- parity first
synth 96 64 "$W/p"
C1=(-w "$W/p/w.raw" --shape 96x64 --hctx "$W/p/fit.hctx" --fit "$W/p/fit.gram" --sel "$W/p/sel.gram" --bpw 3)
"$BIN/nvg-encode" "${C1[@]}" --device both -o "$W/p/b.blr" >"$W/p/both.line"
say "parity (seed-style 96x64 at 3 bpw): $(sed -n 's/^\[cmp\] [^ ]* //p' "$W/p/both.line")"

# ---------------------------------------------------------------- timings
# the device's stage profile waits for the device after every stage: the
# timed device runs go without it, and one more run gives the stages and flops
enc() { # dir shape device out [--profile] -> seconds; report line in out.line, stderr in out.err
	local s e
	s=$(now)
	OPENBLAS_NUM_THREADS=$NCPU "$BIN/nvg-encode" -w "$1/w.raw" --shape "$2" --hctx "$1/fit.hctx" \
		--fit "$1/fit.gram" --sel "$1/sel.gram" --bpw "$BPW" --threads "$NCPU" \
		--device "$3" ${5:-} -o "$4.blr" >"$4.line" 2>"$4.err"
	e=$(now)
	awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f\n", e - s }'
}
printf '\n%-10s %-8s %9s %9s %7s %8s %8s %8s %9s %6s\n' shape pick "cpu s" "gpu s" "x" "sel cpu" "sel gpu" "rel %" "gpu GF/s" "%peak"
for shape in $SHAPES; do
	m=${shape%x*} n=${shape#*x} d="$W/$shape"
	synth "$m" "$n" "$d" >/dev/null
	tc=$(for i in $(seq "$CPU_RUNS"); do enc "$d" "$shape" cpu "$d/cpu" --profile; done | median)
	tg=$(for i in $(seq "$DEV_RUNS"); do enc "$d" "$shape" opencl "$d/gpu"; done | median)
	enc "$d" "$shape" opencl "$d/gpu" --profile >/dev/null
	fl=$(sed -n 's/^device total: [0-9.]*s \([0-9.e+]*\) flop.*/\1/p' "$d/gpu.err")
	sc=$(sel_of "$d/cpu.line") sg=$(sel_of "$d/gpu.line")
	awk -v sh="$shape" -v pk="$(pick_of "$d/gpu.line")" -v tc="$tc" -v tg="$tg" -v sc="$sc" \
		-v sg="$sg" -v fl="$fl" -v rate="$RATE" 'BEGIN {
		gf = fl / tg * 1e-9
		printf "%-10s %-8s %9.2f %9.2f %7.1f %8.4f %8.4f %+8.3f %9.1f %6.1f\n",
			sh, pk, tc, tg, tc / tg, sc, sg, (sg - sc) / sc * 100, gf, gf / rate * 100 }'
	[ "$(pick_of "$d/cpu.line")" = "$(pick_of "$d/gpu.line")" ] || say "  (cpu picked $(pick_of "$d/cpu.line"))"
	sed -n 's/^device profile: /  gpu stages: /p' "$d/gpu.err"
	sed -n 's/^profile: /  cpu stages: /p' "$d/cpu.err"
done

# ---------------------------------------------------------------- one Llama-2-7B layer's shapes
# on the device only, one run each with its stage profile (the stages are long
# enough that waiting after each costs little); the CPU path on CPU7B_SHAPES
# (4096x4096 by default: the 11008-wide shapes take it too long for the
# device machine's time), for the speed-up
if [ -n "$SHAPES7B" ]; then
	printf '\n7B-shaped at %s bpw:\n%-11s %-8s %9s %9s %7s %8s %8s %9s %6s\n' "$BPW7B" shape pick \
		"cpu s" "gpu s" "x" "sel cpu" "sel gpu" "gpu GF/s" "%peak"
	for shape in $SHAPES7B; do
		m=${shape%x*} n=${shape#*x} d="$W/7b-$shape"
		synth "$m" "$n" "$d" >/dev/null
		tg=$(BPW=$BPW7B enc "$d" "$shape" opencl "$d/gpu" --profile)
		tc=- sc=-
		case " $CPU7B_SHAPES " in
		*" $shape "*) tc=$(BPW=$BPW7B enc "$d" "$shape" cpu "$d/cpu" --profile)
			sc=$(sel_of "$d/cpu.line") ;;
		esac
		fl=$(sed -n 's/^device total: [0-9.]*s \([0-9.e+]*\) flop.*/\1/p' "$d/gpu.err")
		awk -v sh="$shape" -v pk="$(pick_of "$d/gpu.line")" -v tc="$tc" -v tg="$tg" -v sc="$sc" \
			-v sg="$(sel_of "$d/gpu.line")" -v fl="$fl" -v rate="$RATE" 'BEGIN {
			gf = fl / tg * 1e-9
			x = tc == "-" ? "-" : sprintf("%.1f", tc / tg)
			printf "%-11s %-8s %9s %9.2f %7s %8s %8.4f %9.1f %6.1f\n",
				sh, pk, tc, tg, x, sc, sg, gf, gf / rate * 100 }'
		sed -n 's/^device profile: /  gpu stages: /p' "$d/gpu.err"
		[ "$tc" = - ] || sed -n 's/^profile: /  cpu stages: /p' "$d/cpu.err"
		rm -rf "$d"
	done
fi

# ---------------------------------------------------------------- one input, three tensors in flight
q="$W/576x576"
if [ -d "$q" ]; then
	"$PY" - "$q" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
w = np.fromfile(f"{d}/w.raw", dtype="<f4").reshape(576, 576)
w[:192].tofile(f"{d}/k.raw"); w[192:384].tofile(f"{d}/v.raw")
EOF
	C=(--hctx "$q/fit.hctx" --fit "$q/fit.gram" --sel "$q/sel.gram" --bpw "$BPW" --device opencl)
	s=$(now)
	for t in w:576x576 k:192x576 v:192x576; do
		"$BIN/nvg-encode" "${C[@]}" -w "$q/${t%%:*}.raw" --shape "${t#*:}" -o "$q/one-${t%%:*}.blr" >/dev/null
	done
	e=$(now)
	"$BIN/nvg-encode" "${C[@]}" --jobs 3 -w "$q/w.raw" --shape 576x576 -o "$q/fl-w.blr" \
		-w "$q/k.raw" --shape 192x576 -o "$q/fl-k.blr" -w "$q/v.raw" --shape 192x576 -o "$q/fl-v.blr" >/dev/null
	f=$(now)
	same=yes
	for t in w k v; do cmp -s "$q/one-$t.blr" "$q/fl-$t.blr" || same=no; done
	awk -v a="$(awk -v s="$s" -v e="$e" 'BEGIN{print e-s}')" -v b="$(awk -v s="$e" -v e="$f" 'BEGIN{print e-s}')" \
		-v same="$same" 'BEGIN { printf "\nq/k/v of one input: one at a time %.2f s, --jobs 3 %.2f s (%.2fx), same bytes: %s\n", a, b, a / b, same }'
fi
