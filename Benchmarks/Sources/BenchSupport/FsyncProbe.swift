import StrataEngine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Measures what one durable 4 KiB write costs on this machine, the floor
/// under any commit that syncs its log.
public enum FsyncProbe {
    public static let blockSize = 4096

    /// The mean time of one `pwrite` of 4 KiB followed by `fdatasync`, over
    /// `iterations` rounds, on a new file at `path` (removed afterwards).
    ///
    /// - Parameter append: true to write each block past the end of the
    ///   file (the size changes, so the sync also writes metadata); false
    ///   to overwrite one block already on disk, as a log reused after a
    ///   checkpoint does.
    public static func meanSyncedWrite(path: String, iterations: Int, append: Bool) throws -> Duration {
        let fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0o644)
        guard fd >= 0 else { throw BenchError("open \(path): errno \(errno)") }
        defer {
            close(fd)
            unlink(path)
        }
        var block = [UInt8](repeating: 0, count: blockSize)
        var rng = SeededRandom(seed: 42)
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
    public static func meanSyncedLogWrite(path: String, iterations: Int, bytes: Int) throws -> Duration {
        let fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0o644)
        guard fd >= 0 else { throw BenchError("open \(path): errno \(errno)") }
        defer {
            close(fd)
            unlink(path)
        }
        var record = [UInt8](repeating: 0, count: bytes)
        var rng = SeededRandom(seed: 7)
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

    /// The I/O any page-logging engine (SQLite's WAL, Strata's) must do for
    /// one-put commits of random keys, without any engine around it: each
    /// commit writes `bytes` of log at consecutive offsets and syncs the
    /// log; every `commitsPerCheckpoint` commits, a checkpoint writes
    /// `pagesPerCheckpoint` distinct random pages (by default one per
    /// commit: random keys land on distinct leaves) into a main file of
    /// `mainBytes`, syncs it, and starts the log over (a header write and a
    /// log sync). Returns the mean per commit.
    ///
    /// This is the floor under workload 4 for a design that logs page images
    /// and copies them home later, as Strata's log does (StrataEngine's
    /// "File format" article): the pages a commit changes are written
    /// twice, and the second write is random.
    public static func meanLogAndCheckpointIO(
        path: String, mainBytes: Int, iterations: Int, bytes: Int, commitsPerCheckpoint: Int,
        pagesPerCheckpoint: Int? = nil
    ) throws -> Duration {
        let logPath = path + "-log"
        let log = open(logPath, O_CREAT | O_TRUNC | O_WRONLY, 0o644)
        let main = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0o644)
        guard log >= 0, main >= 0 else { throw BenchError("open \(path): errno \(errno)") }
        defer {
            close(log)
            close(main)
            unlink(logPath)
            unlink(path)
        }
        var rng = SeededRandom(seed: 11)
        let chunk = rng.bytes(1 << 20)
        var offset = 0
        while offset < mainBytes {
            try write(main, chunk, at: Int64(offset))
            offset += chunk.count
        }
        try sync(main)
        offset = 0
        while offset < bytes * commitsPerCheckpoint + 32 {
            try write(log, chunk, at: Int64(offset))
            offset += chunk.count
        }
        try sync(log)
        var record = rng.bytes(bytes)
        var page = rng.bytes(blockSize)
        let header = rng.bytes(32)
        let pages = max(1, mainBytes / blockSize)
        let elapsed = try ContinuousClock().measure {
            var sinceCheckpoint = 0
            for i in 0..<iterations {
                record[0] = UInt8(truncatingIfNeeded: i)
                try write(log, record, at: Int64(32 + sinceCheckpoint * bytes))
                try sync(log)
                sinceCheckpoint += 1
                if sinceCheckpoint == commitsPerCheckpoint {
                    var targets = Set<Int>()
                    while targets.count < min(pagesPerCheckpoint ?? commitsPerCheckpoint, pages) {
                        targets.insert(Int(rng.next() % UInt64(pages)))
                    }
                    for target in targets.sorted() {
                        page[0] = UInt8(truncatingIfNeeded: target)
                        try write(main, page, at: Int64(target * blockSize))
                    }
                    try sync(main)
                    try write(log, header, at: 0)
                    try sync(log)
                    sinceCheckpoint = 0
                }
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
