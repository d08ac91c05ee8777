// What the benchmarks share beyond BenchSupport.swift: the error a
// workload throws when it went wrong. (Seeded byte streams come from
// StrataEngine's `SeededRandom`.)

/// A result that shows a workload did not do what it should.
public struct BenchError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
