"""GPUs from NVML: each whole GPU with its PCI address and NUMA node, and its MIG devices.

The pynvml module is passed in (tests pass tests/fakes/nvml.py), so the probe runs anywhere;
both raise pynvml's own ``NVMLError`` subclasses.

A host without the library or the driver simply has no GPUs. Any other NVML failure gives
no GPUs at all plus a problem: a partial list would look like a smaller, healthy host, and
nobody could tell which GPUs were missing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias

import pynvml

from shared.inventory import MIG_PROFILE_PATTERN, Gpu, MigDevice
from shared.logs import get_logger

log = get_logger("allot.agent.discovery")

NvmlHandle: TypeAlias = object  # opaque: pynvml's c_nvmlDevice_t, or the fake's handle


class NvmlMemory(Protocol):
    @property
    def total(self) -> int: ...


class NvmlPciInfo(Protocol):
    @property
    def busId(self) -> str | bytes: ...  # str from recent pynvml (13.x), bytes from older


class NvmlApi(Protocol):
    """The part of pynvml the probe calls; the module itself fits (arguments are positional)."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int, /) -> NvmlHandle: ...
    def nvmlDeviceGetUUID(self, handle: NvmlHandle, /) -> str: ...
    def nvmlDeviceGetName(self, handle: NvmlHandle, /) -> str: ...
    def nvmlDeviceGetMemoryInfo(self, handle: NvmlHandle, /) -> NvmlMemory: ...
    def nvmlDeviceGetPciInfo(self, handle: NvmlHandle, /) -> NvmlPciInfo: ...
    def nvmlDeviceGetMigMode(self, device: NvmlHandle, /) -> Sequence[int]: ...
    def nvmlDeviceGetMaxMigDeviceCount(self, device: NvmlHandle, /) -> int: ...
    def nvmlDeviceGetMigDeviceHandleByIndex(
        self, device: NvmlHandle, index: int, /
    ) -> NvmlHandle: ...
    def nvmlDeviceGetGpuInstanceId(self, device: NvmlHandle, /) -> int: ...
    def nvmlDeviceGetComputeInstanceId(self, device: NvmlHandle, /) -> int: ...


@dataclass(frozen=True)
class GpuReport:
    gpus: list[Gpu]
    driver_version: str  # "" when there is no driver
    problems: list[str]  # non-empty => the node is degraded, for these reasons


class NvmlValueError(ValueError):
    """NVML answered with a value the probe cannot read."""


_ABSENT = {
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: "no NVIDIA management library (libnvidia-ml.so.1)",
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED: "no NVIDIA driver",
}
_REASONS = {
    pynvml.NVML_ERROR_NO_PERMISSION: "insufficient permissions to query GPUs",
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: "NVML library and kernel driver versions differ",
}
_NVML_BUS_ID = re.compile(r"([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])")
_MIG_PROFILE = re.compile(MIG_PROFILE_PATTERN)


def probe_gpus(nvml: NvmlApi, read_pci_numa: Callable[[str], int | None]) -> GpuReport:
    """The host's GPUs as NVML sees them; NVML errors end up in ``problems``, never raised.

    ``read_pci_numa`` gives the NUMA node of a sysfs PCI address ("0000:3b:00.0"); what it
    raises passes through, after NVML is shut down.
    """
    try:
        nvml.nvmlInit()
    except pynvml.NVMLError as error:
        return _without_nvml(error)
    try:
        return _read_report(nvml, read_pci_numa)
    finally:
        _shutdown(nvml)


def sysfs_pci_address(nvml_bus_id: str | bytes) -> str:
    """NVML's bus id ("00000000:3B:00.0") as sysfs names the device ("0000:3b:00.0").

    The kernel prints the domain with %04x, so a domain above 0xffff (Intel VMD) keeps
    its extra digits.
    """
    if isinstance(nvml_bus_id, bytes):
        nvml_bus_id = nvml_bus_id.decode("ascii", errors="replace")
    match = _NVML_BUS_ID.fullmatch(nvml_bus_id)
    if match is None:
        raise NvmlValueError(f"unrecognised PCI bus id {nvml_bus_id!r}")
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"


def mig_profile(mig_device_name: str) -> str:
    """The profile NVML puts after " MIG " in a MIG device's name, e.g. "1g.10gb+me"."""
    _, marker, profile = mig_device_name.rpartition(" MIG ")
    if not marker or _MIG_PROFILE.fullmatch(profile) is None:
        raise NvmlValueError(f"no MIG profile in MIG device name {mig_device_name!r}")
    return profile


def _without_nvml(error: Exception) -> GpuReport:
    absent = _ABSENT.get(getattr(error, "value", None))
    if absent is None:
        return _degraded(_describe(error), driver_version="")
    log.info(f"{absent}; no GPUs offered")
    return GpuReport(gpus=[], driver_version="", problems=[])


def _read_report(nvml: NvmlApi, read_pci_numa: Callable[[str], int | None]) -> GpuReport:
    driver_version = ""
    where = ""
    gpus: list[Gpu] = []
    try:
        driver_version = nvml.nvmlSystemGetDriverVersion()
        for index in range(nvml.nvmlDeviceGetCount()):
            where = f"GPU {index}: "
            gpus.append(_read_gpu(nvml, index, read_pci_numa))
    except (pynvml.NVMLError, NvmlValueError) as error:
        return _degraded(where + _describe(error), driver_version)
    return GpuReport(gpus=gpus, driver_version=driver_version, problems=[])


def _read_gpu(nvml: NvmlApi, index: int, read_pci_numa: Callable[[str], int | None]) -> Gpu:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    uuid = nvml.nvmlDeviceGetUUID(handle)
    pci_bus_id = sysfs_pci_address(nvml.nvmlDeviceGetPciInfo(handle).busId)
    mig_enabled = _mig_enabled(nvml, handle, index, uuid)
    return Gpu(
        index=index,
        uuid=uuid,
        name=nvml.nvmlDeviceGetName(handle),
        memory=nvml.nvmlDeviceGetMemoryInfo(handle).total,
        pci_bus_id=pci_bus_id,
        numa=_numa_node(read_pci_numa(pci_bus_id)),
        mig_enabled=mig_enabled,
        mig_devices=_read_mig_devices(nvml, handle) if mig_enabled else [],
    )


def _mig_enabled(nvml: NvmlApi, handle: NvmlHandle, index: int, uuid: str) -> bool:
    try:
        current, pending = nvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError_NotSupported:
        return False  # a GPU without MIG
    if pending != current:
        log.warning(
            "GPU MIG mode change waits for a GPU reset", gpu=index, uuid=uuid, pending=pending
        )
    return bool(current == pynvml.NVML_DEVICE_MIG_ENABLE)


def _read_mig_devices(nvml: NvmlApi, gpu: NvmlHandle) -> list[MigDevice]:
    devices: list[MigDevice] = []
    for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(gpu)):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, slot)
        except pynvml.NVMLError_NotFound:
            continue  # no MIG device in this slot
        devices.append(
            MigDevice(
                uuid=nvml.nvmlDeviceGetUUID(mig),
                profile=mig_profile(nvml.nvmlDeviceGetName(mig)),
                gpu_instance_id=nvml.nvmlDeviceGetGpuInstanceId(mig),
                compute_instance_id=nvml.nvmlDeviceGetComputeInstanceId(mig),
                memory=nvml.nvmlDeviceGetMemoryInfo(mig).total,
            )
        )
    return sorted(devices, key=lambda mig: (mig.gpu_instance_id, mig.compute_instance_id))


def _numa_node(node: int | None) -> int | None:
    """The kernel writes -1 when the platform does not place the device on a node."""
    return None if node is None or node < 0 else node


def _shutdown(nvml: NvmlApi) -> None:
    try:
        nvml.nvmlShutdown()
    except pynvml.NVMLError as error:
        log.warning("NVML shutdown failed", error=_describe(error))


def _degraded(problem: str, driver_version: str) -> GpuReport:
    log.warning("GPU discovery failed; no GPUs offered", problem=problem)
    return GpuReport(gpus=[], driver_version=driver_version, problems=[f"NVML: {problem}"])


def _describe(error: Exception) -> str:
    if isinstance(error, pynvml.NVMLError):
        return f"{_REASONS.get(error.value, str(error))} ({type(error).__name__})"
    return str(error)
