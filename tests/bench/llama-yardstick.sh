#!/bin/bash
# llama-yardstick.sh - builds llama.cpp's llama-perplexity and llama-quantize
# (CPU, native, the llama.cpp that PyPI's llama-cpp-python 0.3.36 vendors)
# outside the repository, for bench-forward.sh's yardstick (#12: the forward
# against llama.cpp's F32 forward on the same cores).  Not part of nvgkit:
# nothing of it is vendored or installed.
#
#   bash tests/bench/llama-yardstick.sh [DIR]
#
# DIR (default $NVG_BUILD/llama.cpp, the build tree's) receives the source
# and the build; the sdist is downloaded once into the user's cache.  Prints
# the directory of the two programs, which LLAMA_BIN= gives bench-forward.sh.
# Needs cmake, a C++ compiler and PyPI.
set -eu

TOP=${NVG_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
PY=${NVG_PY:-$TOP/build/venv/bin/python3}
OUT=${1:-${NVG_BUILD:-$TOP/build}/llama.cpp}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/nvgkit/dl
SDIST=$CACHE/llama_cpp_python-0.3.36.tar.gz

die() { echo "llama-yardstick: $*" >&2; exit 1; }
command -v cmake >/dev/null || die "cmake is needed (apt-get install cmake)"
command -v c++ >/dev/null || die "a C++ compiler is needed (apt-get install g++)"
if [ ! -s "$SDIST" ]; then
	mkdir -p "$CACHE"
	"$PY" -m pip download -q --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d "$CACHE" >&2 ||
		die "cannot download llama-cpp-python 0.3.36's sdist from PyPI"
fi
if [ ! -x "$OUT/build/bin/llama-perplexity" ] || [ ! -x "$OUT/build/bin/llama-quantize" ]; then
	rm -rf "$OUT/src"
	mkdir -p "$OUT/src"
	tar xzf "$SDIST" -C "$OUT/src" --strip-components=3 llama_cpp_python-0.3.36/vendor/llama.cpp ||
		die "the sdist holds no vendor/llama.cpp"
	cmake -S "$OUT/src" -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
		-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
		-DLLAMA_BUILD_SERVER=OFF >"$OUT/cmake.log" 2>&1 || die "cmake failed: $OUT/cmake.log"
	cmake --build "$OUT/build" -j "$(nproc)" --target llama-perplexity llama-quantize \
		>"$OUT/build.log" 2>&1 || die "the build failed: $OUT/build.log"
fi
echo "$OUT/build/bin"
