#!/usr/bin/env bash
# cuda_fatbin_diff.sh BUILD_A BUILD_B — whether two CMake builds of the CUDA backend hold the same
# device code: the .nv_fatbin section (every kernel's SASS and PTX) of each CUDA object, byte for
# byte. No GPU needed: a host-only change (such as making device helpers __host__ __device__)
# that leaves every fatbin SAME has changed nothing the GPU runs. Both builds must use the same
# CMake options. Exit status 1 when any object differs or is missing.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_A BUILD_B" >&2; exit 2; }
status=0
while IFS= read -r rel; do
    a="$1/$rel" b="$2/$rel"
    if [ ! -f "$b" ]; then echo "MISSING $rel"; status=1; continue; fi
    objcopy -O binary --only-section=.nv_fatbin "$a" /tmp/fatbin_a.$$
    objcopy -O binary --only-section=.nv_fatbin "$b" /tmp/fatbin_b.$$
    if cmp -s /tmp/fatbin_a.$$ /tmp/fatbin_b.$$; then
        echo "SAME    $rel ($(stat -c %s /tmp/fatbin_a.$$) bytes)"
    else
        echo "DIFF    $rel"; status=1
    fi
done < <(cd "$1" && find CMakeFiles -path '*swiftinfer_cuda*' -name '*.cu.o' | sort)
rm -f /tmp/fatbin_a.$$ /tmp/fatbin_b.$$
exit $status
