#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A fresh directory in `/tmp`, removed with the files in it by `remove()`.
public struct TemporaryDirectory: Sendable {
    /// The directory's path.
    public let path: String

    /// Creates a directory `/tmp/<prefix>-XXXXXX` with `mkdtemp`; traps when
    /// that fails.
    public init(prefix: String = "strata") {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed: errno \(errno)")
        path = String(cString: template.map { UInt8(bitPattern: $0) } + [])
    }

    /// A path inside the directory.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Deletes the files directly inside the directory, then the directory. A
    /// subdirectory is not deleted, and then neither is the directory.
    public func remove() {
        guard let dir = opendir(path) else { return }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { unlink(path + "/" + name) }
        }
        closedir(dir)
        rmdir(path)
    }
}
