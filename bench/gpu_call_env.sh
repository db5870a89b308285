# gpu_call_env.sh — sourced (from the repository root) by a session's device-call script,
# bench/gpu-DATE-sN/callN.sh, after it sets O (the call's output folder) and B (where the binaries
# go: build-gpucarry): unpacks the carried stripped binaries ($B/bins.tar.xz), puts them on the
# library path, installs the carried host libraries (tests/cuda/host_deps.sh, .debs/), writes
# what the GPU is to $O/gpu.txt, and defines
#   step MESSAGE   print the seconds since sourcing and MESSAGE, then pack $O (less models) into
#                  $OUT/$(basename $O).tgz, so that a call cut off by its limit still brings back
#                  what it had;
#   tg128 TYPE SETTING TAG   tg128 (3 repetitions) of /dev/shm/llama2-7b-TYPE.gguf (synthesised
#                  by the caller) under SETTING (NAME=VALUE; SI_NONE=0 for the defaults) into
#                  $O/tg-TYPE-SETTING-TAG.txt, then a step with its copy-bandwidth and tg128 lines.
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
    local f=$O/tg-$1-$2-$3.txt
    env "$2" timeout 60 "$B/swiftinfer" bench --device cuda -m "/dev/shm/llama2-7b-$1.gguf" -p 0 \
        -n 128 -r 3 > "$f" 2>&1
    step "$3 $1 $2: $(grep -E 'GPU copy|tg128' "$f" | tr -s ' ' | tr '\n' ' ')"
}
