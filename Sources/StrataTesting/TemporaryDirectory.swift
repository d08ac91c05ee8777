#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A fresh directory under the system temporary directory, removed with
/// everything in it by `remove()`.
public struct TemporaryDirectory: Sendable {
    public let path: String

    public init(prefix: String = "strata") {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed: errno \(errno)")
        path = String(cString: template.map { UInt8(bitPattern: $0) } + [])
    }

    /// A path inside the directory.
    public func file(_ name: String) -> String { path + "/" + name }

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
