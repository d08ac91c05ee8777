import Foundation

/// The path of the package's executable `name` (a helper process of the
/// tests: `strata`, `strata-crash-writer`, …), which SwiftPM builds next to
/// the test bundle.
public func executableBesideTests(_ name: String) throws -> String {
    let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for candidate in [dir, dir.deletingLastPathComponent()] {
        let path = candidate.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    throw MissingExecutable(name: name)
}

/// A helper executable the tests need is not built beside them.
public struct MissingExecutable: Error, CustomStringConvertible {
    /// The executable's name.
    public let name: String
    /// Says which executable is missing.
    public var description: String { "\(name) is not built next to the test bundle" }
}
