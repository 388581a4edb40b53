"""Quantities with units (SPEC 1: GB and GiB distinct)."""

import pytest

from perfmodel.units import GB, GiB, QuantityError, parse_quantity


@pytest.mark.parametrize(
    "text,dim,value",
    [
        ("80 GB", "bytes", 80e9),
        ("80GiB", "bytes", 80 * 2**30),
        ("2039 GB/s", "bytes_per_s", 2039e9),
        ("2.039 TB/s", "bytes_per_s", 2.039e12),
        ("312 TFLOPS", "flops_per_s", 312e12),
        ("2 us", "seconds", 2e-6),
        ("1.5ms", "seconds", 1.5e-3),
        ("200 Gb/s", "bytes_per_s", 25e9),
        (1e9, "bytes", 1e9),
        ("5", "seconds", 5.0),
        ("312 TFLOP/s", "flops_per_s", 312e12),
        ("3 µs", "seconds", 3e-6),
    ],
)
def test_accepted_forms(text, dim, value):
    assert parse_quantity(text, dim) == pytest.approx(value)


def test_gb_and_gib_are_distinct():
    assert parse_quantity("1 GB", "bytes") == GB != parse_quantity("1 GiB", "bytes") == GiB


@pytest.mark.parametrize(
    "text,dim",
    [
        ("eighty GB", "bytes"),
        ("80 GB", "bytes_per_s"),
        ("2 parsecs", "seconds"),
        ("", "bytes"),
        (True, "bytes"),
        ("nan", "bytes"),
    ],
)
def test_malformed_shows_an_accepted_form(text, dim):
    with pytest.raises(QuantityError) as e:
        parse_quantity(text, dim)
    assert (
        "write it like" in str(e.value)
        or "expected a quantity" in str(e.value)
        or "finite" in str(e.value)
    )
