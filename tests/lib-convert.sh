# lib-convert.sh - what the conversion tests (t05NN-convert*) share: the
# stories260K model imported, calibration tokens from the TinyStories train
# sample, and `conv`, convert.mk with small calibration settings.
test_require_data stories260K.bin tok512.bin tinystories-train-sample.txt tinystories-sample.txt

CONVERT_MK=$NVG_TOP/pipelines/convert.mk

# FIT 1024 + SEL 512 tokens in windows of 128: small enough for CI, enough
# windows (8 + 4) for Grams of width ≤ 172 to be positive definite after damping;
# PLAIN: the steps that follow the source off (their defaults are on), for the
# tests of the plain pipeline (a later TRANSPORT=1 … on the command line wins);
# the end-to-end step, when asked for, on the same 1024 FIT tokens
PLAIN="TRANSPORT=0 TUNE=0 CALIBRATE=0 E2E=0"
conv() {
	make -s -f "$CONVERT_MK" FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 E2E_FIT_TOKENS=1024 \
		$PLAIN "$@"
}

# conv_refused OUT 'VAR=VALUE…:PATTERN'…: each conversion of s2.cmf at 2.5
# bpw with those variables is refused, its message matching PATTERN, and
# leaves no OUT behind
conv_refused() {
	local out=$1 bad
	shift
	for bad in "$@"; do
		test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT="$out" BPW=2.5 ${bad%%:*} 2>err &&
		test_grep "${bad#*:}" err &&
		test_path_is_missing "$out" || return 1
	done
}

# s.cmf (five layers), s2.cmf (its first two), cal.u32 (1536 calibration tokens)
convert_setup() {
	cmf-patch import --from llama2c --vocab "$NVG_DATA/tok512.bin" -o s.cmf \
		"$NVG_DATA/stories260K.bin" &&
	cmf-patch truncate --layers 2 -o s2.cmf s.cmf &&
	cmf-eval -m s.cmf --text "$NVG_DATA/tinystories-train-sample.txt" --tokenize train.u32 &&
	head -c $((4 * 1536)) train.u32 >cal.u32
}

# tool_wrappers DIR: every tool a conversion starts, as a symbolic link in
# DIR to DIR/.step, the script read from standard input, which finds the
# real tools' directory in DIR/.real (a conversion run with BIN=DIR)
tool_wrappers() {
	mkdir "$1" &&
	dirname "$(command -v nvg-encode)" >"$1/.real" &&
	cat >"$1/.step" &&
	chmod +x "$1/.step" &&
	for t in cmf-patch cmf-eval gram-capture hctx-build nvg-encode blr-pack plan-alloc blr-tune; do
		ln -s .step "$1/$t" || return 1
	done
}

# a layer's projections, short:long (the names convert.mk gives a layer's payloads)
SHORTS="q:self_attn.q_proj k:self_attn.k_proj v:self_attn.v_proj o:self_attn.o_proj
gate:mlp.gate_proj up:mlp.up_proj down:mlp.down_proj"

# layer_patches L DIR: --patch NAME=DIR/short.blr for layer L's seven projections
layer_patches() {
	for s in $SHORTS; do
		printf ' --patch model.layers.%s.%s.weight=%s/%s.blr' "$1" "${s#*:}" "$2" "${s%%:*}"
	done
}

# curve_error_is CURVES NAME BPW E: the curves' error of NAME at BPW is E, as
# numbers (the curves keep 9 significant digits, a tool's report 6 decimals:
# 0.71777 there is 0.717770 here)
curve_error_is() {
	awk -v n="$2" -v b="$3" -v e="$4" \
		'$1 == n && $4 == b + 0 && $5 == e + 0 { f = 1 } END { exit !f }' "$1" ||
		{ echo "no error $4 for $2 at $3 bpw in $1" >&2; return 1; }
}

# the report's tensor lines (comments dropped)
report_lines() {
	grep -v '^#' "$1"
}

# the value of key in the cmf.provenance "blr" block of a model (read by
# Python's json from the safetensors header: an independent reader)
prov_value() {
	"$NVG_PY" -c '
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    meta = json.loads(f.read(n))["__metadata__"]
v = json.loads(meta["cmf.provenance"])["blr"][sys.argv[2]]
print(json.dumps(v) if isinstance(v, (list, dict)) or v is None else v)' "$1" "$2"
}
