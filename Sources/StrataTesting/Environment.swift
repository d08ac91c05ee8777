@_exported import StrataEngine

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

extension SeededRandom {
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
        // Out now: a test that traps loses what stdout still buffers.
        fflush(nil)
        return seed
    }
}
