# lib-vocab.sh - real tokenizers for the tests: llama.cpp's vocab-only GGUFs
# (Llama 3, Qwen2, GPT-2, Llama 2, Phi-3) with its test inputs and the ids
# Hugging Face's tokenizers gave for them, from the llama.cpp that PyPI's
# llama-cpp-python 0.3.36 source package vendors.  Fetched once into the
# user's cache (outside the source tree), checked by its SHA-256, and the
# files unpacked beside it.  A fetch that fails is a failure, not a skip.

VOCAB_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/nvgkit
VOCAB_SDIST=$VOCAB_CACHE/dl/llama_cpp_python-0.3.36.tar.gz
VOCAB_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
VOCAB_DIR=$VOCAB_CACHE/llama-vocab
VOCAB_NAMES="llama-bpe qwen2 gpt-2 llama-spm phi-3"

# vocab_files: $VOCAB_DIR/ggml-vocab-NAME.gguf{,.inp,.out} for each name
vocab_files() {
	if [ ! -s "$VOCAB_SDIST" ]; then
		mkdir -p "$VOCAB_CACHE/dl" &&
		"$NVG_PY" -m pip download -q --no-deps --no-binary :all: llama-cpp-python==0.3.36 \
			-d "$VOCAB_CACHE/dl" >&2 ||
		return 1
	fi
	[ -s "$VOCAB_DIR/ggml-vocab-phi-3.gguf.out" ] && return 0
	mkdir -p "$VOCAB_DIR" &&
	"$NVG_PY" - "$VOCAB_SDIST" "$VOCAB_SHA256" "$VOCAB_DIR" $VOCAB_NAMES <<-\PY
	import hashlib, os, sys, tarfile
	sdist, sha, out, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
	h = hashlib.sha256()
	with open(sdist, "rb") as f:
	    for b in iter(lambda: f.read(1 << 20), b""):
	        h.update(b)
	if h.hexdigest() != sha:
	    sys.exit("%s: SHA-256 %s, not %s" % (sdist, h.hexdigest(), sha))
	top = "llama_cpp_python-0.3.36/vendor/llama.cpp/models/"
	with tarfile.open(sdist) as t:
	    # the .out files last: their presence says the unpacking is whole
	    for ext in (".gguf", ".gguf.inp", ".gguf.out"):
	        for n in names:
	            base = "ggml-vocab-%s%s" % (n, ext)
	            tmp = os.path.join(out, base + ".tmp.%d" % os.getpid())
	            with t.extractfile(top + base) as src, open(tmp, "wb") as dst:
	                dst.write(src.read())
	            os.rename(tmp, os.path.join(out, base))
	PY
}
