/// Recovery: reading the log's committed frames, and rebuilding the shared
/// index from them.
extension WAL {
    /// One committed transaction found in the log.
    struct RecoveredCommit {
        var frames: [(page: UInt32, frame: Int)]
        var pageCount: UInt32
    }

    /// What the log file holds: its header's generation and salts, the
    /// checksum chain after the last commit, and the commits.
    struct Contents {
        var generation: UInt32 = 0
        var salt1: UInt32 = 0
        var salt2: UInt32 = 0
        var chain: UInt32 = 0
        var commits: [RecoveredCommit] = []
        var frames: Int { commits.last.map { $0.frames.last!.frame + 1 } ?? 0 }
    }

    /// Reads the header and every valid frame. An absent, short or foreign
    /// header means an empty log (the main file alone is then the latest
    /// state: the log is only ever restarted after a complete checkpoint).
    func scan() throws -> Contents {
        let file = lock.withLock { self.file }
        let size = try file.size()
        var contents = Contents()
        guard size >= Int64(WALFormat.headerSize) else { return contents }
        var header = [UInt8](repeating: 0, count: WALFormat.headerSize)
        let got = try header.withUnsafeMutableBytes { try file.read(into: $0.baseAddress!, count: WALFormat.headerSize, at: 0) }
        guard got == WALFormat.headerSize else { return contents }
        let (magic, version, headerPageSize, gen, s1, s2, crc) = header.withUnsafeBytes {
            raw -> (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) in
            let p = raw.baseAddress!
            return (
                loadBE32(p), loadBE32(p + 4), loadBE32(p + 8), loadBE32(p + 12), loadBE32(p + 16), loadBE32(p + 20),
                loadBE32(p + 24)
            )
        }
        let expected = header.withUnsafeBytes { crc32c(0, $0.baseAddress!, 24) }
        // A header that fails these checks is what a crash during a restart
        // or a foreign file leaves: treat the log as empty.
        guard magic == WALFormat.magic, version == WALFormat.version, crc == expected else { return contents }
        guard Int(headerPageSize) == pageSize else {
            throw StorageError.corruptFile("WAL page size \(headerPageSize) differs from the store's \(pageSize)")
        }
        contents.generation = gen
        contents.salt1 = s1
        contents.salt2 = s2
        contents.chain = crc

        var pending: [(page: UInt32, frame: Int)] = []
        var chain = crc
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: frameSize * 64, alignment: 16)
        defer { buffer.deallocate() }
        var index = 0
        let total = Int((size - Int64(WALFormat.headerSize)) / Int64(frameSize))
        scan: while index < total {
            let batch = min(64, total - index)
            let n = try file.read(into: buffer, count: batch * frameSize, at: WALFormat.frameOffset(index, pageSize: pageSize))
            let whole = n / frameSize
            if whole == 0 { break }
            for j in 0..<whole {
                let f = buffer + j * frameSize
                guard loadBE32(f + 8) == s1, loadBE32(f + 12) == s2 else { break scan }
                let c = Self.frameChecksum(chain, f)
                guard c == loadBE32(f + 16) else { break scan }
                let pageNo = loadBE32(f)
                guard
                    Page.checksum(f + WALFormat.frameHeaderSize, size: pageSize, pageNumber: pageNo)
                        == loadBE32(f + WALFormat.frameHeaderSize)
                else { break scan }
                chain = c
                pending.append((pageNo, index + j))
                let commitSize = loadBE32(f + 4)
                if commitSize != 0 {
                    contents.commits.append(RecoveredCommit(frames: pending, pageCount: commitSize))
                    pending.removeAll(keepingCapacity: true)
                    contents.chain = chain
                }
            }
            if whole < batch { break }
            index += whole
        }
        return contents
    }

    /// Rebuilds the shared index from the log: the caller holds the writer
    /// lock (or is the only handle, holding the open lock exclusively).
    /// `header` gives the latest commit's file header from the log's
    /// contents (its page 0 frame, or the main file's). Reader marks are
    /// kept; the backfilled count starts at 0, so the next checkpoint
    /// copies every frame again (harmless: it copies the same images).
    func rebuild(header: (Contents) throws -> FileHeader) throws {
        if readOnly {
            // A log that exists but cannot be read must not be taken for
            // an empty one: the index would lose its commits.
            try lock.withLock {
                if file is EmptyFile, fileSystem.exists(path) {
                    file = try fileSystem.open(path, create: false, readOnly: true)
                }
            }
        }
        let contents = try scan()
        let fileHeader = try header(contents)
        var pages: [UInt32] = []
        pages.reserveCapacity(contents.frames)
        for commit in contents.commits { for entry in commit.frames { pages.append(entry.page) } }
        // Frames past the last commit belong to no commit: the frame list
        // holds the committed ones only.
        try shared.reserve(frames: pages.count)
        shared.setPages(pages, from: 0)
        var crc: UInt32 = 0
        for var number in pages { crc = crc32c(crc, &number, 4) }
        let old = lock.withLock { state }
        var new = SharedIndex.State()
        // Positions only grow: a log whose header is gone (0) or older than
        // the generation handles have seen gets a newer one in the index
        // (frames are told apart by their salts, not by this number).
        new.generation = contents.generation >= old.generation ? contents.generation : old.generation &+ 1
        new.salt1 = contents.salt1
        new.salt2 = contents.salt2
        new.frames = pages.count
        new.chain = contents.chain
        new.backfilled = 0
        new.commits = old.commits &+ 1
        new.checkpoints = old.checkpoints &+ 1
        new.epoch = UInt64.random(in: 1...UInt64.max)
        new.frameListCRC = crc
        new.pageCount = fileHeader.pageCount
        new.freelistHead = fileHeader.freelistHead
        new.freeCount = fileHeader.freeCount
        new.changeCounter = fileHeader.commitCounter
        lock.withLock { adoptOwn(new, sequence: shared.publish(new, reset: true), appended: pages) }
    }
}

extension WAL {
    /// The page size recorded in a valid WAL header at `path`, if any.
    static func peekPageSize(path: String, fileSystem: any StorageFileSystem) -> Int? {
        guard fileSystem.exists(path), let file = try? fileSystem.open(path, create: false, readOnly: true) else { return nil }
        defer { file.close() }
        var header = [UInt8](repeating: 0, count: WALFormat.headerSize)
        guard
            let got = try? header.withUnsafeMutableBytes({
                try file.read(into: $0.baseAddress!, count: WALFormat.headerSize, at: 0)
            }), got == WALFormat.headerSize
        else { return nil }
        return header.withUnsafeBytes { raw -> Int? in
            let p = raw.baseAddress!
            guard loadBE32(p) == WALFormat.magic, loadBE32(p + 24) == crc32c(0, p, 24) else { return nil }
            let size = Int(loadBE32(p + 8))
            return FileHeader.isValidPageSize(size) ? size : nil
        }
    }
}
