# convert.mk - the sequential BLR conversion of a whole model, driven by make.
#
#   make -f pipelines/convert.mk MODEL=SRC.cmf TOKENS=IDS|TEXT=FILE OUT=DIR BPW=B \
#        [PLAN=FILE] [METHOD=nvg|dual-svid] [PATHS=auto|1|2] [PATHS_FOLLOW=8] \
#        [PATHS_FOLLOW_ON='q k v o gate up down'] [PATHS_FOLLOW_ONE='k v'] \
#        [REFINE=2] [G_SOLVE=pcg|direct] [G_EVERY=1] \
#        [TRY_SWEEPS=2] [ITQ_TOL=0.001] [ITQ_PREC=f64|f32] [HB_PREC=f32|f64] \
#        [ALS_TOL=0.001] [ALS_PREC=f64|f32] \
#        [RHO=0.03] [KV_FACTOR=K] \
#        [FIT_TOKENS=N SEL_TOKENS=N WINDOW=N] [DEVICE=cpu|opencl|auto] [THREADS=N] \
#        [TRANSPORT=1|0] [TUNE=1|0] [TUNE_STEPS=50] [TUNE_LR=0.02] [TUNE_LOSS=mse|normed] \
#        [TUNE_AHEAD=0|1] \
#        [CALIBRATE=1|0] [E2E=1|0] [E2E_FIT_TOKENS=N] [E2E_STEPS=120] \
#        [E2E_TOKENS=IDS] -j N
#
# makes OUT/model.cmf and its report OUT/model.cmf.blr.txt.  Layer L is
# calibrated on the hidden states S_L that the model produces with layers
# < L already encoded (DESIGN.md, "Data flow"):
#
#   S_L ──gram-capture -l L──► L/g.<lead>.{fit,sel}.gram ──hctx-build──► L/<lead>.hctx
#       ──nvg-encode (one per tensor, in parallel under -j)──► L/<short>.blr + .rep
#       ──gram-capture -l L --patch …  --next-state──► S_{L+1}
#
# dual-svid is data-free: its layers need no Grams, and run in parallel.  Given
# TOKENS or TEXT it still captures the SEL Grams the same sequential way (S_L
# with layers < L dual-svid-encoded), only to report each payload's SEL error.
# Every intermediate is a file written atomically, so a conversion killed at
# any moment resumes with the same command and ends with the same bytes.
# One conversion at a time runs in an OUT: it holds a lock on OUT/.lock
# (flock) while it runs, and another conversion into that OUT, of any
# target, is refused naming the holder's pid; the kernel releases the lock
# when the conversion's processes end, killed or not.  A run starts by
# removing the temporaries (NAME.tmp, NAME.tmp.PID) that a killed one left.
# THREADS (each encoder's threads, and THREADS more for each job slot that
# lies idle while it runs, up to THREADS × the -j count; the steps that run
# alone, capture, tune and calibration, get THREADS × the -j count) changes
# the speed, not the bytes: it is not stamped, and a conversion resumes at
# another count.
# TRANSPORT=1 (nvg) also keeps the source model's own states OUT/src/S_L
# (nothing encoded), captures each lead's cross-moment of the two streams
# (L/g.<lead>.{fit,sel}.cross, NVGC) and encodes the transport target
# W (Cᵀ+λI)(G+λI)⁻¹ of every tensor of layers ≥ 1 (nvg-encode --cross); the
# SEL error it reports is E‖Ŵx_q − W x_src‖² / E‖W x_src‖².
# TUNE=1 (nvg) keeps the source stream too and, after a layer's tensors are
# encoded, tunes the scales of all its payloads together so that the block
# on S_L follows the source block on S_L^src (blr-tune --layer: same signs
# and bits, L/tuned/*.blr, its report in L/tune.txt); the tuned layer
# advances the states (its tuning writes them, L/next.state, reading the
# source block's outputs from the source stream) and goes into the model.  TUNE_STEPS Adam steps at the
# rate TUNE_LR on the loss TUNE_LOSS (blr-tune --steps, --lr, --loss);
# TUNE_AHEAD=1 measures that loss after the source's next block
# (blr-tune --lookahead 1, every layer but the last); values other than the
# defaults are stamped.
# CALIBRATE=1 ends with blr-tune --final-norm: the final RMSNorm weight
# fitted to the source's logits on the calibration windows (OUT/applied.cmf
# is the model before it, OUT/calibrate.txt its report line); switching it
# on or off in an OUT redoes only these last steps.
# E2E=1 (nvg) then tunes every payload's scales together, signs and bits
# fixed, so that the whole model's next-token distributions follow the
# source's (blr-tune --end-to-end: KL(source ‖ model) on FIT windows of its
# own, the first E2E_FIT_TOKENS (4 × FIT_TOKENS) of E2E_TOKENS (the
# calibration tokens when not given), E2E_STEPS Adam steps (120) of one
# window, and SEL_TOKENS after them choosing the step; OUT/calibrated.cmf is the model before it, OUT/e2e.txt its
# report line); like CALIBRATE it is not stamped (nor are its tokens), and
# switching it redoes only the last steps.
# Other targets: `sweep` (OUT/curves.txt: every tensor encoded at each of
# SWEEP_BPW, widened to bracket BPW; the input of plan-alloc; its error the
# squared relative SEL error, or with SWEEP_ERROR=block the block's
# relative output error with that payload alone in the source's layer, on
# the conversion's states: blr-tune --layer --steps 0, or with
# SWEEP_ERROR=kl the model's SEL KL with that payload alone in the source,
# from the source's states: blr-tune --perturb), `layers` (the generated rules only),
# `layer-L` (layer L's payloads and the state after it: one cluster job),
# `best` (this conversion, the sweep, a plan at BPW from its curves
# (OUT/plan.txt, plan-alloc) and the plan's conversion in OUT/plan with every
# other setting the same; both models scored against MODEL on the SEL tokens
# by cmf-eval's KL: OUT/best.txt says which is kept, the plan only when it is
# better, and OUT/best.cmf, OUT/best.cmf.blr.txt are that model and report).
# Tools come from BIN when it is set, else from PATH.  Logs are in OUT/logs.

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
.DELETE_ON_ERROR:
.SUFFIXES:
MAKEFLAGS += --no-builtin-rules --no-print-directory

PIPE := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))

METHOD     ?= nvg
PATHS      ?= auto
# PATHS_FOLLOW=N (nvg, PATHS=auto): a tensor of PATHS_FOLLOW_ON (shorts;
# all seven by default) encodes two paths only, not both candidates, where
# the same tensor of the layer before chose two paths over one, that choice
# made by both candidates at most N − 1 layers back (both again every Nth
# layer at least); 0 (and 1) encode both everywhere.  Where auto would
# choose two paths too, the payload is auto's byte for byte.  8 by default
# for nvg with PATHS=auto since whole conversions judged it level with 0
# (README), 0 otherwise; given with another METHOD or PATHS it is refused.
# The stamp names it whenever it is not 0 or 1, so that a stamp without it
# still means 0, the default of before.  PATHS_FOLLOW_ON was the MLP's
# three (gate up down) until the attention's four, whose choices flip more
# from layer to layer, were judged level too at 1.0 and 0.55 bpw (README).
# PATHS_FOLLOW_ONE (shorts of PATHS_FOLLOW_ON; k and v by default, where
# PATHS_FOLLOW_ON has them) follow a choice of one path the same way: one
# path only, auto's payload byte for byte where auto would choose one path
# too.  k_proj and v_proj chose one path in every layer of the conversions
# measured, while q_proj and o_proj flip between the two by a hair (README).
# The stamp names it as paths_follow_one=LIST beside paths_follow, so that a
# stamp without it means none
PATHS_FOLLOW_DEFAULT := 8
ifeq ($(origin PATHS_FOLLOW),undefined)
PATHS_FOLLOW = $(if $(and $(filter nvg,$(METHOD)),$(filter auto,$(PATHS))),$(PATHS_FOLLOW_DEFAULT),0)
endif
comma := ,
empty :=
space := $(empty) $(empty)
PATHS_FOLLOW_ON_DEFAULT := q k v o gate up down
PATHS_FOLLOW_ON ?= $(PATHS_FOLLOW_ON_DEFAULT)
PATHS_FOLLOW_ONE_DEFAULT := k v
PATHS_FOLLOW_ONE ?= $(filter $(PATHS_FOLLOW_ONE_DEFAULT),$(PATHS_FOLLOW_ON))
REFINE     ?= 2
# the ALS g step: PCG (nvg-encode --g-solve), the CPU encoder's default, or a
# factorization each sweep (the device's)
G_SOLVE_DEFAULT = $(if $(and $(filter nvg,$(METHOD)),$(filter cpu auto,$(DEVICE))),pcg,direct)
G_SOLVE    ?= $(G_SOLVE_DEFAULT)
# the ALS sweeps of each refinement try, ITQ's stop and ALS's (nvg-encode
# --try-sweeps, --itq-tol, --als-tol: the tolerances are the CPU encoder's,
# a device takes every step, and another value is refused with one).
# TRY_SWEEPS was 3, and the tolerances 0, until whole conversions judged 2
# and 0.001 level with them (README): the stamp names each whenever it is not
# that old value, so that a stamp without it still means what its conversion
# was made with
TRY_SWEEPS_DEFAULT := 2
TRY_SWEEPS ?= $(TRY_SWEEPS_DEFAULT)
# the ALS g step on every G_EVERY-th sweep of a run (nvg-encode --g-every;
# above 1 the CPU encoder's option, other bytes: a device runs every g step);
# the stamp names g_every only above 1
G_EVERY_DEFAULT := 1
G_EVERY    ?= $(G_EVERY_DEFAULT)
ITQ_TOL_DEFAULT := 0.001
ITQ_TOL    ?= $(ITQ_TOL_DEFAULT)
# the precision of the ITQ's products (nvg-encode --itq-prec: f32 the CPU
# encoder's option, other bytes; a device's ITQ is f32 already)
ITQ_PREC_DEFAULT := f64
ITQ_PREC   ?= $(ITQ_PREC_DEFAULT)
# the precision of the FIT Gram's products with the paths (nvg-encode
# --hb-prec): f64 until whole conversions judged f32 level (README), and
# the CPU encoder's only (a device's products are f32); a CPU stamp names
# hb_prec=f32, so that one without it still means f64
HB_PREC_DEFAULT := f32
HB_PREC    ?= $(HB_PREC_DEFAULT)
ALS_TOL_DEFAULT := 0.001
ALS_TOL    ?= $(ALS_TOL_DEFAULT)
# the precision of the least squares' large products (nvg-encode
# --als-prec: f32 the CPU encoder's option, other bytes; a device's
# products are f32 already); the stamp names als_prec=f32 only
ALS_PREC_DEFAULT := f64
ALS_PREC   ?= $(ALS_PREC_DEFAULT)
RHO        ?= 0.03
KV_FACTOR  ?= 1
FIT_TOKENS ?= 8192
SEL_TOKENS ?= 2048
WINDOW     ?= 512
DEVICE     ?= cpu
THREADS    ?= 1
# the steps that make the converted model follow its source are on by default
# (nvg; the final-norm calibration whenever there are calibration tokens): on
# SmolLM2-135M they took the KL from 2.76 to 1.43 at 1.0 bpw and from 4.13 to
# 1.84 at 0.55 before E2E, which then took 0.8 bpw's from 1.63 to 1.44
# (README, "Following the source"); 0 turns each off.  TRANSPORT is the
# exception, off unless asked for: with block tuning and the end-to-end step
# the finished model came out worse with it at 1.0 and 0.8 bpw (KL 1.15
# against 1.05, 1.30 against 1.24) and better by less at 0.55 (1.49, 1.53)
TRANSPORT  ?= 0
TUNE       ?= $(if $(filter nvg,$(METHOD)),1,0)
CALIBRATE  ?= $(if $(or $(TOKENS),$(TEXT)),1,0)
E2E        ?= $(if $(filter nvg,$(METHOD)),1,0)
E2E_FIT_TOKENS ?= $(shell echo $$(( 4 * $(FIT_TOKENS) )))
TUNE_STEPS_DEFAULT := 50
TUNE_LR_DEFAULT := 0.02
TUNE_STEPS ?= $(TUNE_STEPS_DEFAULT)
TUNE_LR    ?= $(TUNE_LR_DEFAULT)
TUNE_LOSS_DEFAULT := mse
TUNE_LOSS  ?= $(TUNE_LOSS_DEFAULT)
TUNE_AHEAD_DEFAULT := 0
TUNE_AHEAD ?= $(TUNE_AHEAD_DEFAULT)
E2E_STEPS  ?= 120
E2E_TOKENS ?=
SWEEP_BPW  ?= 0.3 0.4 0.55 0.7 0.8 1 1.25 1.5
SWEEP_ERROR ?= sel
BIN        ?=

Q := $(if $(filter 1,$(V)),,@)
T := $(if $(BIN),$(patsubst %/,%,$(BIN))/)
say = printf 'convert: %s\n' $(1) >&2

# ---- the command line, checked before anything runs ----

NOVARS_GOALS := help
ifeq ($(filter-out $(NOVARS_GOALS),$(or $(MAKECMDGOALS),all)),)
else
missing := $(strip $(if $(MODEL),,MODEL) $(if $(OUT),,OUT) $(if $(BPW),,BPW) \
	$(if $(filter nvg,$(METHOD)),$(if $(TOKENS)$(TEXT),,TOKENS-or-TEXT)))
ifneq ($(missing),)
$(error convert.mk: missing variables: $(missing) (make -f pipelines/convert.mk MODEL=SRC.cmf TOKENS=IDS|TEXT=FILE OUT=DIR BPW=B …))
endif
ifeq ($(filter nvg dual-svid,$(METHOD)),)
$(error convert.mk: METHOD '$(METHOD)' is not nvg or dual-svid)
endif
ifeq ($(filter auto 1 2,$(PATHS)),)
$(error convert.mk: PATHS '$(PATHS)' is not auto, 1 or 2)
endif
ifeq ($(filter 0 1,$(CALIBRATE)),)
$(error convert.mk: CALIBRATE '$(CALIBRATE)' is not 0 or 1)
endif
ifeq ($(filter 0 1,$(TRANSPORT)),)
$(error convert.mk: TRANSPORT '$(TRANSPORT)' is not 0 or 1)
endif
ifeq ($(TRANSPORT)$(METHOD),1dual-svid)
$(error convert.mk: TRANSPORT=1 is nvg's: dual-svid reads no Grams)
endif
ifeq ($(filter 0 1,$(TUNE)),)
$(error convert.mk: TUNE '$(TUNE)' is not 0 or 1)
endif
ifeq ($(TUNE)$(METHOD),1dual-svid)
$(error convert.mk: TUNE=1 is nvg's)
endif
ifeq ($(filter mse normed,$(TUNE_LOSS)),)
$(error convert.mk: TUNE_LOSS '$(TUNE_LOSS)' is not mse or normed)
endif
ifeq ($(filter 0 1,$(TUNE_AHEAD)),)
$(error convert.mk: TUNE_AHEAD '$(TUNE_AHEAD)' is not 0 or 1)
endif
ifeq ($(TUNE)$(if $(and $(filter $(TUNE_STEPS_DEFAULT),$(TUNE_STEPS)),$(filter $(TUNE_LR_DEFAULT),$(TUNE_LR)),$(filter $(TUNE_LOSS_DEFAULT),$(TUNE_LOSS)),$(filter $(TUNE_AHEAD_DEFAULT),$(TUNE_AHEAD))),,x),0x)
$(error convert.mk: TUNE_STEPS, TUNE_LR, TUNE_LOSS and TUNE_AHEAD are TUNE=1's)
endif
$(foreach v,ITQ_PREC HB_PREC ALS_PREC,$(if $(filter f64 f32,$($(v))),,$(error convert.mk: $(v) '$($(v))' is not f64 or f32)))
ifeq ($(if $(and $(filter $(TRY_SWEEPS_DEFAULT),$(TRY_SWEEPS)),$(filter $(ITQ_TOL_DEFAULT),$(ITQ_TOL)),$(filter $(ITQ_PREC_DEFAULT),$(ITQ_PREC)),$(filter $(HB_PREC_DEFAULT),$(HB_PREC)),$(filter $(ALS_TOL_DEFAULT),$(ALS_TOL)),$(filter $(ALS_PREC_DEFAULT),$(ALS_PREC))),,x)$(METHOD),xdual-svid)
$(error convert.mk: TRY_SWEEPS, ITQ_TOL, ITQ_PREC, HB_PREC, ALS_TOL and ALS_PREC are nvg's: dual-svid refines nothing)
endif
ifeq ($(if $(filter $(G_EVERY_DEFAULT),$(G_EVERY)),,x)$(METHOD),xdual-svid)
$(error convert.mk: G_EVERY is nvg's: dual-svid has no g step)
endif
ifneq ($(and $(filter-out cpu,$(DEVICE)),$(filter-out $(G_EVERY_DEFAULT),$(G_EVERY))),)
$(error convert.mk: G_EVERY above 1 is the CPU encoder's (a device runs every g step): DEVICE=cpu)
endif
ifeq ($(ITQ_PREC)$(filter-out cpu,$(DEVICE)),f32$(DEVICE))
$(error convert.mk: ITQ_PREC=f32 is the CPU encoder's (a device's ITQ is f32 already): DEVICE=cpu)
endif
ifeq ($(ALS_PREC)$(filter-out cpu,$(DEVICE)),f32$(DEVICE))
$(error convert.mk: ALS_PREC=f32 is the CPU encoder's (a device's products are f32 already): DEVICE=cpu)
endif
ifeq ($(HB_PREC)$(filter-out cpu,$(DEVICE)),f64$(DEVICE))
$(error convert.mk: HB_PREC=f64 is the CPU encoder's (a device's products are f32): DEVICE=cpu)
endif
ifneq ($(and $(filter-out cpu,$(DEVICE)),$(filter-out $(ITQ_TOL_DEFAULT),$(ITQ_TOL)),$(shell awk -v v='$(ITQ_TOL)' 'BEGIN { if (v + 0 > 0) print "y" }')),)
$(error convert.mk: ITQ_TOL above 0 is the CPU encoder's (a device takes every ITQ step): DEVICE=cpu)
endif
ifneq ($(and $(filter-out cpu,$(DEVICE)),$(filter-out $(ALS_TOL_DEFAULT),$(ALS_TOL)),$(shell awk -v v='$(ALS_TOL)' 'BEGIN { if (v + 0 > 0) print "y" }')),)
$(error convert.mk: ALS_TOL above 0 is the CPU encoder's (a device runs every ALS sweep): DEVICE=cpu)
endif
ifeq ($(if $(filter 2,$(REFINE)),,x)$(METHOD),xdual-svid)
$(error convert.mk: REFINE is nvg's: dual-svid refines nothing)
endif
ifeq ($(filter direct pcg,$(G_SOLVE)),)
$(error convert.mk: G_SOLVE '$(G_SOLVE)' is not direct or pcg)
endif
ifeq ($(G_SOLVE)$(METHOD),pcgdual-svid)
$(error convert.mk: G_SOLVE is nvg's: dual-svid has no g step)
endif
ifeq ($(G_SOLVE)$(filter cpu auto,$(DEVICE)),pcg)
$(error convert.mk: G_SOLVE=pcg is the CPU encoder's: DEVICE=cpu)
endif
ifeq ($(filter 0 1,$(E2E)),)
$(error convert.mk: E2E '$(E2E)' is not 0 or 1)
endif
ifeq ($(E2E)$(METHOD),1dual-svid)
$(error convert.mk: E2E=1 is nvg's)
endif
ifeq ($(CALIBRATE)$(or $(TOKENS),$(TEXT)),1)
$(error convert.mk: CALIBRATE=1 needs calibration tokens: give TOKENS or TEXT)
endif
ifneq ($(and $(TOKENS),$(TEXT)),)
$(error convert.mk: give TOKENS or TEXT, not both)
endif
ifneq ($(filter best,$(MAKECMDGOALS)),)
ifneq ($(PLAN),)
$(error convert.mk: best makes its own plan in OUT/plan.txt: leave PLAN out)
endif
ifeq ($(or $(TOKENS),$(TEXT)),)
$(error convert.mk: best scores both models on the calibration's SEL tokens: give TOKENS or TEXT)
endif
endif
CALIB := $(or $(TOKENS),$(TEXT))
# the Grams are captured for nvg, and for dual-svid's SEL errors when there is data
CAPTURE_GRAMS := $(if $(filter nvg,$(METHOD)),1,$(if $(CALIB),1))
$(foreach v,MODEL PLAN CALIB E2E_TOKENS,$(if $($(v)),$(if $(wildcard $($(v))),,$(error convert.mk: $(v) '$($(v))' does not exist))))
ifeq ($(shell [[ '$(PATHS_FOLLOW)' =~ ^(0|[1-9][0-9]{0,3})$$ ]] && echo y),)
$(error convert.mk: PATHS_FOLLOW '$(PATHS_FOLLOW)' is not an integer from 0 to 9999)
endif
ifneq ($(or $(filter-out q k v o gate up down,$(PATHS_FOLLOW_ON)),$(if $(strip $(PATHS_FOLLOW_ON)),,x)),)
$(error convert.mk: PATHS_FOLLOW_ON '$(PATHS_FOLLOW_ON)' is not a list of q k v o gate up down)
endif
ifneq ($(filter-out $(PATHS_FOLLOW_ON),$(PATHS_FOLLOW_ONE)),)
$(error convert.mk: PATHS_FOLLOW_ONE '$(PATHS_FOLLOW_ONE)' is not a list of PATHS_FOLLOW_ON's ($(PATHS_FOLLOW_ON)))
endif
ifneq ($(filter-out 0 1,$(PATHS_FOLLOW)),)
ifneq ($(METHOD)$(PATHS),nvgauto)
$(error convert.mk: PATHS_FOLLOW follows the choices of PATHS=auto of nvg: METHOD=nvg PATHS=auto)
endif
endif
$(foreach v,FIT_TOKENS SEL_TOKENS WINDOW THREADS REFINE TRY_SWEEPS G_EVERY TUNE_STEPS E2E_FIT_TOKENS E2E_STEPS,$(if $(shell [[ '$($(v))' =~ ^[1-9][0-9]*$$ ]] && echo y),,$(error convert.mk: $(v) '$($(v))' is not a positive integer)))
$(foreach v,BPW RHO KV_FACTOR TUNE_LR ITQ_TOL ALS_TOL,$(if $(shell [[ '$($(v))' =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$$ ]] && echo y),,$(error convert.mk: $(v) '$($(v))' is not a number)))
# every value in the range its tool takes (tools/tool.h), checked before OUT is touched
in_range = $(shell awk -v v='$(1)' 'BEGIN { exit !(v + 0 $(2) && v + 0 $(3)) }' && echo y)
range = $(if $(call in_range,$($(1)),$(2),$(3)),,$(error convert.mk: $(1) '$($(1))' is not $(2) and $(3)))
$(call range,BPW,> 0,< 16)
$(call range,KV_FACTOR,> 0,< 16)
$(call range,RHO,>= 0,<= 1e6)
$(call range,THREADS,>= 1,<= 64)
$(call range,REFINE,>= 1,<= 16)
$(call range,TRY_SWEEPS,>= 1,<= 8)
$(call range,G_EVERY,>= 1,<= 8)
$(call range,ITQ_TOL,>= 0,<= 0.5)
$(call range,ALS_TOL,>= 0,<= 0.5)
$(call range,TUNE_STEPS,>= 1,<= 1048576)
$(call range,TUNE_LR,>= 1e-6,<= 1)
$(call range,E2E_STEPS,>= 1,<= 1048576)
$(call range,WINDOW,>= 2,<= 1048576)
$(call range,FIT_TOKENS,>= 2,<= 1e15)
$(call range,SEL_TOKENS,>= 2,<= 1e15)
ifeq ($(filter cpu opencl auto,$(DEVICE)),)
$(error convert.mk: DEVICE '$(DEVICE)' is not cpu, opencl or auto)
endif
ifneq ($(TOKENS),)
ifneq ($(CAPTURE_GRAMS),)
have_tokens := $(shell echo $$(( $$(stat -L -c %s '$(TOKENS)') / 4 )))
ifeq ($(shell [ $(have_tokens) -ge $$(( $(FIT_TOKENS) + $(SEL_TOKENS) )) ] && echo y),)
$(error convert.mk: too few calibration tokens: '$(TOKENS)' has $(have_tokens), FIT_TOKENS + SEL_TOKENS need $(shell echo $$(( $(FIT_TOKENS) + $(SEL_TOKENS) ))))
endif
endif
endif
# the end-to-end step's tokens: E2E_TOKENS, else the calibration's
E2E_IDS := $(or $(E2E_TOKENS),$(TOKENS))
ifeq ($(E2E)$(if $(E2E_IDS),y),1y)
e2e_have := $(shell echo $$(( $$(stat -L -c %s '$(E2E_IDS)') / 4 )))
ifeq ($(shell [ $(e2e_have) -ge $$(( $(E2E_FIT_TOKENS) + $(SEL_TOKENS) )) ] && echo y),)
$(error convert.mk: too few tokens for E2E=1: '$(E2E_IDS)' has $(e2e_have), E2E_FIT_TOKENS + SEL_TOKENS need $(shell echo $$(( $(E2E_FIT_TOKENS) + $(SEL_TOKENS) ))) (give E2E_TOKENS or E2E_FIT_TOKENS, or E2E=0))
endif
endif

# ---- one conversion at a time in OUT: the lock ----
# The make started by hand takes an exclusive flock on OUT/.lock (not waiting)
# and runs the conversion as a second make of this file that holds it; that
# make and the tools it starts inherit the lock, so the kernel releases it
# when the last of them ends, killed or not.  A second conversion into OUT is
# refused with the holder's pid.  Only the make holding the lock writes in OUT.
LOCKED := $(filter $(abspath $(OUT)),$(NVG_CONVERT_LOCKED))
UNLOCKED := $(if $(LOCKED),,1)
ifeq ($(UNLOCKED),1)
.PHONY: $(or $(MAKECMDGOALS),all) convert-locked
$(or $(MAKECMDGOALS),all): convert-locked ; @:
convert-locked:
	@NVG_CONVERT_LOCKED='$(abspath $(OUT))' bash $(PIPE)/convert-lib.sh locked '$(OUT)' -- \
		$(MAKE) -f $(PIPE)/convert.mk $(MAKECMDGOALS)
endif

# ---- OUT belongs to one conversion: its parameters are stamped there ----

fileid = $(abspath $(1)):$(shell stat -L -c '%s:%Y' '$(1)')
PARAMS := method=$(METHOD)$(if $(filter nvg,$(METHOD)),$(if $(filter-out 3,$(TRY_SWEEPS)), try_sweeps=$(TRY_SWEEPS))) bpw=$(BPW) paths=$(PATHS) rho=$(RHO) kv=$(KV_FACTOR) \
	fit=$(FIT_TOKENS) sel=$(SEL_TOKENS) window=$(WINDOW) device=$(DEVICE) \
	model=$(call fileid,$(MODEL)) calib=$(if $(CALIB),$(if $(TOKENS),tokens,text):$(call fileid,$(CALIB))) \
	plan=$(if $(PLAN),$(shell cksum <'$(PLAN)' | tr ' ' :))$(if $(filter 1,$(TRANSPORT)), transport=1)$(if $(filter 1,$(TUNE)), tune=1$(if $(filter-out $(TUNE_STEPS_DEFAULT),$(TUNE_STEPS)), tune_steps=$(TUNE_STEPS))$(if $(filter-out $(TUNE_LR_DEFAULT),$(TUNE_LR)), tune_lr=$(TUNE_LR))$(if $(filter-out $(TUNE_LOSS_DEFAULT),$(TUNE_LOSS)), tune_loss=$(TUNE_LOSS))$(if $(filter-out $(TUNE_AHEAD_DEFAULT),$(TUNE_AHEAD)), tune_ahead=$(TUNE_AHEAD)))$(if $(filter-out 2,$(REFINE)), refine=$(REFINE))$(if $(filter-out $(G_SOLVE_DEFAULT),$(G_SOLVE)), g_solve=$(G_SOLVE))$(if $(filter-out 1,$(G_EVERY)), g_every=$(G_EVERY))$(if $(filter nvg,$(METHOD)),$(if $(filter-out 0,$(ITQ_TOL)), itq_tol=$(ITQ_TOL)))$(if $(filter-out $(ITQ_PREC_DEFAULT),$(ITQ_PREC)), itq_prec=$(ITQ_PREC))$(if $(filter nvg,$(METHOD)),$(if $(filter cpu,$(DEVICE)),$(if $(filter f32,$(HB_PREC)), hb_prec=f32)))$(if $(filter nvg,$(METHOD)),$(if $(filter-out 0,$(ALS_TOL)), als_tol=$(ALS_TOL)))$(if $(filter f32,$(ALS_PREC)), als_prec=f32)$(if $(filter-out 0 1,$(PATHS_FOLLOW)), paths_follow=$(PATHS_FOLLOW):$(subst $(space),$(comma),$(sort $(PATHS_FOLLOW_ON)))$(if $(strip $(PATHS_FOLLOW_ONE)), paths_follow_one=$(subst $(space),$(comma),$(sort $(PATHS_FOLLOW_ONE)))))
STAMP := $(OUT)/params
# $(call stamp_was,TOKEN,VAR,OLD): an nvg stamp without TOKEN where this
# command names one was made with VAR=OLD, the default of before
stamp_was = $(if $(and $(filter $(1)=%,$(PARAMS)),$(filter method=nvg,$(file <$(STAMP))),$(if $(filter $(1)=%,$(file <$(STAMP))),,x)),; a stamp without $(1) was made with $(2)=$(3))
# the stamp's paths_follow=N:LIST and paths_follow_one=LIST, where this
# command's differ, as the settings that resume it (the default LIST grew
# from the MLP's three; a stamp with paths_follow but without
# paths_follow_one followed no choice of one path)
follow_was = $(foreach t,$(filter paths_follow=%,$(filter-out $(PARAMS),$(file <$(STAMP)))),; $(t) is PATHS_FOLLOW=$(word 2,$(subst =, ,$(firstword $(subst :, ,$(t))))) PATHS_FOLLOW_ON='$(subst $(comma),$(space),$(word 2,$(subst :, ,$(t))))')$(foreach t,$(filter paths_follow_one=%,$(filter-out $(PARAMS),$(file <$(STAMP)))),; $(t) is PATHS_FOLLOW_ONE='$(subst $(comma),$(space),$(word 2,$(subst =, ,$(t))))')$(if $(and $(filter paths_follow_one=%,$(PARAMS)),$(filter paths_follow=%,$(file <$(STAMP))),$(if $(filter paths_follow_one=%,$(file <$(STAMP))),,x)),; a stamp with paths_follow but without paths_follow_one was made with PATHS_FOLLOW_ONE='')
# an empty stamp is one whose writing failed (a full disk): no stamp at all
ifneq ($(file <$(STAMP)),)
ifneq ($(file <$(STAMP)),$(PARAMS))
# the settings that differ, named both ways: a default that changed since the
# conversion began (TRANSPORT's did) is resumed by giving the stamp's setting
$(error convert.mk: OUT '$(OUT)' holds another conversion's files (parameters in $(STAMP) differ from this command's: the stamp has '$(strip $(filter-out $(PARAMS),$(file <$(STAMP))))', this command '$(strip $(filter-out $(file <$(STAMP)),$(PARAMS)))'); give the stamp's settings to resume it (transport=1 is TRANSPORT=1$(call stamp_was,try_sweeps,TRY_SWEEPS,3)$(call stamp_was,itq_tol,ITQ_TOL,0)$(call stamp_was,als_tol,ALS_TOL,0)$(call stamp_was,hb_prec,HB_PREC,f64)$(call stamp_was,als_prec,ALS_PREC,f64)$(call stamp_was,paths_follow,PATHS_FOLLOW,0)$(follow_was)), or choose another OUT)
endif
else
ifneq ($(filter-out logs params .lock,$(shell ls -A '$(OUT)' 2>/dev/null)),)
$(error convert.mk: OUT '$(OUT)' is not empty and holds no conversion stamp; choose an empty or new directory)
endif
ifneq ($(LOCKED),)
$(shell mkdir -p '$(OUT)/logs')
$(file >$(STAMP).tmp,$(PARAMS))
$(shell mv -f '$(STAMP).tmp' '$(STAMP)')
endif
endif
# CALIBRATE and E2E are not parameters of the stamp: model.cmf follows
# OUT/calibrate.set and OUT/e2e.set (E2E, then its FIT tokens, steps and
# token source when on), each rewritten only when its setting changes
E2E_SET := $(E2E)$(if $(filter 1,$(E2E)), fit=$(E2E_FIT_TOKENS) steps=$(E2E_STEPS) $(if $(E2E_IDS),tokens=$(E2E_IDS),text=$(TEXT)))
ifneq ($(LOCKED),)
ifneq ($(file <$(OUT)/calibrate.set),$(CALIBRATE))
$(file >$(OUT)/calibrate.set,$(CALIBRATE))
endif
ifneq ($(file <$(OUT)/e2e.set),$(E2E_SET))
$(file >$(OUT)/e2e.set,$(E2E_SET))
endif
# and the sweep's curves follow OUT/sweep.set, the measure of their errors
ifneq ($(file <$(OUT)/sweep.set),$(SWEEP_ERROR))
$(file >$(OUT)/sweep.set,$(SWEEP_ERROR))
endif
# the temporaries a killed run left (no rerun would replace them): every file
# of the conversion's naming, NAME.tmp and the tools' NAME.tmp.PID; under the
# lock no process of an earlier run is left to be writing one
$(shell find '$(OUT)' -type f \( -name '*.tmp' -o -name '*.tmp.[0-9]*' \) -delete)
endif
endif

# the rest is the locked make's (the one started by hand only takes the lock)
ifneq ($(UNLOCKED),1)

.PHONY: all layers sweep best help
all: $(OUT)/model.cmf $(OUT)/model.cmf.blr.txt

help:
	@sed -n '2,/^$$/p' $(lastword $(MAKEFILE_LIST))

# ---- the tensors to encode, and the rules generated from them ----

CALIB_ARG := $(if $(TOKENS),--tokens '$(TOKENS)',$(if $(TEXT),--text '$(TEXT)'))
CAPTURE := --fit-tokens $(FIT_TOKENS) --sel-tokens $(SEL_TOKENS) --window $(WINDOW)

# OUT/source.list: the source model's tensors (cmf-patch list), with a note
# first when OpenBLAS runs slower kernels than the CPU allows; OUT/tensors.txt:
# its body linears as "name layer bpw|keep m n short lead", the plan resolved
$(OUT)/source.list: $(STAMP)
	@$(call say,'listing $(MODEL)')
	@$(T)cmf-patch --version | sed -n "s/^note: /convert: note: /p" >&2
	$(Q)$(LIB) step $(LOG)/list.log -- $(T)cmf-patch list '$(MODEL)' >$@.tmp
	$(Q)mv $@.tmp $@

$(OUT)/info.txt: $(STAMP)
	$(Q)$(LIB) step $(LOG)/info.log -- $(T)cmf-patch info '$(MODEL)' >$@.tmp
	$(Q)mv $@.tmp $@

$(OUT)/tensors.txt: $(OUT)/source.list $(PIPE)/convert-lib.sh
	$(Q)$(LIB) body-linears $(OUT)/source.list >$@.body.tmp
	$(Q)if [ ! -s $@.body.tmp ]; then rm -f $@.body.tmp; echo "convert: '$(MODEL)' has no body linears to encode" >&2; exit 1; fi
	$(Q)$(T)plan-alloc --resolve $(or $(PLAN),/dev/null) --bpw $(BPW) -o $@.tmp $@.body.tmp || { rm -f $@.body.tmp; exit 1; }
	$(Q)rm -f $@.body.tmp
	$(Q)mv $@.tmp $@

$(OUT)/layers.mk: $(OUT)/tensors.txt $(OUT)/info.txt $(PIPE)/convert-lib.sh
	$(Q)$(LIB) layers-mk $< $(or $(CAPTURE_GRAMS),0) $(OUT)/info.txt >$@.tmp
	$(Q)mv $@.tmp $@

layers: $(OUT)/layers.mk

ifneq ($(filter-out $(NOVARS_GOALS),$(or $(MAKECMDGOALS),all)),)
include $(OUT)/layers.mk
endif

# layers.mk defines, per layer L: ENC_L (the shorts encoded), KEEP_L, and per
# tensor NAME_L_s, BPW_L_s, LEAD_L_s; NLAYERS and LAYERS; NEED_STATE (the
# layers whose input state is needed).

LOG := $(OUT)/logs
LIB := $(if $(BIN),env BIN='$(BIN)' )bash $(PIPE)/convert-lib.sh
NVG_ENV := OPENBLAS_NUM_THREADS=$(THREADS)
# the steps that run alone between a layer's encoders (capture, the source
# stream, advance, tune, calibration) get the cores -j gives the encoders:
# THREADS × the job count (make puts -jN in MAKEFLAGS by recipe time), at
# most 64.  The bytes do not depend on it.
STEP_ENV = OPENBLAS_NUM_THREADS=$$(( $(STEP_THREADS) > 64 ? 64 : $(STEP_THREADS) ))
STEP_THREADS = $(THREADS) * $(or $(patsubst -j%,%,$(filter -j%,$(MAKEFLAGS))),1)
# a layer's encodes take the job slots that lie idle as more threads, up to
# STEP_THREADS (nvg-encode --threads-max): the layer's last encodes then run
# on the cores the finished ones left.  make hands its jobserver only to the
# recipes it marks recursive (+), and runs those even under -n, -t and -q:
# LEND marks them only when make is to run its recipes
THREADS_MAX = $$(( $(STEP_THREADS) > 64 ? 64 : $(STEP_THREADS) ))
LEND := $(if $(findstring n,$(firstword -$(MAKEFLAGS)))$(findstring t,$(firstword -$(MAKEFLAGS)))$(findstring q,$(firstword -$(MAKEFLAGS))),,+)
ENCODE_COMMON = --shape $(SHAPE_$(1)_$(2)) $(KV_$(1)_$(2)) --paths $(or $(3),$(PATHS)) \
	--kv-factor $(KV_FACTOR) --threads $(THREADS)
NVG_CTX = --hctx $(OUT)/L$(1)/$(LEAD_$(1)_$(2)).hctx --fit $(OUT)/L$(1)/g.$(LEAD_$(1)_$(2)).fit.gram \
	--sel $(OUT)/L$(1)/g.$(LEAD_$(1)_$(2)).sel.gram $(call XP_ARGS,$(1),$(LEAD_$(1)_$(2)))
NVG_DEPS = $(OUT)/L$(1)/$(LEAD_$(1)_$(2)).hctx $(OUT)/L$(1)/g.$(LEAD_$(1)_$(2)).fit.gram \
	$(OUT)/L$(1)/g.$(LEAD_$(1)_$(2)).sel.gram $(call XP_DEPS,$(1),$(LEAD_$(1)_$(2)))
# transport (layers ≥ 1): the lead's cross-moments and the source stream's SEL Gram
xport = $(and $(filter 1,$(TRANSPORT)),$(filter-out 0,$(1)))
SRC_STREAM := $(filter 1,$(TRANSPORT) $(TUNE))
ifeq ($(filter sel block kl,$(SWEEP_ERROR)),)
$(error convert.mk: SWEEP_ERROR '$(SWEEP_ERROR)' is not sel, block or kl)
endif
ifneq ($(and $(filter block kl,$(SWEEP_ERROR)),$(if $(and $(filter nvg,$(METHOD)),$(SRC_STREAM)),,x)),)
$(error convert.mk: SWEEP_ERROR=$(SWEEP_ERROR) measures nvg payloads against the source stream: METHOD=nvg with TRANSPORT=1 or TUNE=1)
endif
XP_DEPS = $(if $(call xport,$(1)),$(OUT)/L$(1)/g.$(2).fit.cross $(OUT)/L$(1)/g.$(2).sel.cross \
	$(OUT)/L$(1)/src.$(2).sel.gram)
XP_ARGS = $(if $(call xport,$(1)),--cross $(OUT)/L$(1)/g.$(2).fit.cross \
	--cross-sel $(OUT)/L$(1)/g.$(2).sel.cross --src-sel $(OUT)/L$(1)/src.$(2).sel.gram)
SEL_GRAM = $(OUT)/L$(1)/g.$(LEAD_$(1)_$(2)).sel.gram
SVID_OPTS = --method dual-svid
ENC_OPTS = $(if $(filter nvg,$(METHOD)),--method nvg --refine $(REFINE) $(if $(filter-out $(G_SOLVE_DEFAULT),$(G_SOLVE)),--g-solve $(G_SOLVE)) $(EFFORT_OPTS) $(DEVICE_OPT) $(NVG_CTX),$(SVID_OPTS) \
	$(if $(CAPTURE_GRAMS),--sel $(SEL_GRAM)))
DEVICE_OPT := $(if $(filter-out cpu,$(DEVICE)),--device $(DEVICE))
# a tolerance always given on the CPU (nvg-encode's own default never decides
# what the stamp says); with a device only another than the default (0: an
# auto that finds none runs the CPU encoder; above 0 is refused above)
tol_opt = $(if $(or $(filter cpu,$(DEVICE)),$(filter-out $(3),$(2))),--$(1)-tol $(2))
# --hb-prec always given, to a device too (f32 there, what it does; f64 is
# refused above), so that the tool's own default never decides it.  The
# encoder's early choice of one path (--pick-lead) is off: the stamp has no
# setting for it, and follow reads a choice between both candidates from
# their final errors, which a report of the early choice does not give
EFFORT_OPTS := --pick-lead off $(if $(filter-out $(TRY_SWEEPS_DEFAULT),$(TRY_SWEEPS)),--try-sweeps $(TRY_SWEEPS)) $(if $(filter-out $(G_EVERY_DEFAULT),$(G_EVERY)),--g-every $(G_EVERY)) $(call tol_opt,itq,$(ITQ_TOL),$(ITQ_TOL_DEFAULT)) $(if $(filter-out $(ITQ_PREC_DEFAULT),$(ITQ_PREC)),--itq-prec $(ITQ_PREC)) --hb-prec $(HB_PREC) $(call tol_opt,als,$(ALS_TOL),$(ALS_TOL_DEFAULT))$(if $(filter f32,$(ALS_PREC)), --als-prec f32)
ENC_DEPS = $(if $(filter nvg,$(METHOD)),$(NVG_DEPS),$(if $(CAPTURE_GRAMS),$(SEL_GRAM)))
# the sweep's dual-svid stays data-free (its curves use the Frobenius error)
SWEEP_OPTS = $(if $(filter nvg,$(METHOD)),$(ENC_OPTS),$(SVID_OPTS))
SWEEP_DEPS = $(if $(filter nvg,$(METHOD)),$(NVG_DEPS))
state_arg = $(if $(filter 0,$(1)),,--state $(OUT)/S$(1).state)
state_dep = $(if $(filter 0,$(1)),,$(OUT)/S$(1).state)
leads_of = $(sort $(foreach s,$(ENC_$(1)),$(LEAD_$(1)_$(s))))
# the --paths of tensor $(2) of layer $(1) under PATHS_FOLLOW (of the
# tensors PATHS_FOLLOW_ON), read from the
# reports of the layers before when the encoder runs (convert-lib.sh
# follow); those reports are older than this layer's Grams, which come from
# the state they advanced
follow_paths = $(if $(and $(filter-out 0 1,$(PATHS_FOLLOW)),$(filter-out 0,$(1)),$(filter $(2),$(PATHS_FOLLOW_ON))),$$$$($(LIB) follow $(OUT) $(1) $(2) $(PATHS_FOLLOW) $(if $(filter $(2),$(PATHS_FOLLOW_ONE)),1,0)))
grams_of = $(foreach d,$(call leads_of,$(1)),$(OUT)/L$(1)/g.$(d).fit.gram $(OUT)/L$(1)/g.$(d).sel.gram)
# nvg: every context of the layer, which each encode of layer $(1) but the
# second of ENC_L waits for (order only): make -j then starts the encodes
# after the contexts, in ENC_L's order, where it started the short tensors
# first while the longest's context was built and the layer ended with its
# longest encode alone.  The second (gate_proj, whose context is one of the
# quick ones) starts as soon as its own context is built, while the first's
# (down_proj's, the largest Gram's: 0.3 s on SmolLM2 where the others take
# 0.03) is still being built, so that the other job slot does not wait
ctxs_of = $(if $(filter nvg,$(METHOD)),$(if $(filter $(2),$(word 2,$(ENC_$(1)))),,$(foreach d,$(call leads_of,$(1)),$(OUT)/L$(1)/$(d).hctx)))

# a layer's directory, and its tensors' encodings (nvg and dual-svid)
define layer_rules
$(OUT)/L$(1)/.dir:
	$(Q)mkdir -p $(OUT)/L$(1) && touch $$@

$(foreach s,$(ENC_$(1)),
$(OUT)/L$(1)/$(s).rep: $(call ENC_DEPS,$(1),$(s)) | $(OUT)/L$(1)/.dir $(call ctxs_of,$(1),$(s))
	@$(call say,'layer $(1)/$(NLAYERS) $(s): encode $(NAME_$(1)_$(s)) at $(BPW_$(1)_$(s)) bpw')
	$(LEND)$(Q)$(NVG_ENV) $(LIB) encode $(LOG)/L$(1).$(s).log $$@ $(OUT)/L$(1)/$(s).blr '$(MODEL)' $(NAME_$(1)_$(s)) -- $(T)nvg-encode $(call ENC_OPTS,$(1),$(s)) $(call ENCODE_COMMON,$(1),$(s),$(call follow_paths,$(1),$(s))) --threads-max $$(THREADS_MAX) --bpw $(BPW_$(1)_$(s))
)

.PHONY: layer-$(1)
layer-$(1): $(foreach s,$(ENC_$(1)),$(OUT)/L$(1)/$(s).rep) $(if $(filter $(NEXT_$(1)),$(NEED_STATE)),$(OUT)/S$(NEXT_$(1)).state)
endef

# capture layer L's inputs from S_L (float layer); with transport, also the
# cross-moments with the source stream's inputs from S_L^src
crosses_of = $(if $(call xport,$(1)),$(foreach d,$(call leads_of,$(1)),$(OUT)/L$(1)/g.$(d).fit.cross \
	$(OUT)/L$(1)/g.$(d).sel.cross))
define capture
$(call grams_of,$(1)) $(call crosses_of,$(1)) &: $(call state_dep,$(1)) $(if $(call xport,$(1)),$(OUT)/src/S$(1).state) | $(OUT)/L$(1)/.dir
	@$(call say,'layer $(1)/$(NLAYERS): capture $(call leads_of,$(1))')
	$(Q)$$(STEP_ENV) $(LIB) step $(LOG)/L$(1).capture.log -- $(T)gram-capture -m '$(MODEL)' $(CALIB_ARG) -l $(1) $(call state_arg,$(1)) $(if $(call xport,$(1)),--cross-state $(OUT)/src/S$(1).state) $(CAPTURE) -o $(OUT)/L$(1)/g
endef

# the source stream (transport): layer L in float on S_L^src, its Grams
# (L/src.*) and S_{L+1}^src; from the embeddings at layer 0
# (the source Grams only for transport's SEL objective, from layer 1 on)
SRC_GRAMS = $(if $(call xport,$(1)),$(foreach d,q o gate down,$(OUT)/L$(1)/src.$(d).fit.gram $(OUT)/L$(1)/src.$(d).sel.gram))
src_next = $(if $(filter $(NEXT_$(1)),$(NEED_STATE)),$(OUT)/src/S$(NEXT_$(1)).state)
define src_stream
$(call SRC_GRAMS,$(1)) $(call src_next,$(1)) &: $(if $(filter-out 0,$(1)),$(OUT)/src/S$(1).state) | $(OUT)/L$(1)/.dir
	@mkdir -p $(OUT)/src
	@$(call say,'layer $(1)/$(NLAYERS): source stream')
	$(Q)$$(STEP_ENV) $(LIB) step $(LOG)/L$(1).source.log -- $(T)gram-capture -m '$(MODEL)' $(CALIB_ARG) -l $(1) $(if $(filter-out 0,$(1)),--state $(OUT)/src/S$(1).state) $(CAPTURE) $(if $(call SRC_GRAMS,$(1)),-o $(OUT)/L$(1)/src) $(if $(call src_next,$(1)),--next-state $(call src_next,$(1)))
endef

# nvg: the inputs' contexts
define nvg_contexts
$(foreach d,$(call leads_of,$(1)),
$(OUT)/L$(1)/$(d).hctx: $(OUT)/L$(1)/g.$(d).fit.gram
	@$(call say,'layer $(1)/$(NLAYERS) $(d): input context')
	$(Q)$(NVG_ENV) $(LIB) step $(LOG)/L$(1).$(d).hctx.log -- $(T)hctx-build --rho $(RHO) $$< -o $$@
)
endef

# S_{L+1}, the states after layer L as encoded (refused tensors stay float);
# a tuned layer's are those its tuning left in L/next.state (blr-tune
# --next-state: gram-capture's bytes), taken by a hard link and touched, so
# that they are newer than the tuning's report, which is written after them
define advance
$(OUT)/S$(NEXT_$(1)).state: $(call state_dep,$(1)) $(foreach s,$(ENC_$(1)),$(OUT)/L$(1)/$(s).rep) $(call tune_dep,$(1))
	@$(call say,'layer $(1)/$(NLAYERS): advance to S$(NEXT_$(1))')
	$(Q)if [ -n '$(call tune_dep,$(1))' ] && [ -f $(OUT)/L$(1)/next.state ]; then \
		{ [ $$@ -ef $(OUT)/L$(1)/next.state ] || { ln -f $(OUT)/L$(1)/next.state $$@.tmp && \
		mv $$@.tmp $$@; }; } && touch $$@; \
	else $$(STEP_ENV) $(LIB) step $(LOG)/L$(1).advance.log -- $(T)gram-capture -m '$(MODEL)' $(CALIB_ARG) -l $(1) $(call state_arg,$(1)) $(CAPTURE) `$(LIB) patch-args $(OUT) $(1) $(SUB)` --next-state $$@; fi
endef

# both streams entering layer L for blr-tune --layer (layer 0 starts from the
# embeddings), and the source stream leaving it where the stream goes on: the
# source block's outputs, which blr-tune then reads instead of running the block
streams_arg = $(if $(filter-out 0,$(1)),--state $(OUT)/S$(1).state --src-state $(OUT)/src/S$(1).state) \
	$(if $(call src_next,$(1)),--src-next $(call src_next,$(1)))
streams_dep = $(call state_dep,$(1)) $(if $(filter-out 0,$(1)),$(OUT)/src/S$(1).state) $(call src_next,$(1))

# block reconstruction (TUNE=1): the layer's payloads tuned together into L/tuned/
SUB := $(if $(filter 1,$(TUNE)),tuned/)
tune_dep = $(if $(and $(filter 1,$(TUNE)),$(ENC_$(1))),$(OUT)/L$(1)/tune.txt)
# the states after the tuned layer, where the conversion goes on
next_arg = $(if $(filter $(NEXT_$(1)),$(NEED_STATE)),--next-state $(OUT)/L$(1)/next.state)
# TUNE_AHEAD=1: the loss after the next block, which the last layer has not
ahead_arg = $(if $(and $(filter 1,$(TUNE_AHEAD)),$(filter-out $(lastword $(LAYERS)),$(1))),--lookahead 1)
define tune
$(OUT)/L$(1)/tune.txt: $(call streams_dep,$(1)) $(foreach s,$(ENC_$(1)),$(OUT)/L$(1)/$(s).rep)
	@$(call say,'layer $(1)/$(NLAYERS): tune the block')
	$(Q)mkdir -p $(OUT)/L$(1)/tuned
	$(Q)rm -f $(OUT)/L$(1)/next.state
	$(Q)args=`$(LIB) patch-args $(OUT) $(1)`; if [ -n "$$$$args" ]; then \
		$$(STEP_ENV) $(LIB) step $(LOG)/L$(1).tune.log -- $(T)blr-tune --layer $(1) -q -m '$(MODEL)' $(CALIB_ARG) $(CAPTURE) --steps $(TUNE_STEPS) --lr $(TUNE_LR) --loss $(TUNE_LOSS) $(call ahead_arg,$(1)) $(call streams_arg,$(1)) $$$$args $(call next_arg,$(1)) -o $(OUT)/L$(1)/tuned >$$@.tmp; \
	else echo "layer $(1): nothing encoded" >$$@.tmp; fi
	$(Q)sed 's/^/convert: /' $$@.tmp >&2
	$(Q)mv $$@.tmp $$@
endef

$(foreach l,$(LAYERS),$(eval $(call layer_rules,$(l))))
ifneq ($(CAPTURE_GRAMS),)
$(foreach l,$(LAYERS),$(if $(ENC_$(l)),$(eval $(call capture,$(l)))))
$(foreach l,$(LAYERS),$(if $(filter $(NEXT_$(l)),$(NEED_STATE)),$(eval $(call advance,$(l)))))
endif
ifeq ($(METHOD),nvg)
$(foreach l,$(LAYERS),$(if $(ENC_$(l)),$(eval $(call nvg_contexts,$(l)))))
endif
ifneq ($(SRC_STREAM),)
$(foreach l,$(LAYERS),$(if $(call SRC_GRAMS,$(l))$(call src_next,$(l)),$(eval $(call src_stream,$(l)))))
endif
ifeq ($(TUNE),1)
$(foreach l,$(LAYERS),$(if $(ENC_$(l)),$(eval $(call tune,$(l)))))
endif

REPS := $(foreach l,$(LAYERS),$(foreach s,$(ENC_$(l)),$(OUT)/L$(l)/$(s).rep))

# ---- the report, the provenance, the model ----
$(OUT)/model.cmf.blr.txt $(OUT)/provenance.json &: $(REPS) $(OUT)/tensors.txt $(OUT)/source.list $(OUT)/info.txt
	@$(call say,'report')
	$(Q)$(LIB) step $(LOG)/report.log -- $(LIB) report $(OUT) '$(METHOD)' '$(BPW)' '$(KV_FACTOR)' '$(PATHS)' '$(PLAN)' '$(CALIB)' '$(FIT_TOKENS)' '$(SEL_TOKENS)' '$(WINDOW)' '$(RHO)' '$(DEVICE)' '$(REFINE)' '$(G_SOLVE)' '$(TRY_SWEEPS)' '$(ITQ_TOL)' '$(ALS_TOL)' '$(ITQ_PREC)' '$(HB_PREC)' '$(ALS_PREC)' '$(PATHS_FOLLOW)' '$(sort $(PATHS_FOLLOW_ON))' '$(sort $(PATHS_FOLLOW_ONE))' '$(G_EVERY)'
	$(Q)grep -E '^# (clipped|  |total)' $(OUT)/model.cmf.blr.txt | sed 's/^# /convert: /' >&2

# the payloads applied: the model itself, or the input of the last steps
# (applied.cmf → calibrate → calibrated.cmf → end-to-end → model.cmf, each
# step there only when it is on)
LAST := $(OUT)/calibrate.set $(OUT)/e2e.set
APPLIED := $(OUT)/$(if $(filter 1,$(CALIBRATE) $(E2E)),applied,model).cmf
CALIBRATED := $(if $(filter 1,$(CALIBRATE)),$(OUT)/$(if $(filter 1,$(E2E)),calibrated,model).cmf)
$(APPLIED): $(OUT)/model.cmf.blr.txt $(OUT)/provenance.json $(foreach l,$(LAYERS),$(call tune_dep,$(l)))
	@$(call say,'apply the payloads to $(MODEL)')
	$(Q)$(LIB) step $(LOG)/apply.log -- $(T)cmf-patch apply --provenance $(OUT)/provenance.json -o $@ '$(MODEL)' `$(LIB) patches $(OUT) $(SUB)`
	$(if $(filter 1,$(CALIBRATE) $(E2E)),,@$(call say,'wrote $@ and $@.blr.txt'))

# the calibration starts each model's final states at the states entering
# the last encoded layer where the conversion has them (the converted
# stream always, the source's with tuning or transport there): the same
# bytes as from the embeddings (blr-tune(1) --state), without running every
# layer before it again, twice
CAL_L := $(lastword $(NEED_STATE))
CAL_STATES := $(if $(CAL_L),$(OUT)/S$(CAL_L).state $(if $(or $(call tune_dep,$(CAL_L)),$(call xport,$(CAL_L))),$(OUT)/src/S$(CAL_L).state))
cal_arg = $(if $(1),--state $(firstword $(1))) $(if $(word 2,$(1)),--src-state $(word 2,$(1)))

ifeq ($(CALIBRATE),1)
$(CALIBRATED): $(APPLIED) $(OUT)/calibrate.set $(if $(filter 0,$(E2E)),$(OUT)/e2e.set) $(CAL_STATES)
	@$(call say,'calibrate the final norm against $(MODEL)')
	$(Q)$(STEP_ENV) $(LIB) step $(LOG)/calibrate.log -- $(T)blr-tune --final-norm -q -m $< --base '$(MODEL)' $(CALIB_ARG) $(call cal_arg,$(CAL_STATES)) $(CAPTURE) -o $@ >$(OUT)/calibrate.txt.tmp
	$(Q)mv $(OUT)/calibrate.txt.tmp $(OUT)/calibrate.txt
	$(Q)sed 's/^/convert: /' $(OUT)/calibrate.txt >&2
	$(if $(filter 1,$(E2E)),,@$(call say,'wrote $@ and $@.blr.txt'))
endif
ifeq ($(E2E),1)
$(OUT)/model.cmf: $(or $(CALIBRATED),$(APPLIED)) $(LAST)
	@$(call say,'tune every payload against $(MODEL) end to end')
	$(Q)$(STEP_ENV) $(LIB) step $(LOG)/e2e.log -- $(T)blr-tune --end-to-end -q -m $< --base '$(MODEL)' $(if $(E2E_TOKENS),--tokens '$(E2E_TOKENS)',$(CALIB_ARG)) --fit-tokens $(E2E_FIT_TOKENS) --steps $(E2E_STEPS) --sel-tokens $(SEL_TOKENS) --window $(WINDOW) `$(LIB) patch-args $(OUT) '' $(SUB)` -o $@ >$(OUT)/e2e.txt.tmp
	$(Q)mv $(OUT)/e2e.txt.tmp $(OUT)/e2e.txt
	$(Q)sed 's/^/convert: /' $(OUT)/e2e.txt >&2
	@$(call say,'wrote $@ and $@.blr.txt')
endif
ifeq ($(CALIBRATE)$(E2E),00)
$(OUT)/model.cmf: $(LAST)
endif

# ---- sweep: every tensor at every budget of SWEEP_BPW, on the conversion's Grams ----
# The sweep brackets the budget, so that plan-alloc can reach BPW: budgets are
# added to SWEEP_BPW (1.25 1.5 2 3 4 6 8 12 above, 1 0.7 0.5 0.3 0.2 0.15 0.1
# 0.07 0.05 below) until it reaches 1.5·BPW and BPW/1.5 (to a part in 10⁵:
# a list that spells them, rounded, is not widened).
SWEEP_LIST := $(shell awk -v b='$(BPW)' -v l='$(SWEEP_BPW)' 'BEGIN { \
	n = split(l, v, " "); lo = hi = v[1] + 0; \
	for (i = 1; i <= n; i++) { lo = v[i] + 0 < lo ? v[i] + 0 : lo; hi = v[i] + 0 > hi ? v[i] + 0 : hi } \
	split("1.25 1.5 2 3 4 6 8 12", up, " "); split("1 0.7 0.5 0.3 0.2 0.15 0.1 0.07 0.05", dn, " "); out = l; \
	for (i = 1; i <= 8 && hi < 1.5 * b * (1 - 1e-5); i++) if (up[i] + 0 > hi) { out = out " " up[i]; hi = up[i] + 0 } \
	for (i = 1; i <= 9 && lo > b / 1.5 * (1 + 1e-5); i++) if (dn[i] + 0 < lo) { out = dn[i] " " out; lo = dn[i] + 0 } \
	print out }')
# (nvg: a sweep budget spelled as the tensor's own budget in the conversion is
# that encoding, the same bytes, so its report is copied rather than encoded again)
sweep_own = $(and $(filter nvg,$(METHOD)),$(filter $(3),$(BPW_$(1)_$(2))))
# each sweep payload is kept beside its report (L.s.b.blr, none when refused),
# for SWEEP_ERROR=block to measure in the block
define sweep_rule
ifneq ($(call sweep_own,$(1),$(2),$(3)),)
$(OUT)/sweep/L$(1).$(2).$(3).rep: $(OUT)/L$(1)/$(2).rep
	@mkdir -p $(OUT)/sweep
	$(Q)if [ -f $(OUT)/L$(1)/$(2).blr ]; then cp $(OUT)/L$(1)/$(2).blr $(OUT)/sweep/L$(1).$(2).$(3).blr; fi
	$(Q)cp $$< $$@.tmp && mv $$@.tmp $$@
else
$(OUT)/sweep/L$(1).$(2).$(3).rep: $(call SWEEP_DEPS,$(1),$(2)) | $(OUT)/L$(1)/.dir
	@mkdir -p $(OUT)/sweep
	$(Q)$(NVG_ENV) $(LIB) encode $(LOG)/sweep.L$(1).$(2).$(3).log $$@ $(OUT)/sweep/L$(1).$(2).$(3).blr '$(MODEL)' $(NAME_$(1)_$(2)) -- $(T)nvg-encode $(call SWEEP_OPTS,$(1),$(2)) $(call ENCODE_COMMON,$(1),$(2)) --bpw $(3)
endif
# the block's relative output error with this payload alone: blr-tune's SEL loss, no step
$(OUT)/sweep/L$(1).$(2).$(3).block: $(OUT)/sweep/L$(1).$(2).$(3).rep $(call streams_dep,$(1))
	$(Q)rm -rf $$@.d && mkdir -p $$@.d
	$(Q)if [ "$$$$(cat $$<)" = refused ]; then echo refused >$$@.tmp; \
	elif ! [ -f $(OUT)/sweep/L$(1).$(2).$(3).blr ]; then \
		echo "convert: $(OUT)/sweep/L$(1).$(2).$(3).blr: a sweep made before its payloads were kept; remove $(OUT)/sweep to sweep again" >&2; exit 1; \
	else \
		$$(STEP_ENV) $(LIB) step $(LOG)/sweep.L$(1).$(2).$(3).block.log -- $(T)blr-tune --layer $(1) -q --steps 0 -m '$(MODEL)' $(CALIB_ARG) $(CAPTURE) $(call streams_arg,$(1)) --patch $(NAME_$(1)_$(2))=$(OUT)/sweep/L$(1).$(2).$(3).blr -o $$@.d >$$@.tmp; fi
	$(Q)rm -rf $$@.d && mv $$@.tmp $$@
endef
# the model's KL with each of layer L's sweep payloads alone in the source
# (blr-tune --perturb: from the source's states entering L, on SEL), one run a layer
SWEEP_REPS = $(foreach s,$(ENC_$(1)),$(foreach b,$(SWEEP_LIST),$(OUT)/sweep/L$(1).$(s).$(b).rep))
define sweep_kl
$(OUT)/sweep/L$(1).kl: $(call SWEEP_REPS,$(1)) $(if $(filter-out 0,$(1)),$(OUT)/src/S$(1).state)
	$(Q)args=; $(foreach s,$(ENC_$(1)),$(foreach b,$(SWEEP_LIST),f=$(OUT)/sweep/L$(1).$(s).$(b); \
		if [ "$$$$(cat $$$$f.rep)" != refused ]; then [ -f $$$$f.blr ] || { echo "convert: $$$$f.blr: a sweep made before its payloads were kept; remove $(OUT)/sweep to sweep again" >&2; exit 1; }; \
		args="$$$$args --patch $(NAME_$(1)_$(s))=$$$$f.blr"; fi;)) \
	if [ -n "$$$$args" ]; then $$(STEP_ENV) $(LIB) step $(LOG)/sweep.L$(1).kl.log -- $(T)blr-tune --perturb $(1) -q -m '$(MODEL)' $(CALIB_ARG) $(CAPTURE) $(if $(filter-out 0,$(1)),--src-state $(OUT)/src/S$(1).state) $$$$args >$$@.tmp; \
	else : >$$@.tmp; fi
	$(Q)mv $$@.tmp $$@
endef
SWEEPS := $(foreach l,$(LAYERS),$(foreach s,$(ENC_$(l)),$(foreach b,$(SWEEP_LIST),$(OUT)/sweep/L$(l).$(s).$(b).$(if $(filter block,$(SWEEP_ERROR)),block,rep)))) \
	$(if $(filter kl,$(SWEEP_ERROR)),$(foreach l,$(LAYERS),$(if $(ENC_$(l)),$(OUT)/sweep/L$(l).kl)))
$(foreach l,$(LAYERS),$(foreach s,$(ENC_$(l)),$(foreach b,$(SWEEP_LIST),$(eval $(call sweep_rule,$(l),$(s),$(b))))))
$(if $(filter kl,$(SWEEP_ERROR)),$(foreach l,$(LAYERS),$(if $(ENC_$(l)),$(eval $(call sweep_kl,$(l))))))

sweep: $(OUT)/curves.txt
$(OUT)/curves.txt: $(SWEEPS) $(OUT)/sweep.set
	$(Q)$(LIB) curves $(OUT) '$(SWEEP_LIST)' $(SWEEP_ERROR) >$@.tmp
	$(Q)mv $@.tmp $@

# ---- best: this conversion or a plan's at the same budget, the one nearer the source ----
best: $(OUT)/best.txt
$(OUT)/plan.txt: $(OUT)/curves.txt
	@$(call say,'plan at $(BPW) bpw from the curves of the sweep')
	$(Q)$(LIB) step $(LOG)/plan.log -- $(T)plan-alloc --bpw $(BPW) -q -o $@.tmp $<
	$(Q)mv $@.tmp $@
# the plan's conversion, every setting but PLAN this one's (a new plan starts
# it afresh); run each time, so that it resumes and follows CALIBRATE and E2E
.PHONY: plan-conversion
plan-conversion: $(OUT)/plan.txt
	$(Q)if [ -f $(OUT)/plan/params ] && ! grep -q "plan=$$(cksum <$< | tr ' ' :)" $(OUT)/plan/params; then rm -rf $(OUT)/plan; fi
	$(Q)$(MAKE) -f $(PIPE)/convert.mk OUT=$(OUT)/plan PLAN=$(OUT)/plan.txt all
$(OUT)/plan/model.cmf: plan-conversion ; @:
$(OUT)/best.cmf $(OUT)/best.cmf.blr.txt $(OUT)/best.txt &: $(OUT)/model.cmf $(OUT)/plan/model.cmf
	@$(call say,'score $(OUT)/model.cmf and $(OUT)/plan/model.cmf against $(MODEL) on the SEL tokens')
	$(Q)$(STEP_ENV) $(LIB) step $(LOG)/best.log -- $(LIB) best $(OUT) '$(MODEL)' $(if $(TOKENS),tokens,text) '$(CALIB)' $(FIT_TOKENS) $(SEL_TOKENS) $(WINDOW)
	$(Q)sed 's/^/convert: /' $(OUT)/best.txt >&2
endif
