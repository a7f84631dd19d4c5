"""Hardware discovery: CPU topology and NUMA from sysfs (psutil as fallback), GPUs from NVML."""
