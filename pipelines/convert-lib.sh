#!/bin/bash
# convert-lib.sh - the steps of pipelines/convert.mk that are not one tool call:
# the tensor list, the generated layer rules, running a step into its log,
# an encoder step (exit 3 = refused), the patch arguments, the report and
# provenance, and the sweep's curves.  Every file is written to a temporary
# name and renamed, so an interrupted step leaves nothing half-written; every
# temporary and scratch file is named NAME.tmp (a tool's own NAME.tmp.PID),
# the names convert.mk removes at its start when a killed run left them.
#
#   convert-lib.sh locked OUT -- CMD…
#                     (CMD run holding OUT/.lock; refused while another holds it)
#   convert-lib.sh body-linears SOURCE.LIST
#   convert-lib.sh layers-mk TENSORS.TXT CAPTURE(1|0) INFO.TXT
#   convert-lib.sh step LOG -- CMD…
#   convert-lib.sh encode LOG REP BLR|- MODEL NAME -- CMD…
#                     (CMD gets -m MODEL -t NAME -o BLR)
#   convert-lib.sh patch-args OUT LAYER [SUB]
#   convert-lib.sh patches OUT [SUB]
#                     (SUB: the payloads' subdirectory of L<n>/, "tuned/" after blr-tune)
#   convert-lib.sh report OUT METHOD BPW KV PATHS PLAN CALIB FIT SEL WINDOW RHO DEVICE
#   convert-lib.sh curves OUT 'B1 B2 …' [sel|block|kl]
#   convert-lib.sh best OUT MODEL tokens|text CALIB FIT SEL WINDOW
set -eo pipefail

T=${BIN:+${BIN%/}/}

die() {
	echo "convert: $*" >&2
	exit 1
}

# locked OUT -- CMD…: CMD (the conversion's make) run holding an exclusive
# flock on OUT/.lock, which names its holder; CMD and every tool it starts
# inherit the descriptor, so the kernel releases the lock when the last of
# them ends, however it ends.  Another holder is an error, not a wait.
locked() {
	local out=$1 fd holder
	shift 2
	mkdir -p "$out" || exit 1
	exec {fd}>>"$out/.lock" || exit 1
	if ! flock -n "$fd"; then
		holder=$(cat "$out/.lock")
		die "cannot lock OUT '$out': another conversion is running there (${holder:-its pid not yet written}); wait for it to end or choose another OUT"
	fi
	# the pid is this shell's, which exec makes the conversion's make
	echo "pid $$ on $(hostname)" >"$out/.lock"
	exec "$@"
}

# the lead (input Gram) of a body linear's short name
lead_of() {
	case $1 in
	q | k | v) echo q ;;
	gate | up) echo gate ;;
	qkv | z) echo qkv ;;
	o | out | down) echo "$1" ;;
	*) echo down ;;
	esac
}

# cmf-patch list (name dtype shape bytes codec tag, tab-separated) →
# "name layer m n short lead" for every body linear the encoder can take
body_linears() {
	awk -F '\t' '
	$6 ~ /^L[0-9]+ / {
		split($6, tag, " "); layer = substr(tag[1], 2); short = tag[2]
		if (split($3, d, "x") != 2) next
		if (d[1] + 0 < 8 || d[2] + 0 < 8) {
			printf "convert: %s (%s) is too small for BLR (min(m,n) < 8): kept\n", $1, $3 > "/dev/stderr"
			next
		}
		lead = short
		if (short == "q" || short == "k" || short == "v") lead = "q"
		else if (short == "gate" || short == "up") lead = "gate"
		else if (short == "qkv" || short == "z") lead = "qkv"
		else if (short != "o" && short != "out") lead = "down"
		print $1, layer, d[1], d[2], short, lead
	}' "$1"
}

# tensors.txt (name layer bpw|keep m n short lead) → the make variables of
# every layer: ENC_L, KEEP_L, NAME_L_s, BPW_L_s, LEAD_L_s, NEXT_L, LAYERS,
# NLAYERS, NEED_STATE (when Grams are captured, $2 = 1: the states S_L some
# capture needs, directly or through the chain of advances).  ENC_L lists
# the layer's tensors longest encode first (bpw·m·n·(m+n) + n³, the shape of
# the encoder's work), so that make -j starts them in that order and the
# layer does not end with its longest tensor running alone.
layers_mk() {
	local gqa
	gqa=$(awk '$1 == "heads:" { h = $2 } $1 == "kv_heads:" { k = $2 } END { print (k != "" && h != "" && k + 0 < h + 0) ? 1 : 0 }' "$3")
	awk -v capture="$2" -v gqa="$gqa" '
	{
		l = $2 + 0; if (l + 1 > nl) nl = l + 1; has[l] = 1
		if ($3 == "keep") { keep[l] = keep[l] " " $6; next }
		k = ++ne[l]; es[l, k] = $6
		ec[l, k] = $3 * $4 * $5 * ($4 + $5) + $5 * $5 * $5
		# insertion: the costliest first, ties in the model order
		for (; k > 1 && ec[l, k - 1] < ec[l, k]; k--) {
			t = es[l, k]; es[l, k] = es[l, k - 1]; es[l, k - 1] = t
			t = ec[l, k]; ec[l, k] = ec[l, k - 1]; ec[l, k - 1] = t
		}
		printf "NAME_%d_%s := %s\nBPW_%d_%s := %s\nLEAD_%d_%s := %s\nSHAPE_%d_%s := %sx%s\n", l, $6, $1, l, $6, $3, l, $6, $7, l, $6, $4, $5
		if (gqa && ($6 == "k" || $6 == "v")) printf "KV_%d_%s := --kv\n", l, $6
	}
	END {
		for (l = 0; l < nl; l++)
			for (k = 1; k <= ne[l]; k++)
				enc[l] = enc[l] " " es[l, k]
		last = -1
		for (l = 0; l < nl; l++) if (enc[l] != "") last = l
		printf "NLAYERS := %d\nLAYERS :=", nl
		for (l = 0; l < nl; l++) if (has[l]) printf " %d", l
		printf "\nNEED_STATE :="
		if (capture == 1) for (l = 1; l <= last; l++) printf " %d", l
		printf "\n"
		for (l = 0; l < nl; l++) if (has[l])
			printf "ENC_%d :=%s\nKEEP_%d :=%s\nNEXT_%d := %d\n", l, enc[l], l, keep[l], l, l + 1
	}' "$1"
}

# step LOG -- CMD…: stderr to LOG; on failure its tail on stderr
step() {
	local log=$1
	shift 2
	if ! "$@" 2>"$log"; then
		tail -n 5 "$log" >&2
		exit 1
	fi
}

# encode LOG REP BLR MODEL NAME -- CMD…: CMD (the encoder) reads the tensor
# NAME from MODEL itself (-m MODEL -t NAME: no raw copy written and read
# again), the encoder's report line into REP; exit 3 (the packer refused)
# writes "refused" and no payload; BLR "-" discards the payload
encode() {
	local log=$1 rep=$2 blr=$3 model=$4 name=$5 rc=0 out
	shift 6
	out=$blr
	[ "$blr" = - ] && out=$rep.blr.tmp
	"$@" -m "$model" -t "$name" -o "$out" >"$rep.tmp" 2>"$log" || rc=$?
	if [ $rc = 3 ]; then
		rm -f "$out"
		echo refused >"$rep.tmp"
		echo "convert: $name: blr refused, kept in its source dtype" >&2
	elif [ $rc != 0 ]; then
		rm -f "$rep.tmp"
		tail -n 5 "$log" >&2
		exit 1
	fi
	[ "$blr" = - ] && rm -f "$out"
	mv "$rep.tmp" "$rep"
}

# follow OUT L SHORT N [ONE]: the --paths of SHORT at layer L under
# PATHS_FOLLOW=N: 2 where the nearest layer before L whose SHORT had both
# candidates (its report names P2 and P1) lies less than N layers back and
# chose two paths, and every layer between chose two paths after it without
# one; with ONE 1 (SHORT of PATHS_FOLLOW_ONE) the same for one path, 1; auto
# where a report between is missing, refused or chose the other count (or one
# path without ONE), or none is near
follow() {
	local out=$1 l=$2 s=$3 n=$4 one=${5:-0} k f rep p want=
	for ((k = l - 1; k >= 0 && k > l - n; k--)); do
		f=$out/L$k/$s.rep
		[ -f "$f" ] || break
		# read, not $(cat): no process for each of up to N − 1 reports
		rep=
		IFS= read -r rep <"$f" || :
		case $rep in
		"pick P1 "* | "pick P2 "*) p=${rep:6:1} ;;
		*) break ;;
		esac
		[ "$p" = 1 ] && [ "$one" != 1 ] && break
		[ -n "$want" ] && [ "$p" != "$want" ] && break
		want=$p
		case $rep in
		*" P2 "*" P1 "*) echo "$p"; return ;;
		esac
	done
	echo auto
}

# the encoded tensors: "name layer bpw m n short lead" of those with a
# payload (of layer $2 only when given)
encoded() {
	local out=$1 name layer bpw m n short lead rep
	while read -r name layer bpw m n short lead; do
		[ "$bpw" = keep ] && continue
		[ -n "${2:-}" ] && [ "$layer" != "$2" ] && continue
		[ -f "$out/L$layer/$short.rep" ] || die "no encoder report for $name ($out/L$layer/$short.rep)"
		slurp rep "$out/L$layer/$short.rep"
		[ "$rep" = refused ] && continue
		echo "$name $layer $bpw $m $n $short $lead"
	done <"$out/tensors.txt"
}

# patch-args OUT L: --patch NAME=PAYLOAD for layer L's encoded tensors
patch_args() {
	local name layer bpw m n short lead
	encoded "$1" "$2" | while read -r name layer bpw m n short lead; do
		printf ' --patch %s=%s' "$name" "$1/L$layer/${3:-}$short.blr"
	done
	echo
}

# patches OUT: NAME=PAYLOAD for every encoded tensor
patches() {
	local name layer bpw m n short lead
	encoded "$1" | while read -r name layer bpw m n short lead; do
		printf ' %s=%s' "$name" "$1/L$layer/${2:-}$short.blr"
	done
	echo
}

json_str() {
	local s=${1//\\/\\\\}
	s=${s//\"/\\\"}
	printf '"%s"' "$s"
}

# FILE's whole text into the variable NAME, as $(cat FILE) gives it (its
# trailing newlines dropped) but without a process; a file that cannot be
# read fails as cat would
slurp() {
	local -n into=$1
	{ IFS= read -r -d '' into || :; } <"$2"
	while [[ $into == *$'\n' ]]; do into=${into%$'\n'}; done
}

# the rank, path count and bits of each payload named (blr-pack info's
# first value of each key), all of them read by one blr-pack: into report's
# info_rank, info_paths and info_bits, by path
payload_infos() {
	local text k v cur=
	[ $# -gt 0 ] || return 0
	[ $# = 1 ] && cur=$1 # one file: no "file" line
	text=$("${T}blr-pack" info "$@")
	while read -r k v; do
		case $k in
		file) cur=$v ;;
		rank) info_rank[$cur]=${info_rank[$cur]:-$v} ;;
		paths) info_paths[$cur]=${info_paths[$cur]:-$v} ;;
		bits) info_bits[$cur]=${info_bits[$cur]:-$v} ;;
		esac
	done <<<"$text"
}

# one tensor's report line (and its bits) from its payload's fields
# (payload_infos), the rank rule's clip (one blr-pack rank for each shape,
# budget, path count and kv factor: report's clip_of) and its encoder
# report LINE, read by bash: a conversion's 210 tensors take a few
# processes, not eight each
report_tensor() {
	local out=$1 name=$2 layer=$3 bpw=$4 m=$5 n=$6 short=$7 mult=$8 line=$9
	local blr=$1/L$3/$7.blr rank paths info key sel=- stored=0 i
	local -a f
	rank=${info_rank[$blr]} paths=${info_paths[$blr]}
	key="${m}x$n $bpw $paths $mult"
	if [ -z "${clip_of[$key]+set}" ]; then
		info=$("${T}blr-pack" rank --shape "${m}x$n" --bpw "$bpw" --paths "$paths" --kv-factor "$mult")
		clip_of[$key]=
		read -ra f <<<"$info"
		for ((i = 0; i + 1 < ${#f[@]}; i++)); do
			if [ "${f[i]}" = clip ]; then clip_of[$key]=${f[i + 1]}; fi
		done
	fi
	# nvg: "… stored fit F sel S"; dual-svid: "P2 rR frob F[ sel S]"
	while read -ra f; do
		for ((i = 0; i + 1 < ${#f[@]}; i++)); do
			case ${f[i]} in
			stored | frob) stored=1 ;;
			sel) if [ $stored = 1 ]; then sel=${f[i + 1]}; fi ;;
			esac
		done
	done <<<"$line"
	echo "$name $layer ${m}x$n $bpw ${info_bits[$blr]} $rank $paths ${clip_of[$key]:--} $sel | $line"
}

# report OUT METHOD BPW KV PATHS PLAN CALIB FIT SEL WINDOW RHO DEVICE SWEEPS GSOLVE TRY ITQTOL
#        ALSTOL ITQPREC HBPREC ALSPREC FOLLOW FOLLOW_ON FOLLOW_ONE GEVERY
report() {
	local out=$1 method=$2 bpw=$3 kv=$4 pathsopt=$5 plan=$6 calib=$7 fit=$8 sel=$9
	local window=${10} rho=${11} device=${12} sweeps=${13} gqa=0 name layer b m n short lead mult st
	local heads kvh list
	local -A clip_of=() info_rank=() info_paths=() info_bits=()
	local -a blrs=()
	heads=$(awk '$1 == "heads:" { print $2 }' "$out/info.txt")
	kvh=$(awk '$1 == "kv_heads:" { print $2 }' "$out/info.txt")
	[ -n "$heads" ] && [ -n "$kvh" ] && [ "$kvh" -lt "$heads" ] && gqa=1
	list=$(encoded "$out")
	while read -r name layer b m n short lead; do
		[ -n "$name" ] && blrs+=("$out/L$layer/$short.blr")
	done <<<"$list"
	payload_infos "${blrs[@]}"
	: >"$out/report.body.tmp"
	while read -r name layer b m n short lead; do
		mult=1
		[ $gqa = 1 ] && { [ "$short" = k ] || [ "$short" = v ]; } && mult=$kv
		if [ "$b" = keep ]; then
			echo "$name $layer ${m}x$n keep - - - - - | kept by the plan" >>"$out/report.body.tmp"
			continue
		fi
		slurp st "$out/L$layer/$short.rep"
		if [ "$st" = refused ]; then
			echo "$name $layer ${m}x$n $b - - - refused - | blr refused, kept in its source dtype" >>"$out/report.body.tmp"
			continue
		fi
		report_tensor "$out" "$name" "$layer" "$b" "$m" "$n" "$short" "$mult" "$st" >>"$out/report.body.tmp"
	done <"$out/tensors.txt"
	summarise "$out" "$method" "$bpw" "$kv" "$pathsopt" "$plan" "$calib" "$fit" "$sel" "$window" "$rho" \
		"$device" "$sweeps" "${14:-direct}" "${15:-3}" "${16:-0}" "${17:-0}" "${18:-f64}" "${19:-f64}" \
		"${20:-f64}" "${21:-0}" "${22:-}" "${23:-}" "${24:-1}"
}

# the totals, the clipped list, the report file and the provenance JSON
summarise() {
	local out=$1 rep=$1/model.cmf.blr.txt.tmp prov=$1/provenance.json.tmp calibjson=null planjson=null
	{
		echo "# nvgkit BLR conversion: method $2, target $3 bpw, paths $5$([ "${21}" -gt 1 ] && echo " (${22// /, }: two paths where the layers before chose them$([ -n "${23}" ] && echo ", ${23// /, }: one path too where they chose one"), both candidates every ${21} layers)")$([ "$2" = nvg ] &&
			echo ", refinement sweeps ${13}, ALS sweeps a try ${15}, ITQ stop ${16}$([ "${18}" = f32 ] && echo ", ITQ products in f32")$([ "${19}" = f64 ] && echo ", Gram products in f64"), ALS stop ${17}$([ "${20}" = f32 ] && echo ", ALS products in f32")$([ "${14}" = pcg ] && echo ", g steps by PCG")$([ "${24}" != 1 ] && echo ", a g step every ${24} ALS sweeps")"), kv factor $4"
		echo "# tensor layer shape requested_bpw delivered_bpw rank paths clip sel_error | encoder report"
		awk '$5 != "-" { split($3, d, "x"); w = d[1] * d[2]; printf "%s %s %s %s %.6f %s %s %s %s", $1, $2, $3, $4, $5 / w, $6, $7, $8, $9
			for (i = 10; i <= NF; i++) printf " %s", $i; printf "\n"; next } { print }' "$out/report.body.tmp"
	} >"$rep"
	# the totals over the payloads, and every layer projection of the source
	# (bits of the payload when encoded, else 8 per byte of the source tensor)
	awk -v rep="$rep" -v tot="$out/report.totals.tmp" '
	FNR == NR {
		if ($5 == "-") { if ($4 == "keep") kept++; else if ($8 == "refused") refused++; next }
		split($3, d, "x"); w = d[1] * d[2]
		blr[$1] = $5; bw += w; bb += $5; rq += $4 * w
		if ($8 != "-") { nclip++; if (nclip <= 8) clipped = clipped sprintf("#   %s (%s bpw → %.4f bpw, %s)\n", $1, $4, $5 / w, $8) }
		next
	}
	{
		split($0, f, "\t")
		if (f[1] !~ /^model\.layers\./ || f[1] !~ /\.weight$/) next
		if (split(f[3], s, "x") != 2) next
		stem = f[1]; sub(/\.weight$/, "", stem); nparts = split(stem, parts, ".")
		if (parts[nparts] !~ /proj/) next
		w = s[1] * s[2]; aw += w; ab += (f[1] in blr) ? blr[f[1]] : 8 * f[4]
	}
	END {
		if (nclip > 0) {
			printf "# clipped: %d tensor(s) could not spend the requested budget (rank floor / shape cap):\n%s", nclip, clipped >> rep
			if (nclip > 8) printf "#   ... and %d more\n", nclip - 8 >> rep
		}
		printf "# total blr body %.6f bpw over %d weights (requested %.6f bpw); all layer projections %.6f bpw over %d weights; %d kept, %d refused\n",
			bw ? bb / bw : 0, bw, bw ? rq / bw : 0, aw ? ab / aw : 0, aw, kept, refused >> rep
		printf "%.17g %d %.17g %.17g %d %d %d %d\n", bw ? bb / bw : 0, bw, bw ? rq / bw : 0, aw ? ab / aw : 0, aw, nclip, kept, refused > tot
	}' "$out/report.body.tmp" "$out/source.list"
	read -r body_bpw body_w req_bpw all_bpw all_w nclip nkept _ <"$out/report.totals.tmp"
	rm -f "$out/report.totals.tmp"
	if [ "$2" = nvg ]; then
		calibjson=$(printf '{"file": %s, "fit_tokens": %s, "sel_tokens": %s, "window": %s, "rho": %s, "sequential": true}' \
			"$(json_str "$(basename "$7")")" "$8" "$9" "${10}" "${11}")
	fi
	if [ -n "$6" ]; then
		planjson=$(printf '{"file": %s, "rules": [%s]}' "$(json_str "$(basename "$6")")" \
			"$(sed -e 's/#.*//' -e 's/[[:space:]]\+/ /g' -e 's/^ //; s/ $//' "$6" | grep -v '^$' |
				sed -e 's/\\/\\\\/g; s/"/\\"/g; s/.*/"&"/' | paste -sd, - | sed 's/,/, /g')")
	fi
	{
		printf '{"weight_quant": "blr", "blr": {"method": "%s", "target_bpw": %s, "plan": %s, ' "$2" "$3" "$planjson"
		printf '"requested_bpw": %s, "clipped_tensors": %s, "kept_tensors": %s, "refused_tensors": [%s], ' \
			"$req_bpw" "$nclip" "$nkept" "$(awk '$8 == "refused" { printf "%s\"%s\"", n++ ? ", " : "", $1 }' "$out/report.body.tmp")"
		printf '"blr_body_bpw": %s, "blr_body_weights": %s, "layer_projection_bpw": %s, "layer_projection_weights": %s, ' \
			"$body_bpw" "$body_w" "$all_bpw" "$all_w"
		printf '"kv_factor": %s, "paths": "%s", "paths_follow": %s, "paths_follow_on": %s, "paths_follow_one": %s, "refine_sweeps": %s, "g_solve": %s, "try_sweeps": %s, "g_every": %s, "itq_tol": %s, "itq_prec": %s, "hb_prec": %s, "als_tol": %s, "als_prec": %s, "calibration": %s, "encoder_device": "%s"}}\n' \
			"$4" "$5" "$([ "$2" = nvg ] && echo "${21}" || echo null)" \
			"$([ "$2" = nvg ] && [ "${21}" -gt 1 ] && printf '[%s]' "$(printf '"%s", ' ${22} | sed 's/, $//')" || echo null)" \
			"$([ "$2" = nvg ] && [ "${21}" -gt 1 ] && printf '[%s]' "$([ -n "${23}" ] && printf '"%s", ' ${23} | sed 's/, $//')" || echo null)" \
			"$([ "$2" = nvg ] && echo "${13}" || echo null)" \
			"$([ "$2" = nvg ] && echo "\"${14}\"" || echo null)" \
			"$([ "$2" = nvg ] && echo "${15}" || echo null)" \
			"$([ "$2" = nvg ] && echo "${24}" || echo null)" \
			"$([ "$2" = nvg ] && awk -v v="${16}" 'BEGIN { printf "%.9g", v + 0 }' || echo null)" \
			"$([ "$2" = nvg ] && echo "\"${18}\"" || echo null)" \
			"$([ "$2" = nvg ] && echo "\"${19}\"" || echo null)" \
			"$([ "$2" = nvg ] && awk -v v="${17}" 'BEGIN { printf "%.9g", v + 0 }' || echo null)" \
			"$([ "$2" = nvg ] && echo "\"${20}\"" || echo null)" "$calibjson" \
			"$([ "$2" = nvg ] && echo "${12}" || echo cpu)"
	} >"$prov"
	rm -f "$out/report.body.tmp"
	mv "$prov" "$out/provenance.json"
	mv "$rep" "$out/model.cmf.blr.txt"
}

# curves OUT 'B…' [sel|block|kl]: "tensor layer weights bpw error spent" from
# the sweep's report lines; the error is the square of the relative SEL
# error (nvg) or of the relative Frobenius error (dual-svid): an energy,
# additive over tensors; with block, the SEL loss of the block with that
# payload alone (L.s.b.block, blr-tune's report: relative to the block's
# own contribution, an energy too); with kl, the model's SEL KL with that
# payload alone in the source (its line in L.kl, blr-tune --perturb:
# second order in the error, so additive too); spent the payload's budget bits per
# weight, blr(5)'s P·(r(m+n) + 16(m+n+r)) for its paths P and rank r, which
# the rank rule rounds away from the request
curves() {
	echo "tensor layer weights bpw error spent"
	awk -v out="$1" -v budgets="$2" -v measure="${3:-sel}" '
	BEGIN { nb = split(budgets, b, " ") }
	$3 == "keep" { next }
	{
		for (i = 1; i <= nb; i++) {
			f = out "/sweep/L" $2 "." $6 "." b[i] ".rep"
			if ((getline line <f) <= 0) { printf "convert: cannot read %s\n", f >"/dev/stderr"; exit 1 }
			close(f)
			if (line == "refused") continue
			n = split(line, w, " "); v = ""; s = 0; p = ""; r = ""
			for (j = 1; j < n; j++) { if (w[j] == "stored") s = 1; if ((s && w[j] == "sel") || w[j] == "frob") v = w[j + 1] }
			for (j = 1; j <= n && r == ""; j++) if (w[j] ~ /^P[12]$/ && w[j + 1] ~ /^r[0-9]+$/) { p = substr(w[j], 2); r = substr(w[j + 1], 2) }
			if (v == "" || r == "") { printf "convert: no error or rank in the sweep report of %s at %s bpw: %s\n", $1, b[i], line >"/dev/stderr"; exit 1 }
			e = v * v
			if (measure == "kl") {
				f = out "/sweep/L" $2 ".kl"; p0 = out "/sweep/L" $2 "." $6 "." b[i] ".blr"; e = ""
				while ((getline line <f) > 0) if (split(line, w, " ") == 4 && w[2] == p0 && w[3] == "kl") e = w[4]
				close(f)
				if (e == "") { printf "convert: no KL for %s in %s\n", p0, f >"/dev/stderr"; exit 1 }
			}
			if (measure == "block") {
				f = out "/sweep/L" $2 "." $6 "." b[i] ".block"
				if ((getline line <f) <= 0) { printf "convert: cannot read %s\n", f >"/dev/stderr"; exit 1 }
				close(f)
				if (split(line, w, " ") < 9 || w[8] != "sel") { printf "convert: not a block report: %s: %s\n", f, line >"/dev/stderr"; exit 1 }
				e = w[9]
			}
			printf "%s %s %.0f %s %.9g %.9g\n", $1, $2, $4 * $5, b[i], e, p * (r * ($4 + $5) + 16 * ($4 + $5 + r)) / ($4 * $5)
		}
	}' "$1/tensors.txt"
}

# best OUT MODEL tokens|text CALIB FIT SEL WINDOW: the conversion in OUT and
# the plan's in OUT/plan scored against MODEL on the SEL tokens (the SEL
# after the first FIT of the calibration, in windows of WINDOW): cmf-eval's
# KL(source ‖ model).  OUT/best.txt gives both, their stored body bits, and
# which is kept: the plan only when its KL is lower.  OUT/best.cmf and
# OUT/best.cmf.blr.txt are that model and its report (hard links where the
# file system allows, else copies); best.txt is written last
best() {
	local out=$1 src=$2 kind=$3 calib=$4 fit=$5 sel=$6 window=$7 ids who m kl
	ids=$out/best.sel.tmp
	trap "rm -f $(printf %q "$out")/best.*.tmp" EXIT
	if [ "$kind" = text ]; then
		"${T}cmf-eval" -m "$src" --text "$calib" --tokenize "$out/best.ids.tmp" >/dev/null
		calib=$out/best.ids.tmp
	fi
	dd if="$calib" of="$ids" bs=64K iflag=skip_bytes,count_bytes skip=$((4 * fit)) \
		count=$((4 * sel)) status=none
	[ "$(stat -c %s "$ids")" -eq $((4 * sel)) ] ||
		die "$calib: fewer than FIT $fit + SEL $sel calibration tokens"
	: >"$out/best.txt.tmp"
	for who in uniform plan; do
		m=$out/model.cmf
		[ "$who" = plan ] && m=$out/plan/model.cmf
		"${T}cmf-eval" -q -m "$m" --base "$src" --tokens "$ids" --window "$window" >"$out/best.eval.tmp"
		kl=$(sed -n 's/^kl //p' "$out/best.eval.tmp")
		[ -n "$kl" ] || die "cmf-eval gave no KL for $m"
		printf '%s kl %s nll %s body_bpw %s model %s\n' "$who" "$kl" \
			"$(sed -n 's/^nll //p' "$out/best.eval.tmp")" \
			"$(sed -n 's/^# total blr body \([^ ]*\) bpw.*/\1/p' "$m.blr.txt")" "$m" >>"$out/best.txt.tmp"
	done
	awk '{ kl[$1] = $3 } END { print "kept", (kl["plan"] + 0 < kl["uniform"] + 0) ? "plan" : "uniform" }' \
		"$out/best.txt.tmp" >>"$out/best.txt.tmp"
	m=$out/model.cmf
	grep -qx 'kept plan' "$out/best.txt.tmp" && m=$out/plan/model.cmf
	for who in cmf cmf.blr.txt; do
		# the same model kept again: best.* is already a link to it (mv
		# refuses to move a file onto another link of itself)
		[ "$out/best.$who" -ef "${m%.cmf}.$who" ] && continue
		ln -f "${m%.cmf}.$who" "$out/best.$who.tmp" 2>/dev/null || cp "${m%.cmf}.$who" "$out/best.$who.tmp"
		mv "$out/best.$who.tmp" "$out/best.$who"
	done
	mv "$out/best.txt.tmp" "$out/best.txt"
}

cmd=$1
shift
case $cmd in
locked) locked "$@" ;;
body-linears) body_linears "$@" ;;
layers-mk) layers_mk "$@" ;;
step) step "$@" ;;
encode) encode "$@" ;;
follow) follow "$@" ;;
patch-args) patch_args "$@" ;;
patches) patches "$@" ;;
report) report "$@" ;;
curves) curves "$@" ;;
best) best "$@" ;;
*) die "convert-lib.sh: unknown step '$cmd'" ;;
esac
