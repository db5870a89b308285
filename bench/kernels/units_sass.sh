#!/bin/sh
# units_sass.sh SRC_ROOT: SASS instructions of units_sass.cu's kernels built against SRC_ROOT's
# headers (sm_90 instructions are 16 bytes: a kernel's .text section size / 16; no disassembler
# needed, so it runs where only nvcc is installed).
d=$(dirname "$0")
nvcc -arch=sm_90 -O3 -std=c++17 -I"$1" -I"$1/src" -cubin -o /tmp/units_sass.cubin "$d/units_sass.cu" || exit 1
readelf -S -W /tmp/units_sass.cubin 2> /dev/null | grep '\.text\.' | python3 -c "
import re, sys
for l in sys.stdin:
    m = re.search(r'\.text\.(\S+)\s+PROGBITS\s+\S+\s+\S+\s+(\S+)', l)
    if m:
        t = re.sub(r'^_Z1kI\d+tqx_|EvPK.*$', '', m.group(1))
        print('%-8s %5d' % (t, int(m.group(2), 16) // 16))
" | sort
