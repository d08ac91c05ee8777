import Foundation

/// This process's memory, for tests of what stays resident.
public enum ProcessMemory {
    /// File-backed resident memory in bytes (`RssFile` of
    /// `/proc/self/status`): mapped file pages count here. Nil where there
    /// is no such file (not Linux).
    public static func residentFileBytes() -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssFile:") }),
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return nil }
        return kilobytes * 1024
    }
}
