import Foundation

// What the Strata-versus-GRDB benchmarks share: timing, the command line,
// and the Markdown rows they print.

/// Wall-clock seconds `body` takes.
public func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

/// The median of `rounds` timed runs of a read-only workload (the machine
/// is shared and noisy; one run can be off by half).
public func median(rounds: Int = 5, _ body: () throws -> Void) rethrows -> Double {
    var times: [Double] = []
    for _ in 0..<rounds { times.append(try seconds(body)) }
    return times.sorted()[rounds / 2]
}

/// The value after `flag` on the command line, if any.
public func argument(_ flag: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: flag), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

/// `--count N` when given and a number, otherwise `fallback`.
public func countArgument(default fallback: Int) -> Int {
    argument("--count").flatMap { Int($0) } ?? fallback
}

/// One Markdown table row: the two times and GRDB's time over Strata's.
public func ratioRow(_ name: String, _ strata: Double, _ grdb: Double) {
    let ratio = String(format: "%.2f×", grdb / strata)
    print("| \(name) | \(String(format: "%.3f s", strata)) | \(String(format: "%.3f s", grdb)) | \(ratio) |")
}
