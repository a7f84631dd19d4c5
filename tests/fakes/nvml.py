"""A stand-in for the pynvml functions the GPU probe calls, over a list of fake GPUs.

It behaves like the real library where the probe could tell the difference: it raises
pynvml's own error classes, refuses every device call outside nvmlInit/nvmlShutdown
(the init count is kept like NVML's), returns pynvml's ctypes structs and str where pynvml
does, and hands out opaque handles. Every call is recorded by name in ``calls``.

Failures are injected per function name: ``FakeNvml.failures`` for every call of that
name, ``FakeGpu.failures`` for calls about that GPU or its MIG devices (a lost GPU loses
its MIG devices too).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pynvml

from agent.discovery.gpu import NvmlMemory, NvmlPciInfo

MIB = 1 << 20
GIB = 1 << 30
MAX_MIG_DEVICES = 7  # A100 and H100 alike


@dataclass
class FakeMigDevice:
    uuid: str  # "MIG-..."
    name: str  # e.g. "NVIDIA A100-SXM4-80GB MIG 1g.10gb"
    gpu_instance_id: int
    compute_instance_id: int
    memory: int  # bytes


@dataclass
class FakeGpu:
    name: str
    uuid: str  # "GPU-..."
    memory: int  # bytes
    pci_bus_id: str  # NVML form: "00000000:3B:00.0"
    mig_capable: bool = False
    mig_current: int = pynvml.NVML_DEVICE_MIG_DISABLE
    mig_pending: int = pynvml.NVML_DEVICE_MIG_DISABLE
    max_mig_devices: int = 0  # what the hardware allows while MIG is enabled
    mig_slots: dict[int, FakeMigDevice] = field(default_factory=dict)  # slot -> device
    failures: dict[str, int] = field(default_factory=dict)  # function name -> NVML error code


class FakeHandle:
    """Opaque like pynvml's c_nvmlDevice_t: only the fake that made it can read it."""

    __slots__ = ("gpu", "mig", "owner")

    def __init__(self, owner: FakeNvml, gpu: FakeGpu, mig: FakeMigDevice | None) -> None:
        self.owner = owner
        self.gpu = gpu
        self.mig = mig


def nvml_error(code: int) -> pynvml.NVMLError:
    """The exception pynvml raises for ``code``: the matching NVMLError subclass."""
    return pynvml.NVMLError(code)


@dataclass
class FakeNvml:
    gpus: list[FakeGpu] = field(default_factory=list)
    driver_version: str = ""
    failures: dict[str, int] = field(default_factory=dict)  # function name -> NVML error code
    calls: list[str] = field(default_factory=list)
    init_count: int = 0

    def fail(self, function: str, code: int, gpu: int | None = None) -> None:
        """Make ``function`` raise NVML error ``code``, for one GPU or for all calls."""
        if not function.startswith("nvml") or not callable(getattr(self, function, None)):
            raise ValueError(f"the fake has no NVML function {function!r}")
        failures = self.failures if gpu is None else self.gpus[gpu].failures
        failures[function] = code

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        self._raise_injected("nvmlInit", self.failures)
        self.init_count += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int, /) -> object:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[index]
        self._raise_injected("nvmlDeviceGetHandleByIndex", gpu.failures)
        return FakeHandle(self, gpu, mig=None)

    def nvmlDeviceGetUUID(self, handle: object, /) -> str:
        target = self._device("nvmlDeviceGetUUID", handle)
        return target.mig.uuid if target.mig else target.gpu.uuid

    def nvmlDeviceGetName(self, handle: object, /) -> str:
        target = self._device("nvmlDeviceGetName", handle)
        return target.mig.name if target.mig else target.gpu.name

    def nvmlDeviceGetMemoryInfo(self, handle: object, /) -> NvmlMemory:
        target = self._device("nvmlDeviceGetMemoryInfo", handle)
        total = target.mig.memory if target.mig else target.gpu.memory
        memory: NvmlMemory = pynvml.c_nvmlMemory_t(total=total, free=total, used=0)  # idle
        return memory

    def nvmlDeviceGetPciInfo(self, handle: object, /) -> NvmlPciInfo:
        gpu = self._whole_gpu("nvmlDeviceGetPciInfo", handle)
        domain, bus, device_function = gpu.pci_bus_id.split(":")
        device = device_function.split(".")[0]
        info: NvmlPciInfo = pynvml.nvmlPciInfo_t(
            busIdLegacy=f"{domain[-4:]}:{bus}:{device_function}".encode(),
            domain=int(domain, 16),
            bus=int(bus, 16),
            device=int(device, 16),
            busId=gpu.pci_bus_id.encode(),
        )
        return info

    def nvmlDeviceGetMigMode(self, device: object, /) -> list[int]:
        gpu = self._mig_capable_gpu("nvmlDeviceGetMigMode", device)
        return [gpu.mig_current, gpu.mig_pending]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: object, /) -> int:
        return _mig_slot_count(self._mig_capable_gpu("nvmlDeviceGetMaxMigDeviceCount", device))

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: object, index: int, /) -> object:
        gpu = self._whole_gpu("nvmlDeviceGetMigDeviceHandleByIndex", device)
        if not 0 <= index < _mig_slot_count(gpu):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if index not in gpu.mig_slots:
            raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        return FakeHandle(self, gpu, gpu.mig_slots[index])

    def nvmlDeviceGetGpuInstanceId(self, device: object, /) -> int:
        return self._mig_device("nvmlDeviceGetGpuInstanceId", device).gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, device: object, /) -> int:
        return self._mig_device("nvmlDeviceGetComputeInstanceId", device).compute_instance_id

    def _enter(self, function: str) -> None:
        self.calls.append(function)
        if self.init_count == 0:
            raise nvml_error(pynvml.NVML_ERROR_UNINITIALIZED)
        self._raise_injected(function, self.failures)

    def _device(self, function: str, handle: object) -> FakeHandle:
        self._enter(function)
        if not isinstance(handle, FakeHandle) or handle.owner is not self:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self._raise_injected(function, handle.gpu.failures)
        return handle

    def _whole_gpu(self, function: str, handle: object) -> FakeGpu:
        target = self._device(function, handle)
        if target.mig is not None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return target.gpu

    def _mig_capable_gpu(self, function: str, handle: object) -> FakeGpu:
        gpu = self._whole_gpu(function, handle)
        if not gpu.mig_capable:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def _mig_device(self, function: str, handle: object) -> FakeMigDevice:
        target = self._device(function, handle)
        if target.mig is None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return target.mig

    @staticmethod
    def _raise_injected(function: str, failures: dict[str, int]) -> None:
        if function in failures:
            raise nvml_error(failures[function])


def _mig_slot_count(gpu: FakeGpu) -> int:
    """Like NVML: the hardware's maximum while MIG is enabled, 0 while it is not."""
    return gpu.max_mig_devices if gpu.mig_current == pynvml.NVML_DEVICE_MIG_ENABLE else 0


def fake_uuid(prefix: str, seed: str) -> str:
    """A stable made-up UUID in NVML's format: "GPU-<uuid>" or "MIG-<uuid>"."""
    return f"{prefix}-{uuid.uuid5(uuid.NAMESPACE_URL, f'allot-fake-nvml/{seed}')}"


H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
# Where a DGX H100 puts its eight GPUs: four behind each CPU socket.
H100_BUS_IDS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
# A100 80GB MIG memory by profile, as NVML reports it for each MIG device.
A100_MIG_MEMORY = {
    "1g.10gb": 9728 * MIB,
    "1g.10gb+me": 9728 * MIB,
    "2g.20gb": 19968 * MIB,
    "3g.40gb": 40192 * MIB,
    "4g.40gb": 40192 * MIB,
}


def eight_whole_gpus() -> FakeNvml:
    """A DGX H100: eight MIG-capable GPUs with MIG off, across two NUMA nodes."""
    gpus = [
        FakeGpu(
            name=H100,
            uuid=fake_uuid("GPU", f"h100-{index}"),
            memory=80 * GIB,
            pci_bus_id=f"00000000:{bus}:00.0",
            mig_capable=True,
            max_mig_devices=MAX_MIG_DEVICES,
        )
        for index, bus in enumerate(H100_BUS_IDS)
    ]
    return FakeNvml(gpus=gpus, driver_version="550.54.15")


# How the fixture partitions each A100: (MIG device slot, profile, GPU instance id), each
# GPU instance with one compute instance (id 0). Slots not listed are empty, and slots are
# not in GPU instance order, which NVML does not promise.
A100_PARTITIONS = (
    # 3g.40gb + 2g.20gb + 1g.10gb + 1g.10gb: all 7 compute slices
    ((0, "1g.10gb", 9), (1, "3g.40gb", 1), (3, "2g.20gb", 3), (5, "1g.10gb", 10)),
    # 4g.40gb + 1g.10gb+me + 1g.10gb: 6 of 7 compute slices
    ((0, "1g.10gb", 12), (2, "4g.40gb", 1), (4, "1g.10gb+me", 11)),
)


def a100_mig_slots(
    gpu: int, partition: tuple[tuple[int, str, int], ...]
) -> dict[int, FakeMigDevice]:
    return {
        slot: FakeMigDevice(
            uuid=fake_uuid("MIG", f"a100-{gpu}-gi{gpu_instance_id}"),
            name=f"{A100} MIG {profile}",
            gpu_instance_id=gpu_instance_id,
            compute_instance_id=0,
            memory=A100_MIG_MEMORY[profile],
        )
        for slot, profile, gpu_instance_id in partition
    }


def two_gpus_mig_mixed() -> FakeNvml:
    """Two A100 80GB in MIG mode, partitioned as in A100_PARTITIONS."""
    gpus = [
        FakeGpu(
            name=A100,
            uuid=fake_uuid("GPU", f"a100-{index}"),
            memory=80 * GIB,
            pci_bus_id=f"00000000:{bus}:00.0",
            mig_capable=True,
            mig_current=pynvml.NVML_DEVICE_MIG_ENABLE,
            mig_pending=pynvml.NVML_DEVICE_MIG_ENABLE,
            max_mig_devices=MAX_MIG_DEVICES,
            mig_slots=a100_mig_slots(index, partition),
        )
        for index, (bus, partition) in enumerate(zip(("07", "0F"), A100_PARTITIONS, strict=True))
    ]
    return FakeNvml(gpus=gpus, driver_version="535.161.08")


def failing_init(code: int, gpus: list[FakeGpu] | None = None) -> FakeNvml:
    """A host whose nvmlInit fails with NVML error ``code``."""
    return FakeNvml(gpus=gpus or [], failures={"nvmlInit": code})


def no_library() -> FakeNvml:
    return failing_init(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)


def no_driver() -> FakeNvml:
    return failing_init(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)


def no_permission() -> FakeNvml:
    """GPUs present, but /dev/nvidiactl is not open to the agent."""
    return failing_init(pynvml.NVML_ERROR_NO_PERMISSION, eight_whole_gpus().gpus)


def version_mismatch() -> FakeNvml:
    """The driver was upgraded but the old kernel module is still loaded."""
    return failing_init(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, eight_whole_gpus().gpus)
