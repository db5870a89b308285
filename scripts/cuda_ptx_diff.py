#!/usr/bin/env python3
"""cuda_ptx_diff.py TREE_A TREE_B [FILE.cu ...] — which kernels' device code two source trees
compile differently, kernel by kernel, without a GPU.

Each .cu file (default: every src/backend/cuda/*.cu of TREE_B) is compiled to PTX in both trees
(nvcc -O3 -arch=sm_90 -ptx, as the build's sm_90 target); every .entry/.func is compared after
renumbering its branch labels ($L__BB<function>_<block>, which shift when kernels are added).
Prints per file how many kernels are identical, changed, gone and new, and names the changed
ones. A change that only adds kernels (a new weight type) leaves every existing one identical.
Exit status 1 when any existing kernel changed or disappeared. scripts/cuda_fatbin_diff.sh
compares whole built objects instead."""
import pathlib
import re
import subprocess
import sys
import tempfile

ENTRY = re.compile(r"\n(?=(?:\.visible |\.weak |\.extern )?(?:\.entry|\.func) )")
NAME = re.compile(r"(?:\.visible |\.weak |\.extern )?(?:\.entry|\.func)\s+(?:\([^)]*\)\s*)?([\w$]+)")


def kernels(ptx):
    out = {}
    for part in ENTRY.split(ptx)[1:]:
        body = re.sub(r"\$L__BB\d+_", "$L__BB_", part)
        body = re.sub(r"\n\s*// \.globl.*", "", body)  # the next kernel's name trails each body
        body = body.rstrip()  # the file's last kernel had a blank line after it
        m = NAME.match(part)
        out[m.group(1) if m else part[:80]] = body
    return out


def ptx_of(tree, rel, out):
    """the kernels of tree/rel, compiled to the PTX file out"""
    subprocess.run(["nvcc", "-std=c++17", "-O3", "-arch=sm_90", "-ptx", "-Iinclude", "-Isrc",
                    rel, "-o", str(out)], cwd=tree, check=True)
    return kernels(out.read_text())


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    a, b = sys.argv[1], sys.argv[2]
    files = sys.argv[3:] or sorted(str(p.relative_to(b)) for p in
                                   pathlib.Path(b, "src/backend/cuda").glob("*.cu"))
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for rel in files:
            name = rel.replace("/", "_") + ".ptx"
            ka = ptx_of(a, rel, pathlib.Path(tmp, "a_" + name))
            kb = ptx_of(b, rel, pathlib.Path(tmp, "b_" + name))
            changed = [k for k in ka if k in kb and ka[k] != kb[k]]
            gone = [k for k in ka if k not in kb]
            same = len(ka) - len(changed) - len(gone)
            print(f"{rel}: {same} identical, {len(changed)} changed, {len(gone)} gone, "
                  f"{len(set(kb) - set(ka))} new")
            for k in changed + gone:
                print(f"  {'changed' if k in changed else 'gone'} {k}")
            bad += len(changed) + len(gone)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
