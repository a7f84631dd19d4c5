"""The agent's ``extended_resources`` setting: from the file, the environment or a flag,
names checked by the quota spec's rule, GPUs and MIG devices refused (they are
discovered), counts whole and not negative."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import ENV_PREFIX, AgentConfig
from shared.config import ConfigError, load


def agent_config(
    *, file: Path | None = None, env: dict[str, str] | None = None, flag: str | None = None
) -> AgentConfig:
    flags = {"extended_resources": flag} if flag is not None else None
    return load(AgentConfig, file=file, environ=env, env_prefix=ENV_PREFIX, flags=flags)


def refusal(**where: str) -> str:
    with pytest.raises(ConfigError) as caught:
        agent_config(env={f"{ENV_PREFIX}EXTENDED_RESOURCES": where["env"]})
    return str(caught.value)


def test_none_by_default() -> None:
    assert agent_config().extended_resources == {}


def test_from_a_toml_table(tmp_path: Path) -> None:
    file = tmp_path / "agent.toml"
    file.write_text('extended_resources = {"example.com/fpga" = 2, "x.io/Nic_v2" = 0}\n')
    loaded = agent_config(file=file)
    assert loaded.extended_resources == {"example.com/fpga": 2, "x.io/Nic_v2": 0}


def test_environment_overrides_the_file_and_a_flag_overrides_both(tmp_path: Path) -> None:
    file = tmp_path / "agent.toml"
    file.write_text('extended_resources = {"example.com/fpga" = 2}\n')
    env = {f"{ENV_PREFIX}EXTENDED_RESOURCES": "example.com/fpga=3,example.com/nic=1"}
    from_env = agent_config(file=file, env=env)
    assert from_env.extended_resources == {"example.com/fpga": 3, "example.com/nic": 1}
    from_flag = agent_config(file=file, env=env, flag="example.com/fpga=4")
    assert from_flag.extended_resources == {"example.com/fpga": 4}


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("fpga=1", "extended_resources: 'fpga' is not <domain>/<name>"),
        ("Example.com/fpga=1", "extended_resources: 'Example.com/fpga' is not <domain>/<name>"),
        ("example.com/-fpga=1", "extended_resources: 'example.com/-fpga' is not <domain>/<name>"),
        (f"example.com/{'f' * 64}=1", "is not <domain>/<name>"),
        ("cpu=4", "extended_resources: 'cpu' is not <domain>/<name>"),
        ("nvidia.com/gpu=1", "extended_resources: 'nvidia.com/gpu' is discovered on the host"),
        ("nvidia.com/mig-1g.10gb=1", "'nvidia.com/mig-1g.10gb' is discovered on the host"),
        ("example.com/fpga=-1", "EXTENDED_RESOURCES: Expected `int` >= 0"),
        ("example.com/fpga=1.5", "EXTENDED_RESOURCES: Expected `int`"),
        ("example.com/fpga=1000001", "EXTENDED_RESOURCES: Expected `int` <= 1000000"),
    ],
    ids=[
        "no-domain",
        "upper-case-domain",
        "name-starts-with-dash",
        "name-too-long",
        "bare-name",
        "gpu",
        "mig",
        "negative",
        "fraction",
        "more-than-a-node-may-offer",
    ],
)
def test_bad_entries_are_refused_with_the_reason(text: str, complaint: str) -> None:
    assert complaint in refusal(env=text)
