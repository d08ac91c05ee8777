import StrataEngine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The bodies of the fuzz targets in `Fuzz/`, shared with the regression
/// test that replays their corpora under `swift test`.
///
/// Each function accepts any byte string. Errors the engine throws for
/// damaged input are expected and ignored; a trap means an engine bug: a
/// crash on untrusted bytes, or a broken invariant reported through
/// `preconditionFailure`.
public enum FuzzHarness {
    /// Where each harness puts its store, in a fresh ``MemoryFileSystem``.
    static let path = "/fuzz/store"
    /// A 1 MiB cache: pages are re-read (and re-verified) often.
    static let smallCache = DatabaseOptions(cacheSizeBytes: 1 << 20)

    // MARK: - Main file

    /// Uses `bytes` as the main file of a store without a log: opens it,
    /// runs `check()`, reads every entry of every tree, makes one small
    /// commit and closes it.
    ///
    /// The checksum of every whole page (at the page size the header gives)
    /// is recomputed first, so that damage reaches the structure checks
    /// behind the checksums: a page that fails its checksum is the easy
    /// case, covered by the unit tests.
    public static func storeFile(_ bytes: [UInt8]) {
        var bytes = bytes
        if bytes.count >= 24 {
            let pageSize = bytes[20..<24].reduce(0) { $0 << 8 | Int($1) }
            if pageSize >= 4096 && pageSize <= 65536 && pageSize & (pageSize - 1) == 0 {
                for page in 0..<bytes.count / pageSize {
                    PageBytes.resealChecksum(&bytes, page: page, pageSize: pageSize)
                }
            }
        }
        let fs = fileSystem(with: [(path, bytes)])
        guard let db = try? Database.open(path: path, options: smallCache, fileSystem: fs) else { return }
        _ = try? db.check()
        _ = readEverything(db)
        _ = try? db.write { tx in
            for name in try tx.treeNames().prefix(4) {
                let tree = try tx.tree(name)
                try tx.put([0x66, 0x75, 0x7a, 0x7a], [0x21], in: tree)
                let cursor = try tx.cursor(tree)
                if try cursor.first() { try tx.delete(try cursor.key(), in: tree) }
            }
        }
        try? db.close()
    }

    // MARK: - Log

    /// Damages the log of a valid store abandoned without `close()`, then
    /// opens it.
    ///
    /// Input: byte 0 picks a cut point of the intact log (modulo their
    /// number): its start, the start of one of its frame slots, or its end;
    /// byte 1 picks the mode: even, the rest of the input overwrites the log
    /// from the cut on (what follows stays); odd, the log ends at the cut
    /// and the rest of the input is appended. Empty input leaves the log
    /// intact.
    ///
    /// The main file is valid and holds the state before every commit in the
    /// log, so recovery must yield the state after one of those commits.
    /// Whenever every frame recovery accepted is byte-identical to the
    /// intact log, the store must pass `check()`, hold exactly that commit's
    /// entries, take a new commit and pass `check()` after reopening. (A
    /// frame forged with valid salts and checksums is indistinguishable
    /// from a real one: then only the absence of a crash is required.)
    public static func walFile(_ bytes: [UInt8]) {
        let image = logImage
        var log = image.log
        if bytes.count >= 1 {
            let cuts = [0] + stride(from: 32, through: log.count, by: image.frameSize)
            let cut = cuts[Int(bytes[0]) % cuts.count]
            let payload = bytes.dropFirst(2)
            if bytes.count >= 2 && bytes[1] % 2 == 1 {
                log.replaceSubrange(cut..., with: payload)
            } else {
                log.replaceSubrange(cut..<min(log.count, cut + payload.count), with: payload)
            }
        }
        let fs = fileSystem(with: [(path, image.main), (path + "-wal", log)])
        guard let db = try? Database.open(path: path, options: smallCache, fileSystem: fs) else { return }
        let accepted = db.statistics.walFrames
        let end = 32 + accepted * image.frameSize
        guard accepted == 0 || (log.count >= end && memcmp(log, image.log, end) == 0) else {
            // Forged frames: anything but a crash is acceptable.
            _ = try? db.check()
            _ = readEverything(db)
            try? db.close()
            return
        }
        do {
            let report = try db.check()
            guard report.isHealthy else {
                preconditionFailure("recovery from a damaged log produced a damaged store:\n\(report)")
            }
            guard let expected = image.digests[accepted], readEverything(db) == expected else {
                preconditionFailure("recovery accepted \(accepted) frames but the store differs from that commit")
            }
            try db.write { tx in try tx.put([0x6b], [0x76], in: try tx.createTree("after-recovery")) }
            try db.close()
            let reopened = try Database.open(path: path, options: smallCache, fileSystem: fs)
            let after = try reopened.check()
            guard after.isHealthy else { preconditionFailure("a commit after recovery damaged the store:\n\(after)") }
            try reopened.close()
        } catch {
            preconditionFailure("a store recovered from its intact commits failed: \(error)")
        }
    }

    // MARK: - Shared index

    /// Damages the shared index (`-shm`) of a store a handle has open, then
    /// opens a second handle and reads everything through both.
    ///
    /// The store is ``walFile(_:)``'s, with its intact log. Input: byte 0,
    /// bit 0 set: the header checksum is recomputed after the damage (so
    /// that it reaches the checks behind it); the other bits and byte 1
    /// pick where the damage starts (the header, the reader marks or the
    /// frame list); the rest of the input overwrites the index from there.
    /// Input longer than the index grows nothing: it is cut.
    ///
    /// Without a recomputed checksum, any damage to the header or the frame
    /// list must be found (and the index rebuilt from the log): both handles
    /// must then read exactly the last commit. With one, a forged header
    /// can name another consistent state, so only the absence of a crash
    /// or hang is required.
    public static func sharedIndex(_ bytes: [UInt8]) {
        let image = logImage
        let fs = fileSystem(with: [(path, image.main), (path + "-wal", image.log)])
        var options = smallCache
        options.busyTimeout = .milliseconds(200)
        guard let first = try? Database.open(path: path, options: options, fileSystem: fs) else {
            preconditionFailure("the intact store did not open")
        }
        let expected = image.digests[first.statistics.walFrames]
        let resealed = bytes.first.map { $0 & 1 == 1 } ?? false
        if bytes.count >= 2, let shm = fs.file(path + "-shm") {
            shm.withContents { index in
                let regions = [0, 16, 24, 40, 56, 88, 104, 128, 256, 4096, 4100, 4200]
                let start = regions[(Int(bytes[0] >> 1) &+ Int(bytes[1])) % regions.count]
                let payload = bytes.dropFirst(2).prefix(max(0, index.count - start))
                index.replaceSubrange(start..<start + payload.count, with: payload)
                if resealed && index.count >= 136 {
                    var crc = index.withUnsafeBytes { crc32c(0, $0.baseAddress!, 16) }
                    crc = index.withUnsafeBytes { crc32c(crc, $0.baseAddress! + 24, 104) }
                    withUnsafeBytes(of: UInt64(crc)) { index.replaceSubrange(128..<136, with: $0) }
                }
            }
        }
        let second = try? Database.open(path: path, options: options, fileSystem: fs)
        let seenBySecond = second.flatMap { readEverything($0) }
        let seenByFirst = readEverything(first)
        if !resealed {
            guard let second else { preconditionFailure("a damaged index was not rebuilt: the second open failed") }
            guard seenBySecond == expected, seenByFirst == expected else {
                preconditionFailure(
                    "a damaged index gave a wrong read: second \(String(describing: seenBySecond)), first \(String(describing: seenByFirst)), expected \(String(describing: expected))"
                )
            }
            _ = try? second.write { tx in try tx.put([0x6b], [0x76], in: try tx.createTree("after-damage")) }
            guard (try? first.check())?.isHealthy == true else { preconditionFailure("the store is damaged after a rebuild") }
        }
        try? second?.close()
        try? first.close()
    }

    /// The intact log the ``walFile(_:)`` harness damages, for seed inputs.
    public static var intactLog: [UInt8] { logImage.log }
    /// Size of one log frame of that store: a 24-byte header and a page.
    public static var logFrameSize: Int { logImage.frameSize }

    /// A valid store abandoned without `close()`: its main file, its log
    /// and the ``readEverything(_:)`` digest after each commit, by the
    /// number of log frames up to that commit.
    struct LogImage: Sendable {
        var main: [UInt8]
        var log: [UInt8]
        var frameSize: Int
        var digests: [Int: UInt32]
    }

    /// Built once per process, and the same in every process.
    static let logImage: LogImage = makeLogImage()

    /// Generation 1 of the log: many small commits over three trees (with
    /// values of one to three pages), then a checkpoint into the main file.
    /// Generation 2 restarts the log with fewer frames (updates, deletes, a
    /// new tree, a dropped tree), so stale frames of generation 1 follow it.
    private static func makeLogImage() -> LogImage {
        let fs = MemoryFileSystem()
        let options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 1 << 30)
        do {
            let db = try Database.open(path: path, options: options, fileSystem: fs)
            for round in 0..<12 {
                try db.write { tx in
                    for name in ["alpha", "beta", "gamma"] {
                        let tree = try tx.createTree(name)
                        for i in stride(from: round, to: 300, by: 12) {
                            let size = i % 97 == 0 ? 4096 * (1 + i % 3) : 20 + i % 50
                            try tx.put(Array("\(name)-\(i)".utf8), [UInt8](repeating: UInt8(i % 251), count: size), in: tree)
                        }
                    }
                }
            }
            try db.checkpoint()
            var digests = [0: readEverything(db)!]
            let generation2: [(WriteTransaction) throws -> Void] = [
                { tx in
                    let alpha = try tx.tree("alpha")
                    for i in 0..<40 { try tx.put(Array("alpha-\(i * 7)".utf8), Array("updated \(i)".utf8), in: alpha) }
                },
                { tx in
                    let beta = try tx.tree("beta")
                    for i in 0..<60 { try tx.delete(Array("beta-\(i * 5)".utf8), in: beta) }
                },
                { tx in
                    let delta = try tx.createTree("delta")
                    for i in 0..<30 { try tx.put(Array("delta-\(i)".utf8), Array(repeating: 0x44, count: i * 10), in: delta) }
                    try tx.put(Array("delta-big".utf8), [UInt8](repeating: 0x42, count: 9000), in: delta)
                },
                { tx in try tx.dropTree("gamma") },
            ]
            for body in generation2 {
                try db.write(body)
                digests[db.statistics.walFrames] = readEverything(db)!
            }
            let crashed = fs.afterProcessCrash()
            try db.close()
            let main = crashed.file(path)!.withContents { $0 }
            var log = crashed.file(path + "-wal")!.withContents { $0 }
            let frameSize = 24 + db.pageSize
            fixSalt(&log, frameSize: frameSize)
            return LogImage(main: main, log: log, frameSize: frameSize, digests: digests)
        } catch {
            preconditionFailure("building the log harness's store failed: \(error)")
        }
    }

    /// Replaces the random salt 2 of the log header and of every frame
    /// slot with a constant and re-chains the frame checksums, so that the
    /// image and every input replayed against it behave the same in every
    /// process. Frames of a stale generation stay invalid (salt 1 differs).
    static func fixSalt(_ log: inout [UInt8], frameSize: Int) {
        guard log.count >= 32 else { return }
        let salt: [UInt8] = [0x5a, 0x5a, 0x5a, 0x5a]
        log.replaceSubrange(20..<24, with: salt)
        var chain = crc(0, log[0..<24])
        storeBE32(&log, 24, chain)
        var offset = 32
        while offset + frameSize <= log.count {
            log.replaceSubrange(offset + 12..<offset + 16, with: salt)
            chain = crc(crc(chain, log[offset..<offset + 16]), log[offset + 24..<offset + 28])
            storeBE32(&log, offset + 16, chain)
            offset += frameSize
        }
    }

    private static func crc(_ seed: UInt32, _ bytes: ArraySlice<UInt8>) -> UInt32 {
        bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return seed }
            return crc32c(seed, base, raw.count)
        }
    }

    private static func storeBE32(_ bytes: inout [UInt8], _ offset: Int, _ value: UInt32) {
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (24 - 8 * i)) }
    }

    // MARK: - Operations

    /// Runs ``DifferentialRunner`` on an in-memory store with its choices
    /// read from `bytes`: puts, deletes, gets, scans, rollbacks and reopens,
    /// with a small cache and frequent checkpoints. The store is valid
    /// throughout, so any error, not only a ``DifferentialRunner/Mismatch``,
    /// is a bug.
    public static func operations(_ bytes: [UInt8]) {
        let fs = MemoryFileSystem()
        let options = DatabaseOptions(durability: .normal, cacheSizeBytes: 64 * 4096, checkpointThresholdFrames: 64)
        var choices = ByteChoices(bytes)
        do {
            let db = try Database.open(path: path, options: options, fileSystem: fs)
            let runner = DifferentialRunner(db: db) { try Database.open(path: path, options: options, fileSystem: fs) }
            try runner.run(2_000, choices: &choices)
            try runner.verifyAll()
            try runner.db.close()
        } catch let mismatch as DifferentialRunner.Mismatch {
            preconditionFailure("differential mismatch: \(mismatch)")
        } catch {
            preconditionFailure("engine error on a valid in-memory store: \(error)")
        }
    }

    // MARK: - Helpers

    /// A fresh in-memory file system holding `files`.
    static func fileSystem(with files: [(path: String, bytes: [UInt8])]) -> MemoryFileSystem {
        let fs = MemoryFileSystem()
        for (path, bytes) in files {
            (try? fs.open(path, create: true, readOnly: false))?.close()
            fs.file(path)?.withContents { $0 = bytes }
        }
        return fs
    }

    /// Reads every entry of every tree with a cursor and returns a digest
    /// (a CRC-32 chained over tree names, keys, values and their lengths),
    /// or nil when a read throws. At most 2^16 entries are read per tree: a
    /// damaged store can link pages into a DAG whose walk would never end.
    static func readEverything(_ db: Database) -> UInt32? {
        var digest: UInt32 = 0
        func mix(_ bytes: [UInt8]) {
            digest = crc(digest, bytes[...])
            digest = crc(digest, [UInt8(truncatingIfNeeded: bytes.count), UInt8(truncatingIfNeeded: bytes.count >> 8)])
        }
        var failed = false
        do {
            try db.read { tx in
                for name in try tx.treeNames() {
                    mix(Array(name.utf8))
                    do {
                        let cursor = try tx.cursor(try tx.tree(name))
                        var more = try cursor.first()
                        var steps = 0
                        while more && steps < 1 << 16 {
                            mix(try cursor.key())
                            mix(try cursor.value())
                            more = try cursor.next()
                            steps += 1
                        }
                    } catch {
                        failed = true
                    }
                }
            }
        } catch {
            failed = true
        }
        return failed ? nil : digest
    }
}
