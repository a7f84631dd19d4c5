"""coordinator.metrics_text: a gauge written as exposition text reads back, through
prometheus_client's parser, as the labels and values it was given, whatever characters
the label values hold."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from coordinator.metrics_text import TextGauge


def read_back(text: str) -> list[tuple[dict[str, str], float]]:
    (family,) = text_string_to_metric_families(text)
    assert (family.name, family.type) == ("allot_test", "gauge")
    return [(sample.labels, sample.value) for sample in family.samples]


def test_a_family_with_no_samples_has_its_help_and_type_only() -> None:
    gauge = TextGauge("allot_test", 'Odd "help" \\ over\ntwo lines.', ("node",))
    assert read_back(gauge.header()) == []
    (family,) = text_string_to_metric_families(gauge.header())
    assert family.documentation == 'Odd "help" \\ over\ntwo lines.'


@given(
    st.lists(
        st.tuples(
            st.text(max_size=12),
            st.text(max_size=12),
            st.floats(allow_nan=False) | st.integers(-(2**62), 2**62),
        ),
        max_size=8,
    )
)
def test_label_values_and_numbers_read_back_as_given(
    samples: list[tuple[str, str, float]],
) -> None:
    gauge = TextGauge("allot_test", "A test.", ("node", "kind"))
    text = gauge.header() + "".join(
        gauge.line((node, kind), value) for node, kind, value in samples
    )
    assert read_back(text) == [
        ({"node": node, "kind": kind}, float(value)) for node, kind, value in samples
    ]
