#!/bin/bash
# make install PREFIX=... DESTDIR=...: tools and man pages land where asked
. "$(dirname "$0")/test-lib.sh"

case "$NVG_BUILD" in
*build-san) san=1 ;;
*) san= ;;
esac

test_expect_success 'install into a staging DESTDIR' '
	(unset MAKEFLAGS MFLAGS MAKELEVEL &&
	 make -C "$NVG_TOP" --no-print-directory SAN=$san install \
		DESTDIR="$PWD/stage" PREFIX=/opt/nvg >make.out 2>&1) &&
	test -x stage/opt/nvg/bin/blr-pack &&
	test -f stage/opt/nvg/share/man/man1/blr-pack.1 &&
	test -f stage/opt/nvg/share/man/man5/blr.5 &&
	test -f stage/opt/nvg/share/man/man5/nvgg.5
'

test_expect_success 'every tool built is installed, and every man page' '
	for t in "$NVG_BIN"/*; do test -x "stage/opt/nvg/bin/${t##*/}" || exit 1; done &&
	for m in "$NVG_TOP"/man/man1/*.1 "$NVG_TOP"/man/man5/*.5; do
		s=${m%/*}; test -f "stage/opt/nvg/share/man/${s##*/}/${m##*/}" || exit 1
	done
'

test_expect_success 'the installed blr-pack runs' '
	stage/opt/nvg/bin/blr-pack --version >out &&
	test_grep "^blr-pack \(nvgkit\)" out
'

test_expect_success 'installed man pages render without warnings' '
	mandoc -Tlint -Wwarning stage/opt/nvg/share/man/man1/blr-pack.1 stage/opt/nvg/share/man/man5/*.5
'

test_done
