#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Measures what one durable 4 KiB write costs on this machine, the floor
/// under any commit that syncs its log.
enum FsyncProbe {
    static let blockSize = 4096

    /// The mean time of one `pwrite` of 4 KiB followed by `fdatasync`, over
    /// `iterations` rounds, on a new file at `path` (removed afterwards).
    ///
    /// - Parameter append: true to write each block past the end of the
    ///   file (the size changes, so the sync also writes metadata); false
    ///   to overwrite one block already on disk, as a log reused after a
    ///   checkpoint does.
    static func meanSyncedWrite(path: String, iterations: Int, append: Bool) throws -> Duration {
        let fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0o644)
        guard fd >= 0 else { throw BenchError("open \(path): errno \(errno)") }
        defer {
            close(fd)
            unlink(path)
        }
        var block = [UInt8](repeating: 0, count: blockSize)
        var rng = SplitMix64(seed: 42)
        for i in block.indices { block[i] = UInt8(truncatingIfNeeded: rng.next()) }

        if !append {
            // Allocate the block and sync it once, outside the timed loop.
            try write(fd, block, at: 0)
            try sync(fd)
        }
        let elapsed = try ContinuousClock().measure {
            for i in 0..<iterations {
                block[0] = UInt8(truncatingIfNeeded: i)
                try write(fd, block, at: append ? Int64(i * blockSize) : 0)
                try sync(fd)
            }
        }
        return elapsed / iterations
    }

    /// The mean time of writing `bytes` at consecutive offsets of a file
    /// whose blocks are already allocated and synced, each write followed by
    /// `fdatasync`: what a log commit of that many bytes costs at least, as
    /// Strata's WAL does after a restart (a one-put commit logs two frames,
    /// 2 × (24 + 4096) bytes: the leaf and the catalog page with the count).
    static func meanSyncedLogWrite(path: String, iterations: Int, bytes: Int) throws -> Duration {
        let fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0o644)
        guard fd >= 0 else { throw BenchError("open \(path): errno \(errno)") }
        defer {
            close(fd)
            unlink(path)
        }
        var record = [UInt8](repeating: 0, count: bytes)
        var rng = SplitMix64(seed: 7)
        for i in record.indices { record[i] = UInt8(truncatingIfNeeded: rng.next()) }
        // Preallocate the whole region, as a reused log is.
        let zero = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while offset < Int64(bytes * iterations + 32) {
            try write(fd, zero, at: offset)
            offset += Int64(zero.count)
        }
        try sync(fd)
        let elapsed = try ContinuousClock().measure {
            for i in 0..<iterations {
                record[0] = UInt8(truncatingIfNeeded: i)
                try write(fd, record, at: Int64(32 + i * bytes))
                try sync(fd)
            }
        }
        return elapsed / iterations
    }

    private static func write(_ fd: Int32, _ block: [UInt8], at offset: Int64) throws {
        let written = block.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
        guard written == block.count else { throw BenchError("pwrite: errno \(errno)") }
    }

    private static func sync(_ fd: Int32) throws {
        #if canImport(Darwin)
            let result = fsync(fd)
        #else
            let result = fdatasync(fd)
        #endif
        guard result == 0 else { throw BenchError("fdatasync: errno \(errno)") }
    }
}
