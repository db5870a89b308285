/* cuda_bandwidth.h — the GPU's copy bandwidth (cuda_bandwidth.c), the CUDA backend's
 * si_backend.copy_bandwidth */
#ifndef SI_BACKEND_CUDA_BANDWIDTH_H
#define SI_BACKEND_CUDA_BANDWIDTH_H

#include <stddef.h>

#include "swiftinfer.h"

/* The best and mean of `runs` device-to-device copies of `bytes` (after one untimed), in 1e9
 * bytes read plus written a second; SI_ERR_NOMEM when two buffers of `bytes` do not fit. */
si_status cuda_copy_bandwidth(size_t bytes, int runs, double *best_gbps, double *mean_gbps);

#endif
