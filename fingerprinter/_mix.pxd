# What the fingerprinter's compiled loops share (cimported; no module of its own).

from libc.stdint cimport uint64_t

cdef enum:
    ALPHABET = 26  # params.ALPHABET_SIZE


cdef inline uint64_t mix64(uint64_t z) noexcept nogil:
    # SplitMix64's finalizer, as winnowing.mix64 (arithmetic modulo 2**64).
    z = z + <uint64_t>0x9E3779B97F4A7C15
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
    return z ^ (z >> 31)
