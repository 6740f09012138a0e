"""The pinned pseudo-random generator shared by the native core and the reference twins.

SplitMix64 with Lemire's unbiased bounded draw (ALGORITHMS.md §4.1). Every random choice in
omtl (evictions, seeded shuffles) goes through this generator, so the Rust engine, the NumPy
reference and any other port draw exactly the same numbers for the same seed.
"""

from __future__ import annotations

_MASK = (1 << 64) - 1


class SplitMix64:
    """SplitMix64: ``state += golden gamma``, then two xor-shift-multiply mixing rounds."""

    __slots__ = ("state",)

    def __init__(self, seed: int = 0) -> None:
        self.state = int(seed) & _MASK

    def next_u64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """A uniform integer in ``[0, n)`` by Lemire's multiply-and-reject method."""
        if n <= 0:
            raise ValueError(f"below() needs n >= 1, got {n}")
        m = self.next_u64() * n
        low = m & _MASK
        if low < n:
            threshold = ((1 << 64) - n) % n
            while low < threshold:
                m = self.next_u64() * n
                low = m & _MASK
        return m >> 64

    def permutation(self, n: int) -> list[int]:
        """A uniformly random permutation of ``range(n)`` (Fisher-Yates, from the back)."""
        order = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.below(i + 1)
            order[i], order[j] = order[j], order[i]
        return order
