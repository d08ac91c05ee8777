/// Writer-side state of the `-wal` file: where the next frame goes and the
/// running checksum. Only the thread holding the writer gate (or `open`,
/// before the handle is shared) changes it; readers read frames by offset.
///
/// `generation` and `frameCount` are read by other threads too (readers key
/// and re-check frames by generation, ``Database/statistics`` reports the
/// frame count), so they are guarded by the owning ``Database``'s
/// `stateLock`: every read and write of them holds it, the writer's
/// included. The only exception is ``recover()``, which `open` runs before
/// the handle is shared. The other fields are the writer's alone.
final class WAL: @unchecked Sendable {
    let file: any StorageFile
    let path: String
    let pageSize: Int
    /// Bumped by each restart. Guarded by the database's `stateLock`.
    var generation: UInt32 = 0
    var salt1: UInt32 = 0
    var salt2: UInt32 = 0
    /// Frames of the current generation that hold committed data. Guarded
    /// by the database's `stateLock` (see the type's documentation).
    var frameCount = 0
    /// Checksum of the last committed frame (the header's when there is none).
    var lastChecksum: UInt32 = 0
    /// Chained checksum after the frames written by `appendCommit`, adopted
    /// by `commitAppended`.
    var pendingChecksum: UInt32 = 0
    /// False until a header of the current generation is on disk.
    var headerValid = false

    init(file: any StorageFile, path: String, pageSize: Int) {
        self.file = file
        self.path = path
        self.pageSize = pageSize
    }

    var frameSize: Int { WALFormat.frameHeaderSize + pageSize }

    /// One committed transaction found by recovery.
    struct RecoveredCommit {
        var frames: [(page: UInt32, frame: Int)]
        var pageCount: UInt32
    }

    /// Reads the header and every valid frame; returns the committed
    /// transactions in order. An absent, short or foreign header means an
    /// empty log (the main file alone is then the latest state: the log is
    /// only ever restarted after a complete checkpoint).
    func recover() throws -> [RecoveredCommit] {
        let size = try file.size()
        frameCount = 0
        headerValid = false
        guard size >= Int64(WALFormat.headerSize) else { return [] }
        var header = [UInt8](repeating: 0, count: WALFormat.headerSize)
        let got = try header.withUnsafeMutableBytes { try file.read(into: $0.baseAddress!, count: WALFormat.headerSize, at: 0) }
        guard got == WALFormat.headerSize else { return [] }
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
        guard magic == WALFormat.magic, version == WALFormat.version, crc == expected else { return [] }
        guard Int(headerPageSize) == pageSize else {
            throw StorageError.corruptFile("WAL page size \(headerPageSize) differs from the store's \(pageSize)")
        }
        generation = gen
        salt1 = s1
        salt2 = s2
        lastChecksum = crc
        headerValid = true

        var commits: [RecoveredCommit] = []
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
                guard loadBE32(f + 8) == salt1, loadBE32(f + 12) == salt2 else { break scan }
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
                    commits.append(RecoveredCommit(frames: pending, pageCount: commitSize))
                    pending.removeAll(keepingCapacity: true)
                    frameCount = index + j + 1
                    lastChecksum = chain
                }
            }
            if whole < batch { break }
            index += whole
        }
        return commits
    }

    /// The page size recorded in a valid WAL header at `path`, if any.
    static func peekPageSize(path: String, fileSystem: any StorageFileSystem) -> Int? {
        guard fileSystem.exists(path), let file = try? fileSystem.open(path, create: false, readOnly: true) else { return nil }
        defer { file.close() }
        var header = [UInt8](repeating: 0, count: WALFormat.headerSize)
        let got =
            (try? header.withUnsafeMutableBytes { try file.read(into: $0.baseAddress!, count: WALFormat.headerSize, at: 0) }) ?? 0
        guard got == WALFormat.headerSize else { return nil }
        return header.withUnsafeBytes { raw -> Int? in
            let p = raw.baseAddress!
            guard loadBE32(p) == WALFormat.magic, loadBE32(p + 24) == crc32c(0, p, 24) else { return nil }
            let size = Int(loadBE32(p + 8))
            return FileHeader.isValidPageSize(size) ? size : nil
        }
    }

    /// Starts a new generation at offset 0: new salts and a new header. The
    /// caller holds the database's `stateLock` (this changes `generation`
    /// and `frameCount`) and syncs the header before writing any frame of
    /// the generation.
    func restart() throws {
        generation &+= 1
        salt1 &+= 1
        salt2 = UInt32.random(in: 0...UInt32.max)
        var header = [UInt8](repeating: 0, count: WALFormat.headerSize)
        header.withUnsafeMutableBytes { raw in
            let p = raw.baseAddress!
            storeBE32(p, WALFormat.magic)
            storeBE32(p + 4, WALFormat.version)
            storeBE32(p + 8, UInt32(pageSize))
            storeBE32(p + 12, generation)
            storeBE32(p + 16, salt1)
            storeBE32(p + 20, salt2)
            storeBE32(p + 24, crc32c(0, p, 24))
        }
        headerValid = false
        try header.withUnsafeBytes { try file.write($0.baseAddress!, count: WALFormat.headerSize, at: 0) }
        lastChecksum = header.withUnsafeBytes { loadBE32($0.baseAddress! + 24) }
        frameCount = 0
        headerValid = true
    }

    /// Writes one transaction's pages as frames from frame `first` on (the
    /// `frameCount` the caller read under the state lock: the frame after
    /// the last commit), the last one marked as the commit frame; the caller
    /// syncs and then advances `frameCount` with ``commitAppended(frameCount:)``.
    /// Pages must already carry their page checksums. On error nothing is
    /// published: the frames written so far lie past the last commit and are
    /// ignored by recovery and overwritten by the next commit.
    func appendCommit(_ pages: [(number: UInt32, page: Page)], at first: Int, pageCount: UInt32) throws {
        precondition(!pages.isEmpty && headerValid)
        let batchFrames = min(pages.count, max(1, (1 << 20) / frameSize))
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: batchFrames * frameSize, alignment: 16)
        defer { buffer.deallocate() }
        var chain = lastChecksum
        var i = 0
        while i < pages.count {
            let n = min(batchFrames, pages.count - i)
            for j in 0..<n {
                let (number, page) = pages[i + j]
                let f = buffer + j * frameSize
                storeBE32(f, number)
                storeBE32(f + 4, i + j == pages.count - 1 ? pageCount : 0)
                storeBE32(f + 8, salt1)
                storeBE32(f + 12, salt2)
                (f + WALFormat.frameHeaderSize).copyMemory(from: page.bytes, byteCount: pageSize)
                let c = Self.frameChecksum(chain, f)
                storeBE32(f + 16, c)
                storeBE32(f + 20, 0)
                chain = c
            }
            try file.write(buffer, count: n * frameSize, at: WALFormat.frameOffset(first + i, pageSize: pageSize))
            i += n
        }
        pendingChecksum = chain
    }

    /// The chained checksum of the frame at `frame`: CRC-32C continued from
    /// `previous` over the 16 header bytes and the page's own checksum.
    static func frameChecksum(_ previous: UInt32, _ frame: UnsafeRawPointer) -> UInt32 {
        let c = crc32c(previous, frame, 16)
        return crc32c(c, frame + WALFormat.frameHeaderSize, 4)
    }

    /// Adopts the frames of the last `appendCommit` once they are durable as
    /// the durability level requires. The caller holds the database's
    /// `stateLock`.
    func commitAppended(frameCount newCount: Int) {
        frameCount = newCount
        lastChecksum = pendingChecksum
    }

    /// Reads the page image of frame `index` into `page`.
    func readFrame(_ index: Int, into page: Page) throws -> Bool {
        let offset = WALFormat.frameOffset(index, pageSize: pageSize) + Int64(WALFormat.frameHeaderSize)
        return try file.read(into: page.bytes, count: pageSize, at: offset) == pageSize
    }
}
