/// A fast, seedable generator (SplitMix64) so that every randomized test can
/// print its seed and be replayed exactly.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    public private(set) var state: UInt64

    public init(seed: UInt64) { state = seed }

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

    /// The seed to use: the environment variable `name` when set (to replay
    /// a failure), otherwise a fresh random one. Prints it either way.
    public static func seed(fromEnvironment name: String, label: String) -> UInt64 {
        let seed: UInt64
        if let text = environmentValue(name), let value = UInt64(text) {
            seed = value
        } else {
            seed = UInt64.random(in: 0...UInt64.max)
        }
        print("\(label): seed \(seed) (replay with \(name)=\(seed))")
        return seed
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The value of environment variable `name`, if set (tests read their
/// knobs — seeds, counts — through it).
public func environmentValue(_ name: String) -> String? {
    guard let p = getenv(name) else { return nil }
    return String(cString: p)
}
