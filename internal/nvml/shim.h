// The NVML shim: libnvidia-ml loaded with dlopen and the few entry points
// Query reads, each resolved by name (the versioned one first). The types
// are declared here rather than taken from nvml.h, which marks old entry
// points deprecated and so made every cold build print gcc's warnings.
#ifndef FCSP_NVML_SHIM_H
#define FCSP_NVML_SHIM_H

typedef void *fcsp_nvml_device; // nvmlDevice_t

typedef struct { // nvmlMemory_t (v1)
	unsigned long long total, free, used;
} fcsp_nvml_memory;

typedef struct { // nvmlUtilization_t
	unsigned int gpu, memory;
} fcsp_nvml_utilization;

typedef struct { // nvmlProcessInfo_t (v2, which _v3 takes too)
	unsigned int pid;
	unsigned long long used; // usedGpuMemory; ~0: NVML_VALUE_NOT_AVAILABLE
	unsigned int gpuInstanceId, computeInstanceId;
} fcsp_nvml_process;

typedef struct fcsp_nvml fcsp_nvml;

// fcsp_nvml_open loads the library at path and resolves its entry points;
// on failure it returns null with dlerror's text in err.
fcsp_nvml *fcsp_nvml_open(const char *path, char *err, int errlen);

// Each returns NVML's nvmlReturn_t, or NVML_ERROR_FUNCTION_NOT_FOUND (13)
// where the library lacks the entry point.
int fcsp_nvml_init(fcsp_nvml *l);
int fcsp_nvml_shutdown(fcsp_nvml *l);
int fcsp_nvml_driver_version(fcsp_nvml *l, char *buf, unsigned len);
int fcsp_nvml_device_by_uuid(fcsp_nvml *l, const char *uuid, fcsp_nvml_device *d);
int fcsp_nvml_name(fcsp_nvml *l, fcsp_nvml_device d, char *buf, unsigned len);
int fcsp_nvml_memory_info(fcsp_nvml *l, fcsp_nvml_device d, fcsp_nvml_memory *m);
int fcsp_nvml_utilization_rates(fcsp_nvml *l, fcsp_nvml_device d, fcsp_nvml_utilization *u);
int fcsp_nvml_clock(fcsp_nvml *l, fcsp_nvml_device d, int type, unsigned *mhz);
int fcsp_nvml_max_clock(fcsp_nvml *l, fcsp_nvml_device d, int type, unsigned *mhz);
int fcsp_nvml_power_usage(fcsp_nvml *l, fcsp_nvml_device d, unsigned *mw);
int fcsp_nvml_power_limit(fcsp_nvml *l, fcsp_nvml_device d, unsigned *mw);
int fcsp_nvml_clock_reasons(fcsp_nvml *l, fcsp_nvml_device d, unsigned long long *r);
// fcsp_nvml_processes lists the device's compute processes into infos (of
// *count); NVML_ERROR_INSUFFICIENT_SIZE (7) sets *count to the room needed.
int fcsp_nvml_processes(fcsp_nvml *l, fcsp_nvml_device d, unsigned *count, fcsp_nvml_process *infos);
#endif
