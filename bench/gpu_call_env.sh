# gpu_call_env.sh — sourced (from the repository root) by a session's device-call script,
# bench/gpu-DATE-sN/callN.sh, after it sets O (the call's output folder) and B (where the binaries
# go: build-gpucarry): unpacks the carried stripped binaries ($B/bins.tar.xz), puts them on the
# library path, installs the carried host libraries (tests/cuda/host_deps.sh, .debs/), writes
# what the GPU is to $O/gpu.txt, and defines
#   step MESSAGE   print the seconds since sourcing and MESSAGE, then pack $O (less models) into
#                  $OUT/$(basename $O).tgz, so that a call cut off by its limit still brings back
#                  what it had;
#   tg128 TYPE SETTING TAG [SHAPE]   tg128 (3 repetitions) of /dev/shm/SHAPE-TYPE.gguf (SHAPE
#                  llama2-7b unless named; synthesised by the caller or by ab) under SETTING
#                  (NAME=VALUE; SI_NONE=0 for the defaults) into $O/tg-[SHAPE-]TYPE-SETTING-TAG.txt,
#                  then a step with its copy-bandwidth and tg128 lines;
#   ab SHAPE "TYPES" SETTING_A SETTING_B ROUNDS   an A/B of one binary: synthesises the models
#                  that are missing, then per round r1 .. rROUNDS every type under A then B (even
#                  rounds B then A), each a tg128.
# Carry build-gpucarry and .debs with the call.
mkdir -p "$O" && (cd "$B" && tar xJf bins.tar.xz) || { echo "gpu_call_env: no $B/bins.tar.xz" >&2; exit 2; }
export LD_LIBRARY_PATH=$PWD/$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
. tests/cuda/host_deps.sh > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > "$O/gpu.txt" 2>&1
cat "$O/gpu.txt"
STEP_T0=$(date +%s)
step() {
    echo "[$(($(date +%s) - STEP_T0)) s] $*"
    tar czf "$OUT/$(basename "$O").tgz" --exclude="*.gguf" -C "$O" .
}
tg128() {
    local shape=${4:-llama2-7b}
    local f=$O/tg-${4:+$4-}$1-$2-$3.txt
    env "$2" timeout 60 "$B/swiftinfer" bench --device cuda -m "/dev/shm/$shape-$1.gguf" -p 0 \
        -n 128 -r 3 > "$f" 2>&1
    step "$3 ${4:+$4 }$1 $2: $(grep -E 'GPU copy|tg128' "$f" | tr -s ' ' | tr '\n' ' ')"
}
ab() {
    local shape=$1 types=$2 a=$3 b=$4 rounds=$5 r t e
    for t in $types; do
        [ -f "/dev/shm/$shape-$t.gguf" ] || timeout 120 "$B/swiftinfer" synth \
            -o "/dev/shm/$shape-$t.gguf" --shape "$shape" --type "$t" > /dev/null 2>&1
    done
    for r in $(seq 1 "$rounds"); do
        for t in $types; do
            for e in $([ $((r % 2)) = 1 ] && echo "$a $b" || echo "$b $a"); do
                tg128 "$t" "$e" "r$r" "$shape"
            done
        done
    done
}
