"""What a bootstrap pins down of an offset: principal directions, and the least turn they allow."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bevviz.calibration.lidar.pinned import direction_words, pinned_offset
from bevviz.errors import InputError


def _replicates(seed: int, spreads, centre=(0.0, 0.0, 0.0), n: int = 24) -> np.ndarray:
    """Replicates spread by ``spreads`` along the columns of a random rotation, (n, 3)."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return np.asarray(centre) + (rng.normal(size=(n, 3)) * spreads) @ basis.T


def _brute_least(res: np.ndarray, free: np.ndarray) -> np.ndarray:
    """min over the free directions' span of the turn's size (the norm), on a fine grid, (B,)."""
    t = np.linspace(-12.0, 12.0, 1201)
    grids = np.meshgrid(*[t] * free.shape[1], indexing="ij")
    shifts = np.stack([g.ravel() for g in grids], axis=1) @ free.T  # (G, 3)
    out = []
    for r in res:
        x0 = r - (r @ free) @ free.T  # the part across the free directions
        out.append(np.linalg.norm(x0 + shifts, axis=1).min())
    return np.array(out)


def test_all_directions_pinned_is_the_offset_itself():
    res = _replicates(0, [0.1, 0.2, 0.3], centre=(0.4, -0.9, 0.2))
    p = pinned_offset(res, 0.7)
    assert p.directions.shape == (3, 3) and p.free.shape == (3, 0)
    np.testing.assert_allclose(p.least_deg, np.linalg.norm(res, axis=1), atol=1e-12)
    assert "all three axes" in p.words()


@pytest.mark.parametrize("spreads,k", [([0.1, 0.1, 3.0], 2), ([0.1, 2.0, 3.0], 1)])
def test_the_least_offset_agrees_with_a_brute_force_search(spreads, k):
    res = _replicates(k, spreads, centre=(1.0, -0.6, 0.3), n=6)
    p = pinned_offset(res, 0.7)
    assert p.directions.shape[1] == k
    brute = _brute_least(res, p.free)
    np.testing.assert_allclose(p.least_deg, brute, atol=0.02 + 1e-9)
    assert np.all(p.least_deg <= brute + 1e-9)  # the closed form is the true minimum, the grid only near it


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), big=st.floats(1.0, 4.0), centre=st.lists(st.floats(-3, 3), min_size=3, max_size=3))
def test_the_least_offset_never_exceeds_the_offset_and_grows_with_what_is_pinned(seed, big, centre):
    res = _replicates(seed, [0.1, 0.3, big], centre=centre)
    two = pinned_offset(res, 0.7)  # the large spread left free
    one = pinned_offset(res, 0.2)  # only the smallest pinned
    assert np.all(two.least_deg <= np.linalg.norm(res, axis=1) + 1e-9)
    assert np.all(one.least_deg <= two.least_deg + 1e-9)


def test_a_valley_of_roll_and_pitch_is_read_across_it():
    """The TRI side cameras' case: roll and pitch each spread 1.5 deg, their difference known
    to 0.05. Across the valley the camera is 0.8 deg off (roll +0.57, pitch -0.57): turned
    at least 0.8 deg, whatever it slid along the valley."""
    rng = np.random.default_rng(3)
    along, across = np.array([1.0, 1.0, 0.0]) / np.sqrt(2), np.array([1.0, -1.0, 0.0]) / np.sqrt(2)
    res = (0.8 * across + 1.5 * along + np.outer(rng.normal(0, 2.0, 24), along)
           + np.outer(rng.normal(0, 0.05, 24), across) + np.outer(rng.normal(0, 0.05, 24), [0, 0, 1]))
    assert np.all(res[:, :2].std(axis=0) > 0.7)  # no axis is pinned down
    p = pinned_offset(res, 0.7)
    assert p.directions.shape[1] == 2 and abs(abs(p.free[:, 0] @ along) - 1) < 0.01
    assert np.median(p.least_deg) == pytest.approx(0.8, abs=0.05)
    assert p.words().startswith("all but 0.7") and "pitch (spread" in p.words()


def test_too_few_or_broken_replicates_pin_nothing():
    for res in (np.zeros((1, 3)), np.zeros((0, 3)), np.array([[0.0, np.nan, 0.0], [1.0, 0.0, 0.0]])):
        p = pinned_offset(res, 0.7)
        assert p.directions.shape == (3, 0) and np.all(p.least_deg == 0) and p.words() == "no direction"
    with pytest.raises(InputError, match="replicates_deg"):
        pinned_offset(np.zeros((5, 2)), 0.7)


def test_directions_in_words():
    assert direction_words(np.array([0.0, 0.0, -1.0])) == "yaw"
    assert direction_words(np.array([0.99, 0.1, 0.0])) == "roll"
    assert direction_words(np.array([-0.6, 0.8, 0.0])) == "-0.60 roll + 0.80 pitch"
    assert direction_words(np.array([0.71, -0.70, 0.01])) == "0.71 roll - 0.70 pitch"
