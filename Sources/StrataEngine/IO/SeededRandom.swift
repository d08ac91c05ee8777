/// A fast, seedable generator (SplitMix64) so that every randomized test can
/// print its seed and be replayed exactly.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    /// The generator's state: a generator seeded with it continues the same
    /// sequence.
    public private(set) var state: UInt64

    /// A generator whose sequence `seed` determines.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// `count` random bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        var i = 0
        while i < count {
            var word = next()
            for _ in 0..<8 where i < count {
                result[i] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                i += 1
            }
        }
        return result
    }
}
