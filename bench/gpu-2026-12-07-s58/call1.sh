#!/usr/bin/env bash
# Session 58, call 1: session 57's call4.sh (the general GEMV kernel launched with PDL: its checks,
# SmolLM2-shaped logits GPU vs CPU, tg128 against 244af1a, then run.sh), cut to the device time
# left after repeated refused starts: run.sh without its sanitizer runs, in what is left of CAP
# seconds (default 450; it ran with CAP=390); MODEL_ONLY=1 for run.sh's model part only.
O=/tmp/o58a CAP=${CAP:-450} SI_SANITIZE=0 exec bash "$(dirname "$0")/../gpu-2026-12-07-s57/call4.sh"
