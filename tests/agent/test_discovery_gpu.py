from __future__ import annotations

import ctypes.util
import dataclasses
import logging
from collections.abc import Callable

import pynvml
import pytest

from agent.discovery.gpu import (
    GpuReport,
    NvmlValueError,
    mig_profile,
    probe_gpus,
    sysfs_pci_address,
)
from shared.inventory import MigDevice
from tests.fakes import nvml as fakes
from tests.fakes.nvml import FakeGpu, FakeNvml

GIB = 1 << 30
MIB = 1 << 20
LOGGER = "allot.agent.discovery"

# What sysfs says about the DGX H100 fixture: numa_node of each GPU's PCI device.
H100_NUMA = {
    "0000:18:00.0": 0,
    "0000:2a:00.0": 0,
    "0000:3a:00.0": 0,
    "0000:5d:00.0": 0,
    "0000:9a:00.0": 1,
    "0000:ab:00.0": 1,
    "0000:ba:00.0": 1,
    "0000:db:00.0": 1,
}


def numa_by_address(table: dict[str, int]) -> Callable[[str], int | None]:
    return table.get


def no_numa(address: str) -> int | None:
    return None


@pytest.fixture
def logs(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> pytest.LogCaptureFixture:
    """caplog on the discovery logger, even after a test configured "allot" not to propagate."""
    monkeypatch.setattr(logging.getLogger("allot"), "propagate", True)
    caplog.set_level(logging.INFO, logger=LOGGER)
    return caplog


def logged(caplog: pytest.LogCaptureFixture, level: int) -> list[tuple[str, dict[str, object]]]:
    """(message, key=value fields) of each discovery log line at ``level``."""
    return [
        (record.getMessage(), getattr(record, "allot_fields", {}))
        for record in caplog.records
        if record.name == LOGGER and record.levelno == level
    ]


def probe(fake: FakeNvml, numa: Callable[[str], int | None] = no_numa) -> GpuReport:
    return probe_gpus(fake, numa)


def assert_paired(fake: FakeNvml) -> None:
    assert fake.calls[0] == "nvmlInit"
    assert fake.calls[-1] == "nvmlShutdown"
    assert fake.calls.count("nvmlInit") == fake.calls.count("nvmlShutdown") == 1
    assert fake.init_count == 0


# --- the bus id and MIG name conversions ---------------------------------------------


@pytest.mark.parametrize(
    ("nvml_form", "sysfs_form"),
    [
        pytest.param(b"00000000:3B:00.0", "0000:3b:00.0", id="bytes-older-pynvml"),
        pytest.param("00000000:3B:00.0", "0000:3b:00.0", id="str-recent-pynvml"),
        pytest.param("00000000:DB:00.0", "0000:db:00.0", id="upper-bus"),
        pytest.param("00000001:AF:1F.7", "0001:af:1f.7", id="domain-device-function"),
        pytest.param("00010000:01:00.0", "10000:01:00.0", id="vmd-domain-over-16-bits"),
        pytest.param("0000:3B:00.0", "0000:3b:00.0", id="legacy-4-digit-domain"),
    ],
)
def test_sysfs_pci_address(nvml_form: str | bytes, sysfs_form: str) -> None:
    assert sysfs_pci_address(nvml_form) == sysfs_form


@pytest.mark.parametrize(
    "nvml_form",
    [
        pytest.param("", id="empty"),
        pytest.param("3B:00.0", id="no-domain"),
        pytest.param("00000000:3B:00", id="no-function"),
        pytest.param("00000000:3G:00.0", id="not-hex"),
        pytest.param("00000000:3B:00.8", id="function-over-7"),
        pytest.param(b"\xff0000000:3B:00.0", id="not-ascii"),
    ],
)
def test_sysfs_pci_address_rejects(nvml_form: str | bytes) -> None:
    with pytest.raises(NvmlValueError, match="unrecognised PCI bus id"):
        sysfs_pci_address(nvml_form)


@pytest.mark.parametrize(
    ("name", "profile"),
    [
        pytest.param("NVIDIA A100-SXM4-80GB MIG 1g.10gb", "1g.10gb", id="1g"),
        pytest.param("NVIDIA A100-SXM4-80GB MIG 1g.10gb+me", "1g.10gb+me", id="media"),
        pytest.param("NVIDIA A100-SXM4-80GB MIG 3g.40gb", "3g.40gb", id="3g"),
        pytest.param("NVIDIA H100 80GB HBM3 MIG 7g.80gb", "7g.80gb", id="h100-whole"),
        pytest.param("NVIDIA H200 MIG 1g.18gb", "1g.18gb", id="h200"),
        pytest.param(
            "NVIDIA A100-SXM4-80GB MIG 1c.2g.20gb", "1c.2g.20gb", id="compute-instance-slice"
        ),
        pytest.param("NVIDIA RTX PRO 6000 MIG 1g.24gb+gfx", "1g.24gb+gfx", id="gfx-suffix"),
        pytest.param("NVIDIA B200 MIG 1g.23gb+me.all", "1g.23gb+me.all", id="me-all-suffix"),
    ],
)
def test_mig_profile(name: str, profile: str) -> None:
    assert mig_profile(name) == profile


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("NVIDIA A100-SXM4-80GB", id="no-mig-marker"),
        pytest.param("NVIDIA A100-SXM4-80GB MIG ", id="nothing-after-marker"),
        pytest.param("NVIDIA A100-SXM4-80GB MIG 0g.10gb", id="zero-slices"),
        pytest.param("NVIDIA A100-SXM4-80GB MIG 1g.10GB", id="upper-case"),
        pytest.param("NVIDIA A100-SXM4-80GB MIG 1g.10gb+", id="empty-suffix"),
        pytest.param("NVIDIA A100-SXM4-80GB MIG 1g.10gb junk", id="trailing-words"),
    ],
)
def test_mig_profile_rejects(name: str) -> None:
    with pytest.raises(NvmlValueError, match="no MIG profile"):
        mig_profile(name)


# --- whole GPUs ----------------------------------------------------------------------


def test_eight_whole_gpus_are_all_reported() -> None:
    fake = fakes.eight_whole_gpus()
    report = probe(fake, numa_by_address(H100_NUMA))

    assert report.problems == []
    assert report.driver_version == "550.54.15"
    assert [gpu.index for gpu in report.gpus] == list(range(8))
    assert [gpu.uuid for gpu in report.gpus] == [gpu.uuid for gpu in fake.gpus]
    assert all(gpu.uuid.startswith("GPU-") for gpu in report.gpus)
    assert {gpu.name for gpu in report.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert {gpu.memory for gpu in report.gpus} == {85899345920}
    assert [gpu.pci_bus_id for gpu in report.gpus] == list(H100_NUMA)
    assert [gpu.numa for gpu in report.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert not any(gpu.mig_enabled or gpu.mig_devices for gpu in report.gpus)
    assert_paired(fake)


def test_numa_is_looked_up_by_sysfs_address() -> None:
    asked: list[str] = []

    def read_pci_numa(address: str) -> int | None:
        asked.append(address)
        return H100_NUMA[address]

    probe(fakes.eight_whole_gpus(), read_pci_numa)

    assert asked == list(H100_NUMA)


@pytest.mark.parametrize(
    ("numa_node", "expected"),
    [
        pytest.param(-1, None, id="kernel-says-minus-1"),
        pytest.param(None, None, id="no-numa_node-file"),
        pytest.param(0, 0, id="node-0"),
        pytest.param(3, 3, id="node-3"),
    ],
)
def test_numa_node_without_platform_answer_is_none(
    numa_node: int | None, expected: int | None
) -> None:
    report = probe(fakes.eight_whole_gpus(), lambda address: numa_node)

    assert [gpu.numa for gpu in report.gpus] == [expected] * 8


def test_gpu_without_mig_support_is_whole() -> None:
    l4 = FakeGpu(name="NVIDIA L4", uuid="GPU-l4", memory=23034 * MIB, pci_bus_id="00000000:C1:00.0")
    fake = FakeNvml(gpus=[l4], driver_version="550.54.15")

    report = probe(fake)

    assert report.problems == []
    assert [(gpu.name, gpu.mig_enabled, gpu.mig_devices) for gpu in report.gpus] == [
        ("NVIDIA L4", False, [])
    ]
    assert "nvmlDeviceGetMaxMigDeviceCount" not in fake.calls


# --- MIG -----------------------------------------------------------------------------

# (profile, gpu instance id, compute instance id, memory), in the order the probe reports.
A100_MIG_LAYOUT = {
    0: [
        ("3g.40gb", 1, 0, 40192 * MIB),
        ("2g.20gb", 3, 0, 19968 * MIB),
        ("1g.10gb", 9, 0, 9728 * MIB),
        ("1g.10gb", 10, 0, 9728 * MIB),
    ],
    1: [
        ("4g.40gb", 1, 0, 40192 * MIB),
        ("1g.10gb+me", 11, 0, 9728 * MIB),
        ("1g.10gb", 12, 0, 9728 * MIB),
    ],
}


def layout(devices: list[MigDevice]) -> list[tuple[str, int, int, int]]:
    return [
        (mig.profile, mig.gpu_instance_id, mig.compute_instance_id, mig.memory) for mig in devices
    ]


@pytest.mark.parametrize(
    ("index", "pci_bus_id"),
    [pytest.param(0, "0000:07:00.0", id="gpu0"), pytest.param(1, "0000:0f:00.0", id="gpu1")],
)
def test_mig_devices_in_instance_order(index: int, pci_bus_id: str) -> None:
    fake = fakes.two_gpus_mig_mixed()
    report = probe(fake, numa_by_address({"0000:07:00.0": 0, "0000:0f:00.0": 0}))
    gpu = report.gpus[index]
    by_gi = {mig.gpu_instance_id: mig for mig in fake.gpus[index].mig_slots.values()}

    assert report.problems == []
    assert (gpu.name, gpu.memory, gpu.pci_bus_id, gpu.numa) == (
        "NVIDIA A100-SXM4-80GB",
        80 * GIB,
        pci_bus_id,
        0,
    )
    assert gpu.mig_enabled
    assert layout(gpu.mig_devices) == A100_MIG_LAYOUT[index]
    assert [mig.uuid for mig in gpu.mig_devices] == [
        by_gi[mig.gpu_instance_id].uuid for mig in gpu.mig_devices
    ]
    assert all(mig.uuid.startswith("MIG-") for mig in gpu.mig_devices)


def test_empty_mig_slots_are_skipped() -> None:
    fake = fakes.two_gpus_mig_mixed()

    report = probe(fake)

    assert [len(gpu.mig_devices) for gpu in report.gpus] == [4, 3]
    # every slot of both GPUs was tried, the 7 - 4 and 7 - 3 empty ones included
    assert fake.calls.count("nvmlDeviceGetMigDeviceHandleByIndex") == 2 * 7
    assert fake.calls.count("nvmlDeviceGetGpuInstanceId") == 4 + 3


def test_compute_instances_sort_within_their_gpu_instance() -> None:
    fake = fakes.two_gpus_mig_mixed()
    slots = fake.gpus[1].mig_slots
    # split the 4g.40gb GPU instance (GI 1, slot 2) into compute instances 2 and 1
    slots[2].compute_instance_id = 2
    slots[6] = dataclasses.replace(slots[2], uuid="MIG-second-ci", compute_instance_id=1)

    report = probe(fake)

    assert [(m.gpu_instance_id, m.compute_instance_id) for m in report.gpus[1].mig_devices] == [
        (1, 1),
        (1, 2),
        (11, 0),
        (12, 0),
    ]


def test_pending_mig_mode_is_a_warning_not_a_problem(logs: pytest.LogCaptureFixture) -> None:
    fake = fakes.two_gpus_mig_mixed()
    fake.gpus[1].mig_pending = pynvml.NVML_DEVICE_MIG_DISABLE

    report = probe(fake)

    assert report.problems == []
    assert report.gpus[1].mig_enabled
    assert logged(logs, logging.WARNING) == [
        (
            "GPU MIG mode change waits for a GPU reset",
            {"gpu": 1, "uuid": fake.gpus[1].uuid, "pending": pynvml.NVML_DEVICE_MIG_DISABLE},
        )
    ]


def test_malformed_mig_name_is_a_problem(logs: pytest.LogCaptureFixture) -> None:
    fake = fakes.two_gpus_mig_mixed()
    fake.gpus[1].mig_slots[4].name = "NVIDIA A100-SXM4-80GB MIG mystery"

    report = probe(fake)

    assert report.gpus == []
    assert report.driver_version == "535.161.08"
    problem = "GPU 1: no MIG profile in MIG device name 'NVIDIA A100-SXM4-80GB MIG mystery'"
    assert report.problems == [f"NVML: {problem}"]
    assert logged(logs, logging.WARNING) == [
        ("GPU discovery failed; no GPUs offered", {"problem": problem})
    ]
    assert_paired(fake)


# --- hosts where NVML cannot be used -------------------------------------------------


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        pytest.param(fakes.no_driver, "no NVIDIA driver", id="no-driver"),
        pytest.param(fakes.no_library, "no NVIDIA management library", id="no-library"),
    ],
)
def test_host_without_nvidia_has_no_gpus_and_no_problem(
    host: Callable[[], FakeNvml], reason: str, logs: pytest.LogCaptureFixture
) -> None:
    fake = host()

    report = probe(fake)

    assert report == GpuReport(gpus=[], driver_version="", problems=[])
    [(line, _)] = logged(logs, logging.INFO)
    assert line.startswith(reason)
    assert line.endswith("; no GPUs offered")
    assert logged(logs, logging.WARNING) == []
    assert fake.calls == ["nvmlInit"]  # no shutdown after a failed init


@pytest.mark.parametrize(
    ("host", "problem"),
    [
        pytest.param(
            fakes.no_permission,
            "NVML: insufficient permissions to query GPUs (NVMLError_NoPermission)",
            id="no-permission",
        ),
        pytest.param(
            fakes.version_mismatch,
            "NVML: NVML library and kernel driver versions differ (NVMLError_LibRmVersionMismatch)",
            id="lib-rm-mismatch",
        ),
        pytest.param(
            lambda: fakes.failing_init(pynvml.NVML_ERROR_UNKNOWN),
            "NVML: Unknown Error (NVMLError_Unknown)",
            id="other-error",
        ),
    ],
)
def test_unusable_nvml_degrades_the_node(
    host: Callable[[], FakeNvml], problem: str, logs: pytest.LogCaptureFixture
) -> None:
    fake = host()

    report = probe(fake)

    assert report == GpuReport(gpus=[], driver_version="", problems=[problem])
    assert logged(logs, logging.WARNING) == [
        ("GPU discovery failed; no GPUs offered", {"problem": problem.removeprefix("NVML: ")})
    ]
    assert fake.calls == ["nvmlInit"]


# --- failures after init -------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "gpu", "function", "code", "problem"),
    [
        pytest.param(
            fakes.eight_whole_gpus,
            3,
            "nvmlDeviceGetMemoryInfo",
            pynvml.NVML_ERROR_GPU_IS_LOST,
            "NVML: GPU 3: GPU is lost (NVMLError_GpuIsLost)",
            id="gpu-lost-memory",
        ),
        pytest.param(
            fakes.eight_whole_gpus,
            0,
            "nvmlDeviceGetHandleByIndex",
            pynvml.NVML_ERROR_NO_PERMISSION,
            "NVML: GPU 0: insufficient permissions to query GPUs (NVMLError_NoPermission)",
            id="handle-no-permission",
        ),
        pytest.param(
            fakes.eight_whole_gpus,
            7,
            "nvmlDeviceGetPciInfo",
            pynvml.NVML_ERROR_UNKNOWN,
            "NVML: GPU 7: Unknown Error (NVMLError_Unknown)",
            id="last-gpu-pci-info",
        ),
        pytest.param(
            fakes.eight_whole_gpus,
            5,
            "nvmlDeviceGetMigMode",
            pynvml.NVML_ERROR_GPU_IS_LOST,
            "NVML: GPU 5: GPU is lost (NVMLError_GpuIsLost)",
            id="gpu-lost-mig-mode",
        ),
        pytest.param(
            fakes.two_gpus_mig_mixed,
            1,
            "nvmlDeviceGetMigDeviceHandleByIndex",
            pynvml.NVML_ERROR_GPU_IS_LOST,
            "NVML: GPU 1: GPU is lost (NVMLError_GpuIsLost)",
            id="gpu-lost-mig-slot",
        ),
        pytest.param(
            fakes.two_gpus_mig_mixed,
            0,
            "nvmlDeviceGetComputeInstanceId",
            pynvml.NVML_ERROR_RESET_REQUIRED,
            "NVML: GPU 0: GPU requires restart (NVMLError_ResetRequired)",
            id="mig-ci-reset",
        ),
    ],
)
def test_failure_on_one_gpu_degrades_naming_it(
    host: Callable[[], FakeNvml],
    gpu: int,
    function: str,
    code: int,
    problem: str,
    logs: pytest.LogCaptureFixture,
) -> None:
    fake = host()
    fake.fail(function, code, gpu=gpu)

    report = probe(fake)

    assert report.gpus == []
    assert report.problems == [problem]
    assert report.driver_version == fake.driver_version
    assert [line for line, _ in logged(logs, logging.WARNING)] == [
        "GPU discovery failed; no GPUs offered"
    ]
    assert_paired(fake)


@pytest.mark.parametrize(
    ("function", "driver_version"),
    [
        pytest.param("nvmlSystemGetDriverVersion", "", id="driver-version"),
        pytest.param("nvmlDeviceGetCount", "550.54.15", id="device-count"),
    ],
)
def test_failure_before_any_gpu_degrades_without_index(function: str, driver_version: str) -> None:
    fake = fakes.eight_whole_gpus()
    fake.fail(function, pynvml.NVML_ERROR_UNKNOWN)

    report = probe(fake)

    assert report == GpuReport(
        gpus=[], driver_version=driver_version, problems=["NVML: Unknown Error (NVMLError_Unknown)"]
    )
    assert_paired(fake)


@pytest.mark.parametrize(
    "host", [fakes.eight_whole_gpus, fakes.two_gpus_mig_mixed], ids=["whole", "mig"]
)
def test_init_and_shutdown_are_paired(host: Callable[[], FakeNvml]) -> None:
    fake = host()

    probe(fake)

    assert_paired(fake)
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()


def test_shutdown_even_when_reading_numa_raises() -> None:
    fake = fakes.eight_whole_gpus()

    def broken_sysfs(address: str) -> int | None:
        raise ValueError(f"garbage in numa_node of {address}")

    with pytest.raises(ValueError, match=r"garbage in numa_node of 0000:18:00\.0"):
        probe(fake, broken_sysfs)

    assert_paired(fake)


def test_failed_shutdown_keeps_the_report(logs: pytest.LogCaptureFixture) -> None:
    fake = fakes.eight_whole_gpus()
    fake.fail("nvmlShutdown", pynvml.NVML_ERROR_UNKNOWN)

    report = probe(fake)

    assert (len(report.gpus), report.problems) == (8, [])
    assert logged(logs, logging.WARNING) == [
        ("NVML shutdown failed", {"error": "Unknown Error (NVMLError_Unknown)"})
    ]


# --- the fake is faithful to pynvml --------------------------------------------------


def test_fake_refuses_device_calls_before_init_and_after_shutdown() -> None:
    fake = fakes.eight_whole_gpus()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetHandleByIndex(0)
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    fake.nvmlShutdown()

    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetUUID(handle)
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlShutdown()


def test_fake_counts_inits_like_nvml() -> None:
    fake = fakes.eight_whole_gpus()
    fake.nvmlInit()
    fake.nvmlInit()
    fake.nvmlShutdown()

    assert fake.nvmlDeviceGetCount() == 8  # still initialised: one init left


@pytest.mark.parametrize(
    ("call", "error"),
    [
        pytest.param(
            lambda nvml: nvml.nvmlDeviceGetHandleByIndex(8),
            pynvml.NVMLError_InvalidArgument,
            id="index-out-of-range",
        ),
        pytest.param(
            lambda nvml: nvml.nvmlDeviceGetUUID(0),
            pynvml.NVMLError_InvalidArgument,
            id="int-is-no-handle",
        ),
        pytest.param(
            lambda nvml: nvml.nvmlDeviceGetUUID(
                fakes.FakeHandle(FakeNvml(), nvml.gpus[0], mig=None)
            ),
            pynvml.NVMLError_InvalidArgument,
            id="another-fakes-handle",
        ),
        pytest.param(
            lambda nvml: nvml.nvmlDeviceGetMigMode(nvml.nvmlDeviceGetHandleByIndex(1)),
            pynvml.NVMLError_NotSupported,
            id="mig-mode-without-mig",
        ),
        pytest.param(
            lambda nvml: nvml.nvmlDeviceGetMaxMigDeviceCount(nvml.nvmlDeviceGetHandleByIndex(1)),
            pynvml.NVMLError_NotSupported,
            id="mig-count-without-mig",
        ),
        pytest.param(
            lambda nvml: nvml.nvmlDeviceGetMigDeviceHandleByIndex(
                nvml.nvmlDeviceGetHandleByIndex(0), 2
            ),
            pynvml.NVMLError_NotFound,
            id="empty-mig-slot",
        ),
        pytest.param(
            lambda nvml: nvml.nvmlDeviceGetMigDeviceHandleByIndex(
                nvml.nvmlDeviceGetHandleByIndex(0), 7
            ),
            pynvml.NVMLError_InvalidArgument,
            id="mig-slot-past-max",
        ),
        pytest.param(
            lambda nvml: nvml.nvmlDeviceGetGpuInstanceId(nvml.nvmlDeviceGetHandleByIndex(0)),
            pynvml.NVMLError_NotSupported,
            id="gi-of-whole-gpu",
        ),
    ],
)
def test_fake_raises_the_real_pynvml_errors(
    call: Callable[[FakeNvml], object], error: type[Exception]
) -> None:
    l4 = FakeGpu(name="NVIDIA L4", uuid="GPU-l4", memory=22 * GIB, pci_bus_id="00000000:C1:00.0")
    fake = fakes.two_gpus_mig_mixed()
    fake.gpus[1] = l4  # a GPU without MIG
    fake.nvmlInit()

    with pytest.raises(error) as raised:
        call(fake)

    assert type(raised.value) is error
    assert isinstance(raised.value, pynvml.NVMLError)


def test_fake_returns_pynvml_types() -> None:
    fake = fakes.two_gpus_mig_mixed()
    fake.nvmlInit()
    gpu = fake.nvmlDeviceGetHandleByIndex(0)
    mig = fake.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)

    assert isinstance(fake.nvmlSystemGetDriverVersion(), str)
    assert isinstance(fake.nvmlDeviceGetUUID(gpu), str)
    assert isinstance(fake.nvmlDeviceGetMemoryInfo(gpu), pynvml.c_nvmlMemory_t)
    assert fake.nvmlDeviceGetMemoryInfo(mig).total == 9728 * MIB
    pci = fake.nvmlDeviceGetPciInfo(gpu)
    assert isinstance(pci, pynvml.nvmlPciInfo_t)
    assert pci.busId == "00000000:07:00.0"  # pynvml's struct decodes its bytes field
    assert fake.nvmlDeviceGetMigMode(gpu) == [1, 1]
    assert fake.nvmlDeviceGetUUID(mig).startswith("MIG-")
    assert not isinstance(gpu, int)


def test_fake_rejects_injecting_an_unknown_function() -> None:
    with pytest.raises(ValueError, match="no NVML function 'nvmlDeviceGetUuid'"):
        fakes.eight_whole_gpus().fail("nvmlDeviceGetUuid", pynvml.NVML_ERROR_UNKNOWN)


# --- the real pynvml on this GPU-less machine ----------------------------------------


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this host has libnvidia-ml"
)
def test_real_pynvml_without_library(logs: pytest.LogCaptureFixture) -> None:
    report = probe_gpus(pynvml, no_numa)

    assert report == GpuReport(gpus=[], driver_version="", problems=[])
    assert logged(logs, logging.INFO) == [
        ("no NVIDIA management library (libnvidia-ml.so.1); no GPUs offered", {})
    ]
