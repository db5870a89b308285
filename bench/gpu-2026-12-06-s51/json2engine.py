#!/usr/bin/env python3
"""json2engine.py DIR... — the `swiftinfer bench -c ... --json` files of calls 1-2
(DIR/c-SHAPE-TYPE-rR-SETTING.json, the calls' logs.tgz unpacked) as bench/plot_concurrency.py's
log lines, one engine-SHAPE-TYPE.txt each: SI_NONE-0 is these binaries' default (x in parts at
every 9-16-row GEMV whose x does not fit whole), SI_CUDA_GEMV_TC_PARTS-1 two launches (s50)."""
import glob
import json
import os
import re
import sys

SETTINGS = {"SI_NONE-0": "x=parts", "SI_CUDA_GEMV_TC_PARTS-1": "x=two-launches"}
lines = {}
for d in sys.argv[1:]:
    for path in sorted(glob.glob(os.path.join(d, "c-*.json"))):
        m = re.match(r"c-(.+)-r(\d)-(.+)\.json$", os.path.basename(path))
        model, rnd, key = m.groups()
        for r in json.load(open(path, encoding="utf-8")):
            cols = [r["model"], r["threads"], r["concurrency"], r["n_prompt"], r["n_gen"],
                    r["aggregate_tps"], r["per_request_tps"], r["all_decoding_tps"],
                    r["ttft_mean_s"], r["wall_s"]]
            lines.setdefault(model, []).append(
                (int(r["concurrency"]), f"r{rnd} {SETTINGS[key]} c{r['concurrency']}: | " +
                 " | ".join(str(c) for c in cols) + " |\n"))
for model, rows in lines.items():
    with open(f"engine-{model}.txt", "w", encoding="utf-8") as out:
        out.writelines(line for _, line in sorted(rows, key=lambda x: x[0]))
