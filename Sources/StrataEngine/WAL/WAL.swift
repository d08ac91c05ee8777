import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The write-ahead log and its index: the `-wal` file (``WALFormat``), the
/// shared index every handle of the store maps (``SharedIndex``), and this
/// handle's copy of the index's page → frame lists. It owns frame lookup,
/// commit append, checkpoint, restart, recovery (a rebuild of the index
/// from the log) and the reader marks; ``Database`` only asks it.
///
/// Locking: every field is guarded by the database's state lock (`lock`),
/// except those marked *writer*, which only the holder of the writer lock
/// (the database's writer gate and the index's writer lock) touches.
final class WAL: @unchecked Sendable {
    /// The log file. A read-only handle that found no log opens it when a
    /// writer has created it. Guarded by `lock`.
    @exclusivity(unchecked) var file: any StorageFile
    let path: String
    let pageSize: Int
    let readOnly: Bool
    let fileSystem: any StorageFileSystem
    let shared: SharedIndex
    /// The database's state lock.
    let lock: Lock
    /// True when every commit syncs the log (durability `full`): an append
    /// of more than one write's frames then starts each write's trip to
    /// the disk before building the next
    /// (``StorageFile/startWriteback(offset:count:)``). At `normal` a
    /// commit returns without waiting for the disk, and the hint (which
    /// waits when the disk's queue is full) would only slow it.
    let startsWriteback: Bool

    /// The index state this handle adopted last, and the sequence word it
    /// read it at.
    @exclusivity(unchecked) var state = SharedIndex.State()
    /// Nil until the first adoption: every 64-bit value is a sequence word
    /// a damaged index can hold.
    @exclusivity(unchecked) var sequenceSeen: UInt64?
    /// Page → its frames in generation `indexGeneration`, oldest first, for
    /// frames below `indexedFrames`.
    @exclusivity(unchecked) var index: [UInt32: [Int]] = [:]
    @exclusivity(unchecked) private var indexedFrames = 0
    @exclusivity(unchecked) private var indexGeneration: UInt32 = 0
    @exclusivity(unchecked) private var indexEpoch: UInt64 = 0
    @exclusivity(unchecked) private var indexCRC: UInt32 = 0

    /// How far the log file is known to hold written bytes: its size when
    /// last looked at, including the zeros ``prepareSpace(through:file:)``
    /// wrote past the frames. Writer.
    @exclusivity(unchecked) private var preparedEnd: Int64 = 0

    /// This handle's active readers: position → how many.
    @exclusivity(unchecked) var readers: [UInt64: Int] = [:]
    /// The mark published in this handle's slot.
    @exclusivity(unchecked) private var publishedMark = SharedIndex.noMark

    init(
        file: any StorageFile, path: String, pageSize: Int, readOnly: Bool, fileSystem: any StorageFileSystem,
        shared: SharedIndex, lock: Lock, startsWriteback: Bool
    ) {
        self.startsWriteback = startsWriteback
        self.file = file
        self.path = path
        self.pageSize = pageSize
        self.readOnly = readOnly
        self.fileSystem = fileSystem
        self.shared = shared
        self.lock = lock
    }

    var frameSize: Int { WALFormat.frameHeaderSize + pageSize }

    // MARK: - Adopting the shared state

    /// What ``refresh()`` found.
    enum Refresh {
        /// Nothing changed since the last adoption.
        case current
        /// A newer state was adopted; `foreignCheckpoint` when another
        /// handle checkpointed or restarted since this one last looked (its
        /// cached main-file pages may be stale).
        case adopted(foreignCheckpoint: Bool)
        /// A writer is publishing (or died while it did).
        case busy
        /// The index cannot be trusted: rebuild it.
        case damaged(String)
    }

    /// Adopts the shared index's latest state: new frames join this
    /// handle's frame lists (checked against the index's frame-list
    /// checksum, and read again if a writer changed the index meanwhile).
    /// Nothing changes unless the whole new state checks out. The caller
    /// holds `lock`.
    func refresh() -> Refresh {
        var attempts = 0
        while true {
            if let seen = sequenceSeen, shared.sequence() == seen { return .current }
            let new: SharedIndex.State
            let sequence: UInt64
            switch shared.read() {
            case .busy: return .busy
            case .damaged(let why): return .damaged(why)
            case .state(let state, let word):
                new = state
                sequence = word
            }
            let fresh = new.epoch != indexEpoch || new.generation != indexGeneration
            if !fresh && new.frames < indexedFrames {
                return .damaged("the committed frame count went back from \(indexedFrames) to \(new.frames)")
            }
            let from = fresh ? 0 : indexedFrames
            var crc = fresh ? 0 : indexCRC
            var pages: [UInt32] = []
            if new.frames > from {
                guard (try? shared.holds(frames: new.frames)) == true else {
                    return .damaged("the index counts \(new.frames) frames but the file is too short for them")
                }
                pages.reserveCapacity(new.frames - from)
                for i in from..<new.frames {
                    var number = shared.pageOfFrame(i)
                    pages.append(number)
                    crc = crc32c(crc, &number, 4)
                }
            }
            // A restart and new commits may have rewritten the entries
            // while they were read: read the whole state again.
            atomicMemoryFence(ordering: .acquiring)
            if shared.sequence() != sequence {
                attempts += 1
                if attempts < 1000 { continue }
                return .busy
            }
            guard crc == new.frameListCRC else { return .damaged("frame list checksum mismatch") }
            if fresh {
                index.removeAll(keepingCapacity: true)
                indexGeneration = new.generation
                indexEpoch = new.epoch
            }
            for (i, number) in pages.enumerated() { index[number, default: []].append(from + i) }
            indexedFrames = new.frames
            indexCRC = crc
            // A rebuild (a new epoch) counts as another handle's
            // checkpoint: what this handle cached of the main file is
            // suspect.
            let foreign = new.checkpoints != state.checkpoints || new.epoch != state.epoch
            state = new
            sequenceSeen = sequence
            return .adopted(foreignCheckpoint: foreign)
        }
    }

    /// Opens the log of a read-only handle that found none at open, once
    /// the adopted state says it holds frames. The caller holds `lock`.
    func openLogIfMissing() {
        guard readOnly, file is EmptyFile, state.frames > 0, fileSystem.exists(path),
            let opened = try? fileSystem.open(path, create: false, readOnly: true)
        else { return }
        file = opened
    }

    /// Adopts a state this handle published itself (the caller holds
    /// `lock` and the writer lock): the frames it appended join the lists.
    func adoptOwn(_ new: SharedIndex.State, sequence: UInt64, appended: [UInt32] = []) {
        if new.generation != indexGeneration || new.epoch != indexEpoch {
            index.removeAll(keepingCapacity: true)
            indexedFrames = 0
            indexGeneration = new.generation
            indexEpoch = new.epoch
        }
        for (i, number) in appended.enumerated() { index[number, default: []].append(new.frames - appended.count + i) }
        indexedFrames = new.frames
        indexCRC = new.frameListCRC
        state = new
        sequenceSeen = sequence
    }

    /// The frame holding page `number` as of position `position`, or nil
    /// when the main file holds it for that position. The caller holds
    /// `lock`. `position` must be a live one (a reader's or the writer's),
    /// never below the backfilled count of its generation.
    @inline(__always) func frame(of number: UInt32, at position: UInt64) -> Int? {
        let limit = Int(position & 0xffff_ffff)
        // A snapshot wholly backfilled (after a full checkpoint) reads
        // every page from the main file: no lookup.
        guard limit > state.backfilled, !index.isEmpty, UInt32(truncatingIfNeeded: position >> 32) == indexGeneration,
            let frames = index[number]
        else { return nil }
        var i = frames.count - 1
        while i >= 0 {
            // A backfilled frame's image is the main file's (no live
            // position lies below the backfilled count, so no newer
            // backfilled frame of the page can be one this reader must
            // not see): read it there, through the mapping.
            if frames[i] < limit { return frames[i] < state.backfilled ? nil : frames[i] }
            i -= 1
        }
        return nil
    }

    /// The highest page number any frame of the adopted state holds, or
    /// nil when the index names none. The caller holds `lock`.
    func highestIndexedPage() -> UInt32? { index.keys.max() }

    /// The log's generation as the shared index says now, read after a
    /// frame was read: a different one means the log restarted meanwhile
    /// and the frame may have been overwritten.
    func currentGeneration() -> UInt32 {
        atomicMemoryFence(ordering: .acquiring)
        return UInt32(truncatingIfNeeded: shared.load(.generation))
    }

    /// Reads the page image of frame `index` into `page`.
    func readFrame(_ index: Int, into page: Page) throws -> Bool {
        try readFrame(index, into: page.bytes)
    }

    /// Reads the page image of frame `index` into the page-sized `bytes`.
    func readFrame(_ index: Int, into bytes: UnsafeMutableRawPointer) throws -> Bool {
        let file = lock.withLock { self.file }
        let offset = WALFormat.frameOffset(index, pageSize: pageSize) + Int64(WALFormat.frameHeaderSize)
        return try file.read(into: bytes, count: pageSize, at: offset) == pageSize
    }

    // MARK: - Reader marks

    /// Registers a reader of the adopted state; returns its position, or
    /// nil when the state changed while the mark was published (adopt
    /// again and retry). The caller holds `lock`.
    func addReader() -> UInt64? {
        let position = state.position
        readers[position, default: 0] += 1
        if position < publishedMark {
            publishedMark = position
            shared.setMark(position)
            if shared.sequence() != sequenceSeen {
                removeReader(position)
                return nil
            }
        }
        return position
    }

    /// Unregisters a reader of `position`. The caller holds `lock`.
    func removeReader(_ position: UInt64) {
        guard let n = readers[position] else { return }
        if n > 1 {
            readers[position] = n - 1
            return
        }
        readers.removeValue(forKey: position)
        let oldest = readers.keys.min() ?? SharedIndex.noMark
        if oldest != publishedMark {
            publishedMark = oldest
            shared.setMark(oldest)
        }
    }

    // MARK: - Writing (the writer lock held)

    /// Starts a new generation at offset 0 when the log is empty or every
    /// frame is in the main file and no reader of any handle needs one;
    /// returns true when it did. Over a log that held frames, the header
    /// is synced (unless `sync` is false) before any frame of the new
    /// generation is written; a failed sync throws ``FsyncFailure``. An
    /// empty log (a new store, or one its last close truncated) has no
    /// frame a lost or torn header could make valid, so its header is made
    /// durable by the first commit's own sync: the first save after an
    /// open costs one sync, not two.
    func restartIfPossible(sync: Bool) throws -> Bool {
        guard let current = lock.withLock({ sequenceSeen == shared.sequence() ? state : nil }) else { return false }
        let empty = current.frames == 0 && current.salt1 == 0 && current.salt2 == 0
        if !empty {
            guard current.backfilled == current.frames, current.frames > 0, announceIfCurrent() else { return false }
            if let oldest = try shared.oldestMark(), oldest < current.position { return false }
        }
        var pending = current
        pending.restartPending = true
        lock.withLock { adoptOwn(pending, sequence: shared.publish(pending)) }
        var new = current
        new.generation = current.generation &+ 1
        new.salt1 = current.salt1 &+ 1
        new.salt2 = UInt32.random(in: 0...UInt32.max)
        if new.salt1 == 0 && new.salt2 == 0 { new.salt2 = 1 }
        var header = [UInt8](repeating: 0, count: WALFormat.headerSize)
        header.withUnsafeMutableBytes { raw in
            let p = raw.baseAddress!
            storeBE32(p, WALFormat.magic)
            storeBE32(p + 4, WALFormat.version)
            storeBE32(p + 8, UInt32(pageSize))
            storeBE32(p + 12, new.generation)
            storeBE32(p + 16, new.salt1)
            storeBE32(p + 20, new.salt2)
            storeBE32(p + 24, crc32c(0, p, 24))
        }
        let file = lock.withLock { self.file }
        try header.withUnsafeBytes { try file.write($0.baseAddress!, count: WALFormat.headerSize, at: 0) }
        if sync && !empty {
            do { try file.sync() } catch { throw FsyncFailure(underlying: error) }
        }
        new.chain = header.withUnsafeBytes { loadBE32($0.baseAddress! + 24) }
        new.frames = 0
        new.backfilled = 0
        new.frameListCRC = 0
        new.restartPending = false
        new.checkpoints = current.checkpoints &+ 1
        lock.withLock { adoptOwn(new, sequence: shared.publish(new)) }
        return true
    }

    /// Writes one transaction's pages as frames after the last published
    /// commit, or after `tail` (commits appended and not yet published, or
    /// this transaction's spilled frames), the last one marked as the
    /// commit frame, and returns the new tail (the first frame is
    /// `tail.frames - pages.count`); the caller syncs and then calls
    /// ``publish(_:first:spilled:chain:header:mainChanged:alongside:)``.
    /// Pages must already carry their page checksums. On error nothing is
    /// published: the frames written so far lie past the last commit and
    /// are ignored by recovery and overwritten by the next commit.
    func appendCommit(
        _ pages: [(number: UInt32, page: Page)], pageCount: UInt32, after tail: LogTail? = nil
    ) throws -> LogTail {
        try append(pages, commitPageCount: pageCount, after: tail).tail
    }

    /// As ``appendCommit(_:pageCount:after:)``, except that frames that fit
    /// one write into space the log already holds (see
    /// ``prepareSpace(through:file:)``) are built, checksummed and chained
    /// but not written: the caller writes them (``FrameWrite/write()``)
    /// once it has released the writer gate, before the sync that makes
    /// them durable. Nil when the frames were written here.
    func appendCommitDeferringWrite(
        _ pages: [(number: UInt32, page: Page)], pageCount: UInt32, after tail: LogTail?
    ) throws -> (tail: LogTail, write: FrameWrite?) {
        try append(pages, commitPageCount: pageCount, after: tail, deferWrite: true)
    }

    /// A commit's frames, built and not yet written (see
    /// ``appendCommitDeferringWrite(_:pageCount:after:)``). Written or
    /// discarded exactly once; either frees the bytes.
    struct FrameWrite {
        let file: any StorageFile
        let bytes: UnsafeMutableRawPointer
        let count: Int
        let offset: Int64

        func write() throws {
            defer { bytes.deallocate() }
            try file.write(bytes, count: count, at: offset)
        }

        func discard() { bytes.deallocate() }
    }

    /// Writes pages a write transaction spills as frames that are not a
    /// commit (every frame's commit field is 0), after `tail` or the last
    /// published commit; returns the new tail. Recovery keeps them only
    /// when a commit frame follows them, the transaction's own.
    func appendSpilled(_ pages: [(number: UInt32, page: Page)], after tail: LogTail?) throws -> LogTail {
        try append(pages, commitPageCount: nil, after: tail).tail
    }

    private func append(
        _ pages: [(number: UInt32, page: Page)], commitPageCount: UInt32?, after tail: LogTail?,
        deferWrite: Bool = false
    ) throws -> (tail: LogTail, write: FrameWrite?) {
        let current = lock.withLock { state }
        precondition(!pages.isEmpty && !current.restartPending)
        let first = tail?.frames ?? current.frames
        try shared.reserve(frames: first + pages.count)
        let file = lock.withLock { self.file }
        let end = WALFormat.frameOffset(first + pages.count, pageSize: pageSize)
        if pages.count * frameSize < Self.growth { prepareSpace(through: end, file: file) }
        let batchFrames = min(pages.count, max(1, (1 << 20) / frameSize))
        // Deferred only into bytes the file holds already: the write then
        // allocates nothing on a file system that overwrites in place, so
        // a full disk still fails the commit under the gate. One that
        // fails anyway fails its commit and those queued after it (see
        // `GroupCommit`).
        let deferred = deferWrite && batchFrames == pages.count && end <= preparedEnd
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: batchFrames * frameSize, alignment: 16)
        var handedOff = false
        defer { if !handedOff { buffer.deallocate() } }
        var chain = tail?.chain ?? current.chain
        var i = 0
        while i < pages.count {
            let n = min(batchFrames, pages.count - i)
            for j in 0..<n {
                let (number, page) = pages[i + j]
                let f = buffer + j * frameSize
                storeBE32(f, number)
                storeBE32(f + 4, i + j == pages.count - 1 ? commitPageCount ?? 0 : 0)
                storeBE32(f + 8, current.salt1)
                storeBE32(f + 12, current.salt2)
                (f + WALFormat.frameHeaderSize).copyMemory(from: page.bytes, byteCount: pageSize)
                let c = Self.frameChecksum(chain, f)
                storeBE32(f + 16, c)
                storeBE32(f + 20, 0)
                chain = c
            }
            let offset = WALFormat.frameOffset(first + i, pageSize: pageSize)
            if deferred {
                handedOff = true
                return (
                    LogTail(frames: first + pages.count, chain: chain),
                    FrameWrite(file: file, bytes: buffer, count: n * frameSize, offset: offset)
                )
            }
            try file.write(buffer, count: n * frameSize, at: offset)
            // The disk takes this mebibyte while the next is built; the
            // last one goes with the sync.
            if startsWriteback && i + n < pages.count { file.startWriteback(offset: offset, count: n * frameSize) }
            i += n
        }
        return (LogTail(frames: first + pages.count, chain: chain), nil)
    }

    /// The most the log grows ahead of its frames at a time (see
    /// ``prepareSpace(through:file:)``).
    static let growth: Int64 = 1 << 20

    /// ``growth`` zero bytes, made once for every log of the process:
    /// zeroing a mebibyte for each growth took a tenth of the instructions
    /// of a one-object save while a new log grew. Never written to (the
    /// pages a calloc maps stay the kernel's shared zero page until then).
    nonisolated(unsafe) private static let zeros = UnsafeRawPointer(calloc(Int(growth), 1)!)

    /// Before a small append (under ``growth``) writes frames up to offset
    /// `end`: when that lies past the file's end, writes zeros after `end`, as
    /// many bytes as `end` (at least 64 KiB, at most ``growth``): a log doubles
    /// until it grows a mebibyte at a time, and a small store's log stays
    /// small. (A large append, a bulk commit or a spill, extends the file
    /// itself; zeros after it would only be written twice.) A commit that
    /// extends the file makes its sync flush the file's new size as well (on
    /// ext4 a journal commit: 230 µs against 146 µs for a 4 KiB write and
    /// `fdatasync` on this machine's disk); the commits after it then overwrite
    /// blocks that already exist, and their syncs flush only data. Zeros are
    /// what a log past its last valid frame may hold: recovery stops at the
    /// first frame whose salts and checksum do not match. Nothing depends on
    /// this for correctness, so a failure to write the zeros (a full disk) is
    /// left for the frames' own write to meet or not. Bytes already in the file
    /// are never written here: a log restart reuses the file from its start.
    /// The last handle's close truncates the log, zeros included.
    private func prepareSpace(through end: Int64, file: any StorageFile) {
        guard end > preparedEnd else { return }
        let size: Int64
        do {
            size = try file.size()
        } catch {
            return  // see above: the frames' own write meets what failed here
        }
        guard end > size else {
            preparedEnd = size
            return
        }
        let chunk = Int(min(max(end, 1 << 16), Self.growth))
        do {
            try file.write(Self.zeros, count: chunk, at: end)
            preparedEnd = end + Int64(chunk)
        } catch {
            // See above: the frames' own write reports a full disk.
            preparedEnd = size
        }
    }

    /// Where the log's appended frames end: their count and the chained
    /// checksum after the last. A commit appended but not yet published
    /// (its sync is pending) moves the tail past the published state.
    struct LogTail {
        var frames: Int
        var chain: UInt32
    }

    /// Publishes the frames of a commit written at `first`: the pages it
    /// spilled (`spilled`, page numbers in frame order), then the pages
    /// ``appendCommit(_:pageCount:after:)`` wrote (now as durable as the
    /// durability level requires; `chain` is the tail it returned), in the
    /// shared index and this handle's lists; returns the new state. Commits appended one after
    /// the other are published in the same order. The caller holds the
    /// writer lock, not `lock` (publishing happens under `lock`, so this
    /// handle's readers never adopt the state half-way); `alongside` runs
    /// in the same critical section. `mainChanged`: the commit wrote pages
    /// straight into the main file (a transaction that spilled); it counts
    /// as a checkpoint, so other handles forget what they cached of it.
    func publish(
        _ pages: [(number: UInt32, page: Page)], first: Int, spilled: [UInt32], chain: UInt32, header: FileHeader,
        mainChanged: Bool, alongside: (SharedIndex.State) -> Void
    ) -> SharedIndex.State {
        var current = lock.withLock { state }
        var numbers = spilled
        numbers.reserveCapacity(spilled.count + pages.count)
        for entry in pages { numbers.append(entry.number) }
        var crc = current.frameListCRC
        for var number in numbers { crc = crc32c(crc, &number, 4) }
        shared.setPages(numbers, from: first)
        current.frames = first + numbers.count
        current.chain = chain
        current.commits &+= 1
        current.frameListCRC = crc
        current.pageCount = header.pageCount
        current.freelistHead = header.freelistHead
        current.freeCount = header.freeCount
        current.changeCounter = header.commitCounter
        if mainChanged { current.checkpoints &+= 1 }
        lock.withLock {
            adoptOwn(current, sequence: shared.publish(current), appended: numbers)
            alongside(current)
        }
        return current
    }

    /// The chained checksum of the frame at `frame`: CRC-32C continued from
    /// `previous` over the 16 header bytes and the page's own checksum.
    static func frameChecksum(_ previous: UInt32, _ frame: UnsafeRawPointer) -> UInt32 {
        let c = crc32c(previous, frame, 16)
        return crc32c(c, frame + WALFormat.frameHeaderSize, 4)
    }
}
