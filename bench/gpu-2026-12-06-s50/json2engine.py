#!/usr/bin/env python3
"""json2engine.py DIR TYPE... — the `swiftinfer bench -c ... --json` files of calls 1-2
(DIR/c-TYPE-SETTING.json) as bench/plot_concurrency.py's log lines, one engine-TYPE.txt each:
SI_NONE-0 is the default (gemv=one-launch), SI_CUDA_GEMV_TC16-0 two launches (s49's code),
SI_CUDA_GEMV_WIDE-0 the batched matmul."""
import json
import os
import sys

SETTINGS = {"SI_NONE-0": "gemv=one-launch", "SI_CUDA_GEMV_TC16-0": "gemv=two-launches",
            "SI_CUDA_GEMV_WIDE-0": "gemv=matmul"}
d = sys.argv[1]
for t in sys.argv[2:]:
    with open(f"engine-{t}.txt", "w", encoding="utf-8") as out:
        for key, setting in SETTINGS.items():
            path = os.path.join(d, f"c-{t}-{key}.json")
            if not os.path.exists(path):
                continue
            for r in json.load(open(path, encoding="utf-8")):
                cols = [r["model"], r["threads"], r["concurrency"], r["n_prompt"], r["n_gen"],
                        r["aggregate_tps"], r["per_request_tps"], r["all_decoding_tps"],
                        r["ttft_mean_s"], r["wall_s"]]
                out.write(f"r1 {setting} c{r['concurrency']}: | " +
                          " | ".join(str(c) for c in cols) + " |\n")
