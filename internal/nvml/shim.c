//go:build cgo && linux

#include "shim.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define FUNCTION_NOT_FOUND 13 // NVML_ERROR_FUNCTION_NOT_FOUND

// One loaded library: its handle and entry points, written once by
// fcsp_nvml_open and only read afterwards, so calls from many threads need
// no lock (NVML itself is thread-safe).
struct fcsp_nvml {
	void *h;
	int (*init)(void);
	int (*shutdown)(void);
	int (*driver_version)(char *, unsigned);
	int (*device_by_uuid)(const char *, fcsp_nvml_device *);
	int (*name)(fcsp_nvml_device, char *, unsigned);
	int (*memory_info)(fcsp_nvml_device, fcsp_nvml_memory *);
	int (*utilization)(fcsp_nvml_device, fcsp_nvml_utilization *);
	int (*clock)(fcsp_nvml_device, int, unsigned *);
	int (*max_clock)(fcsp_nvml_device, int, unsigned *);
	int (*power_usage)(fcsp_nvml_device, unsigned *);
	int (*power_limit)(fcsp_nvml_device, unsigned *);
	int (*clock_reasons)(fcsp_nvml_device, unsigned long long *);
	int (*processes)(fcsp_nvml_device, unsigned *, fcsp_nvml_process *);
};

// sym resolves the first of two names the library has (b may be null):
// the current name first, the one older drivers export second.
static void *sym(void *h, const char *a, const char *b) {
	void *p = dlsym(h, a);
	if (!p && b) p = dlsym(h, b);
	return p;
}

fcsp_nvml *fcsp_nvml_open(const char *path, char *err, int errlen) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return NULL;
	}
	fcsp_nvml *l = calloc(1, sizeof *l);
	if (!l) {
		dlclose(h);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	l->h = h;
	l->init = sym(h, "nvmlInit_v2", "nvmlInit");
	l->shutdown = sym(h, "nvmlShutdown", NULL);
	l->driver_version = sym(h, "nvmlSystemGetDriverVersion", NULL);
	l->device_by_uuid = sym(h, "nvmlDeviceGetHandleByUUID", NULL);
	l->name = sym(h, "nvmlDeviceGetName", NULL);
	l->memory_info = sym(h, "nvmlDeviceGetMemoryInfo", NULL);
	l->utilization = sym(h, "nvmlDeviceGetUtilizationRates", NULL);
	l->clock = sym(h, "nvmlDeviceGetClockInfo", NULL);
	l->max_clock = sym(h, "nvmlDeviceGetMaxClockInfo", NULL);
	l->power_usage = sym(h, "nvmlDeviceGetPowerUsage", NULL);
	l->power_limit = sym(h, "nvmlDeviceGetEnforcedPowerLimit", NULL);
	// The same bits under their new name (drivers 535 on) and their old.
	l->clock_reasons = sym(h, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
	// v3 and v2 take the same struct; v1's (without the instance ids) is
	// not declared here.
	l->processes = sym(h, "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2");
	return l;
}

#define CALL(p, ...) return l->p ? l->p(__VA_ARGS__) : FUNCTION_NOT_FOUND

int fcsp_nvml_init(fcsp_nvml *l) { return l->init ? l->init() : FUNCTION_NOT_FOUND; }
int fcsp_nvml_shutdown(fcsp_nvml *l) { return l->shutdown ? l->shutdown() : FUNCTION_NOT_FOUND; }
int fcsp_nvml_driver_version(fcsp_nvml *l, char *buf, unsigned len) { CALL(driver_version, buf, len); }
int fcsp_nvml_device_by_uuid(fcsp_nvml *l, const char *uuid, fcsp_nvml_device *d) { CALL(device_by_uuid, uuid, d); }
int fcsp_nvml_name(fcsp_nvml *l, fcsp_nvml_device d, char *buf, unsigned len) { CALL(name, d, buf, len); }
int fcsp_nvml_memory_info(fcsp_nvml *l, fcsp_nvml_device d, fcsp_nvml_memory *m) { CALL(memory_info, d, m); }
int fcsp_nvml_utilization_rates(fcsp_nvml *l, fcsp_nvml_device d, fcsp_nvml_utilization *u) { CALL(utilization, d, u); }
int fcsp_nvml_clock(fcsp_nvml *l, fcsp_nvml_device d, int type, unsigned *mhz) { CALL(clock, d, type, mhz); }
int fcsp_nvml_max_clock(fcsp_nvml *l, fcsp_nvml_device d, int type, unsigned *mhz) { CALL(max_clock, d, type, mhz); }
int fcsp_nvml_power_usage(fcsp_nvml *l, fcsp_nvml_device d, unsigned *mw) { CALL(power_usage, d, mw); }
int fcsp_nvml_power_limit(fcsp_nvml *l, fcsp_nvml_device d, unsigned *mw) { CALL(power_limit, d, mw); }
int fcsp_nvml_clock_reasons(fcsp_nvml *l, fcsp_nvml_device d, unsigned long long *r) { CALL(clock_reasons, d, r); }
int fcsp_nvml_processes(fcsp_nvml *l, fcsp_nvml_device d, unsigned *count, fcsp_nvml_process *infos) { CALL(processes, d, count, infos); }
