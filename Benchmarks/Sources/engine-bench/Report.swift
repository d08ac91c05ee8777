import Foundation

/// Runs `body` once and returns its result with the elapsed time on the
/// monotonic clock.
func timed<T>(_ body: () throws -> T) rethrows -> (result: T, elapsed: Duration) {
    let clock = ContinuousClock()
    let start = clock.now
    let result = try body()
    return (result, clock.now - start)
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    var seconds: Double {
        let (whole, fraction) = components
        return Double(whole) + Double(fraction) * 1e-18
    }
}

/// Formatting helpers for the markdown report.
enum Format {
    /// A duration with a unit suited to its size: "1.234 s", "12.3 ms", "45.6 µs".
    static func time(_ seconds: Double) -> String {
        switch seconds {
        case 1...: String(format: "%.3f s", seconds)
        case 1e-3...: String(format: "%.1f ms", seconds * 1e3)
        case 1e-6...: String(format: "%.2f µs", seconds * 1e6)
        default: String(format: "%.0f ns", seconds * 1e9)
        }
    }

    /// Total time of `ops` operations, followed by the time per operation.
    static func time(_ total: Duration, ops: Int) -> String {
        "\(time(total.seconds)) (\(time(total.seconds / Double(ops)))/op)"
    }

    /// A ratio such as "1.52×".
    static func ratio(_ numerator: Double, _ denominator: Double) -> String {
        denominator > 0 ? String(format: "%.2f×", numerator / denominator) : "—"
    }

    /// A byte count in binary units: "512 B", "4.0 KiB", "117.3 MiB".
    static func bytes(_ count: Int64?) -> String {
        guard let count else { return "—" }
        let value = Double(count)
        switch count {
        case (1 << 30)...: return String(format: "%.2f GiB", value / Double(1 << 30))
        case (1 << 20)...: return String(format: "%.1f MiB", value / Double(1 << 20))
        case (1 << 10)...: return String(format: "%.1f KiB", value / Double(1 << 10))
        default: return "\(count) B"
        }
    }

    /// An integer with thousands separators: "1,000,000".
    static func count(_ n: Int) -> String {
        let digits = String(n.magnitude)
        var result = ""
        for (i, digit) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return n < 0 ? "-" + result : result
    }

    /// One markdown table row.
    static func row(_ cells: [String]) -> String {
        "| " + cells.joined(separator: " | ") + " |"
    }

    /// A markdown table header with its separator line.
    static func header(_ cells: [String]) -> String {
        row(cells) + "\n" + row(cells.map { _ in "---" })
    }
}

/// The on-disk size of a store: its main file and its write-ahead log.
struct StoreSize {
    var main: Int64?
    var wal: Int64?

    /// Reads the sizes of `path` and `path + "-wal"`; a missing file is nil.
    init(path: String) {
        main = Self.size(of: path)
        wal = Self.size(of: path + "-wal")
    }

    var total: Int64 { (main ?? 0) + (wal ?? 0) }

    private static func size(of path: String) -> Int64? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let size = attributes[.size] as? NSNumber
        else { return nil }
        return size.int64Value
    }
}

/// Writes a progress line to standard error, keeping standard output for
/// the report.
func progress(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}
