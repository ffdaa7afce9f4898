"""Per-problem strings: the exact text results store (committed results must still read), and the round trip."""
import numpy as np

from reasonlab.io.pack import pack_bits, pack_ints, unpack_bits, unpack_ints


def test_bits_are_one_character_per_problem():
    assert pack_bits([True, False, 1, 0, 2.0]) == "10101"
    assert pack_bits(np.array([], bool)) == ""
    x = np.random.default_rng(0).random(50) < 0.3
    back = unpack_bits(pack_bits(x))
    assert back.dtype == np.uint8 and np.array_equal(back, x.astype(np.uint8))


def test_ints_are_rounded_and_comma_separated():
    assert pack_ints([3.0, 4.4, 4.6, 0]) == "3,4,5,0"
    assert pack_ints(np.array([120, 7])) == "120,7"
    assert np.array_equal(unpack_ints("3,4,5,0"), [3.0, 4.0, 5.0, 0.0]) and unpack_ints("3,4").dtype == float
    assert unpack_ints("").size == 0
    assert np.array_equal(unpack_ints([5.0, 2.5]), [5.0, 2.5])      # hand-made results hold lists
