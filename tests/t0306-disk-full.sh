#!/bin/bash
# a full disk: every tool names the file it was writing (not its input;
# export writes config.json first, gram-capture the q Grams first),
# fails with status 1 and leaves nothing behind; cmf-patch export leaves
# the model and its config.json both or neither.  The disk is a small
# tmpfs, mounted here when the machine lets it (root), else skipped.
. "$(dirname "$0")/test-lib.sh"
test_require_data stories260K.bin tok512.bin

FULL=$PWD/full
mkdir full
mount -t tmpfs -o size=64k tmpfs full 2>/dev/null ||
	test_skip_all "cannot mount a tmpfs here (needs root): no full disk to write to"
# unmounted by the last test; on a failure, here
trap 'umount "$FULL" 2>/dev/null' EXIT

# full_fails OUT TOOL ARGS…: exit 1, one line naming OUT as what could not be
# written, for lack of space, and nothing left on the full disk but the filler
full_fails() {
	out=$1
	shift
	test_expect_code 1 "$@" 2>err &&
	test_one_line_error err &&
	test_grep "^$1: cannot write '$out': .*No space left on device$" err &&
	test "$(ls -A full)" = fill
}

test_expect_success 'setup: a model, a payload, tokens, a Gram; then the disk filled' '
	cmf-patch import --vocab "$NVG_DATA/tok512.bin" -o s.cmf "$NVG_DATA/stories260K.bin" &&
	cmf-eval -m s.cmf --text "$NVG_DATA/tinystories-sample.txt" --tokenize tok.u32 &&
	head -c 8000 tok.u32 >cal.u32 &&
	gram-capture -q -m s.cmf --tokens cal.u32 -l 0 --window 128 -o g &&
	nvg-encode --method dual-svid -m s.cmf -t model.layers.0.mlp.down_proj.weight --bpw 2 \
		-o down.blr >/dev/null &&
	{ dd if=/dev/zero of=full/fill bs=4096 2>/dev/null; test -s full/fill; }
'

test_expect_success 'cmf-patch: import, apply, truncate, extract, export name their output' '
	full_fails full/i.cmf cmf-patch import --vocab "$NVG_DATA/tok512.bin" -o full/i.cmf \
		"$NVG_DATA/stories260K.bin" &&
	full_fails full/a.cmf cmf-patch apply -o full/a.cmf s.cmf \
		model.layers.0.mlp.down_proj.weight=down.blr &&
	full_fails full/t.cmf cmf-patch truncate --layers 1 -o full/t.cmf s.cmf &&
	full_fails full/x.raw cmf-patch extract -o full/x.raw s.cmf model.layers.0.mlp.down_proj.weight &&
	full_fails full/config.json cmf-patch export -o full/e.safetensors s.cmf
'

test_expect_success 'gram-capture (state, Grams), cmf-eval, hctx-build, nvg-encode, blr-pack' '
	full_fails full/S1 gram-capture -q -m s.cmf --tokens cal.u32 -l 0 --window 128 --next-state full/S1 &&
	full_fails full/g.q.gram gram-capture -q -m s.cmf --tokens cal.u32 -l 0 --window 128 -o full/g &&
	full_fails full/t.u32 cmf-eval -m s.cmf --text "$NVG_DATA/tinystories-sample.txt" --tokenize full/t.u32 &&
	full_fails full/h.hctx hctx-build g.down.gram -o full/h.hctx &&
	full_fails full/d.blr nvg-encode --method dual-svid -m s.cmf -t model.layers.0.mlp.down_proj.weight \
		--bpw 2 -o full/d.blr &&
	full_fails full/d.raw blr-pack unpack -o full/d.raw down.blr
'

# the disk holds the model but not the model and config.json: the model was
# written whole before config.json failed, and stayed without it
test_expect_success 'cmf-patch export on a disk that holds only the model: neither file' '
	umount full &&
	cmf-patch export -o e.safetensors s.cmf &&
	pages=$(( ($(stat -c %s e.safetensors) + 4095) / 4096 )) &&
	mount -t tmpfs -o size=$((pages * 4096)) tmpfs full &&
	test_expect_code 1 cmf-patch export -o full/e.safetensors s.cmf 2>err &&
	test_grep "No space left on device" err &&
	test -z "$(ls -A full)" &&
	mkdir full/ok && umount full && mount -t tmpfs -o size=$((pages * 4096 + 8192)) tmpfs full &&
	cmf-patch export -o full/e.safetensors s.cmf &&
	cmp e.safetensors full/e.safetensors &&
	cmp config.json full/config.json
'

test_expect_success 'the full disk unmounted' '
	umount "$FULL"
'

test_done
