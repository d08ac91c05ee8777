import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The shared index of the log: `<store>-shm`, mapped by every handle that
/// opens the store (SQLite's wal-index is the reference design). It tells a
/// reader in any process where the latest commit ends and which page each
/// log frame holds, so that a read transaction starts on the latest commit
/// of any process without reading the log; it holds the reader marks that
/// every checkpoint honours; and bytes beside it carry the locks that make
/// writers of several processes take turns.
///
/// The file never leaves its machine and is never synced: it is rebuilt
/// from the log whenever it cannot be trusted (see *Rules*). Integers are
/// 8-byte words in the machine's byte order, read and written atomically.
///
/// ```
/// OFFSET SIZE DESCRIPTION
///      0    8 magic 0x5353484D ("SSHM") << 32 | format version 1; another
///             value (a foreign file, another byte order) means: rebuild
///      8    8 page size of the store
///     16    8 sequence lock: odd while the writer changes bytes 24..<136
///     24    8 log generation (of the log header the index describes)
///     32    8 salt 1 << 32 | salt 2 of that log header
///     40    8 committed frames: frames 0..<n hold committed transactions
///     48    8 checksum chain after frame n - 1 (the log header's when n = 0)
///     56    8 backfilled frames: frames 0..<n are in the main file, synced
///     64    8 commits published since the index was built
///     72    8 checkpoints and restarts since the index was built
///     80    8 index epoch: new (random) at every rebuild
///     88    8 CRC-32C chained over the page numbers of frames 0..<committed
///     96    8 restart pending: nonzero while a restart rewrites the log header
///    104    8 the last commit's file header: page count << 32 | first
///             freelist trunk
///    112    8 its free-page count
///    120    8 its change counter
///    128    8 CRC-32C of bytes 0..<16 and 24..<128
///    136  120 reserved, zero
///    256  512 reader marks: 64 slots of 8 bytes (see below)
///    768    . reserved, zero, to 4096
///   4096 4×N frame list: the page number of frame i at 4096 + 4i, for
///             every frame the log's current generation holds
/// ```
///
/// Lock table: byte-range locks (``StorageFile/setLock(_:at:)``, held by
/// the kernel for an open descriptor and released when it closes or its
/// process dies) on bytes past the data, at offset 2^40 + k:
/// ```
///  k  LOCK     HELD
///  0  writer   exclusive while a write transaction, a checkpoint, a
///              restart or a rebuild of the index runs
///  1  open     shared by every open handle for its life; exclusive by the
///              first handle while it builds the index, and by the last
///              one while it closes the store
///  8+i slot i  exclusive by the handle that owns reader slot i, for its life
/// ```
///
/// Rules:
/// - *Position.* A snapshot is a position: log generation << 32 | committed
///   frames. A reader of position (g, n) reads a page from the latest
///   frame below n that holds it, else from the main file.
/// - *Publishing.* Only the holder of the writer lock changes bytes 24..<136,
///   and only inside the sequence lock: it makes the word odd, changes the
///   fields and the header checksum, then makes it even. Frame-list
///   entries are written before the committed-frame count that covers
///   them. A reader copies the fields between two equal even readings of
///   the word and checks the checksum; a reader that finds the word odd
///   for long, with no writer lock held, found a writer that died in the
///   middle, and rebuilds.
/// - *Adopt first.* A handle that takes the writer lock adopts the latest
///   state before it commits, checkpoints or restarts: other handles may
///   have published since it last looked, even between two takings of the
///   lock by one commit. A checkpoint or restart planned from an older
///   state would copy older page images over newer ones; both refuse to
///   run unless the sequence word is the one the handle adopted.
/// - *Reader marks.* A handle publishes in its slot the oldest position
///   any of its read transactions uses (all ones: none), then re-reads the
///   sequence word; a checkpoint or restart first bumps the sequence word,
///   then reads the marks (both sides with a full fence between, so at
///   least one of them sees the other). Marks of slots whose lock no one
///   holds belong to dead handles and are ignored.
/// - *Checkpoint.* Copies into the main file, for each page, its latest
///   frame below the oldest live mark (and below the committed count);
///   then syncs the main file, then publishes the backfilled count.
/// - *Restart.* When every frame is backfilled and no live mark is older
///   than the last commit, the writer sets "restart pending", writes and
///   syncs a new log header, then publishes the new generation with no
///   frames. A pending restart found by the next writer means its writer
///   died: the index is rebuilt from the log.
/// - *Trust.* The first handle to open the store (the open lock taken
///   exclusively) rebuilds the index from the log. Every other reading
///   checks the magic, page size, header checksum, that counts are in
///   range and the file long enough, and the frame list's checksum for the
///   entries it adopts; anything wrong is rebuilt from the log under the
///   writer lock, never trusted.
final class SharedIndex: @unchecked Sendable {
    static let magic: UInt64 = 0x5353_484D << 32 | 1
    static let headerBytes = 4096
    static let slotCount = 64
    static let slotsOffset = 256
    /// The byte-range locks, past any byte the file holds (their order
    /// with the other locks is stated in Lock.swift).
    static let lockBase: Int64 = 1 << 40
    /// One writer among every handle of every process (lock 4).
    static let writerLock = lockBase
    /// Exclusive while a handle rebuilds the index at open, shared after
    /// (lock 2).
    static let openLock = lockBase + 1
    /// Reader slot `i`'s owner (lock 5).
    static func slotLock(_ i: Int) -> Int64 { lockBase + 8 + Int64(i) }
    /// Address space each handle reserves for the file: room for 64 Mi
    /// frames (256 GiB of log at 4 KiB pages).
    static let reservedLength = headerBytes + 4 << 26
    static let noMark = UInt64.max

    enum Field: Int {
        case magic = 0
        case pageSize = 8
        case sequence = 16
        case generation = 24
        case salts = 32
        case frames = 40
        case chain = 48
        case backfilled = 56
        case commits = 64
        case checkpoints = 72
        case epoch = 80
        case frameListCRC = 88
        case restartPending = 96
        case pages = 104
        case freeCount = 112
        case changeCounter = 120
        case checksum = 128
    }

    /// The fields of bytes 24..<128, as one consistent reading.
    struct State: Equatable {
        var generation: UInt32 = 0
        var salt1: UInt32 = 0
        var salt2: UInt32 = 0
        var frames = 0
        var chain: UInt32 = 0
        var backfilled = 0
        var commits: UInt64 = 0
        var checkpoints: UInt64 = 0
        var epoch: UInt64 = 0
        var frameListCRC: UInt32 = 0
        var restartPending = false
        /// The last commit's header fields (the page size is the store's).
        var pageCount: UInt32 = 0
        var freelistHead: UInt32 = 0
        var freeCount: UInt32 = 0
        var changeCounter: UInt64 = 0

        /// The snapshot position of the last commit.
        var position: UInt64 { Self.position(generation: generation, frames: frames) }

        /// The snapshot position of a commit that ends at frame `frames`
        /// of log generation `generation` (the key of the catalog and free
        /// page caches).
        static func position(generation: UInt32, frames: Int) -> UInt64 {
            UInt64(generation) << 32 | UInt64(frames)
        }
    }

    /// What a reading of the header found.
    enum Reading {
        case state(State, sequence: UInt64)
        /// The sequence word stayed odd: a writer is publishing, or died
        /// while it did.
        case busy
        /// Wrong magic, page size, checksum or ranges.
        case damaged(String)
    }

    /// The `-shm` file, or nil for a private index (exclusive mode).
    let file: (any StorageFile)?
    let path: String
    let pageSize: Int
    private let region: SharedRegion?
    let base: UnsafeMutableRawPointer
    /// Frames the file has room for now, as this handle last grew or
    /// measured it.
    private(set) var capacityFrames: Int
    /// The slot this handle owns.
    private(set) var slot = -1

    /// A private index in this process's memory: exclusive mode, where no
    /// other process opens the store. Locks always succeed. Throws
    /// ``StorageError/io(operation:path:errno:)`` when the process cannot
    /// reserve the index's address space (a limit on it, `RLIMIT_AS`).
    init(privateFor path: String, pageSize: Int) throws {
        file = nil
        self.path = path
        self.pageSize = pageSize
        let length = Self.reservedLength
        let mapped = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        guard let address = mapped, address != MAP_FAILED else {
            throw StorageError.io(
                operation: "reserve \(length >> 20) MiB of address space for the log index", path: path, errno: errno)
        }
        region = SharedRegion(base: address, length: length, unmap: { base, length in _ = munmap(base, length) })
        base = address
        capacityFrames = (length - Self.headerBytes) / 4
        slot = 0
    }

    /// Maps the shared index file `file` (opened read-write at `path`).
    init(file: any StorageFile, path: String, pageSize: Int) throws {
        self.file = file
        self.path = path
        self.pageSize = pageSize
        guard let region = file.mapShared(length: Self.reservedLength) else {
            throw StorageError.cannotShare("\(path) cannot be mapped shared on this file system")
        }
        self.region = region
        base = region.base
        let size = try file.size()
        capacityFrames = size < Int64(Self.headerBytes) ? 0 : Int((size - Int64(Self.headerBytes)) / 4)
    }

    var isPrivate: Bool { file == nil }

    // MARK: Words

    @inline(__always) private func word(_ offset: Int) -> UnsafeMutablePointer<Atomic<UInt64>> {
        (base + offset).assumingMemoryBound(to: Atomic<UInt64>.self)
    }

    @inline(__always) func load(_ field: Field) -> UInt64 { word(field.rawValue).pointee.load(ordering: .relaxed) }

    @inline(__always) private func store(_ field: Field, _ value: UInt64) {
        word(field.rawValue).pointee.store(value, ordering: .relaxed)
    }

    /// The sequence word, with acquiring order.
    @inline(__always) func sequence() -> UInt64 { word(Field.sequence.rawValue).pointee.load(ordering: .acquiring) }

    /// The checksum of the header fields as they are now.
    private func headerChecksum() -> UInt32 {
        var crc = crc32c(0, base, 16)
        crc = crc32c(crc, base + 24, 104)
        return crc
    }

    // MARK: Reading

    /// Reads the header fields consistently; spins a little while a writer
    /// publishes.
    func read() -> Reading {
        var spins = 0
        while true {
            let before = sequence()
            if before & 1 == 1 {
                spins += 1
                if spins > 2000 { return .busy }
                if spins > 100 { sched_yield() }
                continue
            }
            let magic = load(.magic)
            let size = load(.pageSize)
            var state = State()
            state.generation = UInt32(truncatingIfNeeded: load(.generation))
            let salts = load(.salts)
            state.salt1 = UInt32(truncatingIfNeeded: salts >> 32)
            state.salt2 = UInt32(truncatingIfNeeded: salts)
            let frames = load(.frames)
            state.chain = UInt32(truncatingIfNeeded: load(.chain))
            let backfilled = load(.backfilled)
            state.commits = load(.commits)
            state.checkpoints = load(.checkpoints)
            state.epoch = load(.epoch)
            state.frameListCRC = UInt32(truncatingIfNeeded: load(.frameListCRC))
            state.restartPending = load(.restartPending) != 0
            let pages = load(.pages)
            state.pageCount = UInt32(truncatingIfNeeded: pages >> 32)
            state.freelistHead = UInt32(truncatingIfNeeded: pages)
            let freeCount = load(.freeCount)
            state.changeCounter = load(.changeCounter)
            let stored = load(.checksum)
            let computed = UInt64(headerChecksum())
            atomicMemoryFence(ordering: .acquiring)
            guard sequence() == before else { continue }
            guard magic == Self.magic else { return .damaged("not a Strata log index (magic \(magic))") }
            guard size == UInt64(pageSize) else { return .damaged("page size \(size), the store's is \(pageSize)") }
            guard stored == computed else { return .damaged("header checksum mismatch") }
            guard frames <= UInt64(UInt32.max), backfilled <= frames else {
                return .damaged("\(backfilled) backfilled frames of \(frames)")
            }
            guard state.pageCount >= 2, freeCount < UInt64(state.pageCount), state.freelistHead < state.pageCount else {
                return .damaged("header fields out of range: \(state.pageCount) pages, \(freeCount) free")
            }
            state.freeCount = UInt32(freeCount)
            state.frames = Int(frames)
            state.backfilled = Int(backfilled)
            return .state(state, sequence: before)
        }
    }

    /// The page number of frame `i` (which the caller checked lies below the
    /// committed count and inside the file).
    @inline(__always) func pageOfFrame(_ i: Int) -> UInt32 {
        (base + Self.headerBytes + 4 * i).load(as: UInt32.self)
    }

    /// True when the file is long enough to hold `frames` frame-list
    /// entries; measures it again when this handle's last measure is short.
    func holds(frames: Int) throws -> Bool {
        if frames <= capacityFrames { return true }
        guard let file else { return false }
        let size = try file.size()
        capacityFrames =
            size < Int64(Self.headerBytes)
            ? 0 : min(Int((size - Int64(Self.headerBytes)) / 4), (Self.reservedLength - Self.headerBytes) / 4)
        return frames <= capacityFrames
    }

    /// Grows a file shorter than the header (new, or cut) to the header's
    /// size, before anything in it is touched: mapped bytes past the end
    /// of a file cannot be read. Growing never harms another handle.
    func ensureHeader() throws {
        guard let file else { return }
        if try file.size() < Int64(Self.headerBytes) { try file.truncate(to: Int64(Self.headerBytes)) }
    }

    // MARK: Writing (the writer lock held)

    /// Grows the file to hold `frames` frame-list entries.
    func reserve(frames: Int) throws {
        if try holds(frames: frames) { return }
        guard frames <= (Self.reservedLength - Self.headerBytes) / 4 else {
            throw StorageError.diskFull(path: path + " (the log reached 2^26 frames; checkpoint it)")
        }
        let wanted = min((frames + 32767) / 32768 * 32768, (Self.reservedLength - Self.headerBytes) / 4)
        try file?.truncate(to: Int64(Self.headerBytes) + 4 * Int64(wanted))
        capacityFrames = wanted
    }

    /// Writes the page numbers of frames `first...` into the frame list.
    func setPages(_ pages: [UInt32], from first: Int) {
        let p = base + Self.headerBytes + 4 * first
        for (i, number) in pages.enumerated() { (p + 4 * i).storeBytes(of: number, as: UInt32.self) }
    }

    /// Publishes `state` (and, when `reset`, a fresh magic and page size)
    /// inside the sequence lock; returns the sequence word after it.
    @discardableResult func publish(_ state: State, reset: Bool = false) -> UInt64 {
        let word = word(Field.sequence.rawValue)
        let before = word.pointee.load(ordering: .relaxed)
        let odd = before | 1 == before ? before &+ 2 : before | 1
        word.pointee.store(odd, ordering: .relaxed)
        atomicMemoryFence(ordering: .releasing)
        if reset {
            store(.magic, Self.magic)
            store(.pageSize, UInt64(pageSize))
        }
        store(.generation, UInt64(state.generation))
        store(.salts, UInt64(state.salt1) << 32 | UInt64(state.salt2))
        store(.frames, UInt64(state.frames))
        store(.chain, UInt64(state.chain))
        store(.backfilled, UInt64(state.backfilled))
        store(.commits, state.commits)
        store(.checkpoints, state.checkpoints)
        store(.epoch, state.epoch)
        store(.frameListCRC, UInt64(state.frameListCRC))
        store(.restartPending, state.restartPending ? 1 : 0)
        store(.pages, UInt64(state.pageCount) << 32 | UInt64(state.freelistHead))
        store(.freeCount, UInt64(state.freeCount))
        store(.changeCounter, state.changeCounter)
        store(.checksum, UInt64(headerChecksum()))
        word.pointee.store(odd &+ 1, ordering: .releasing)
        return odd &+ 1
    }

    /// Marks the index unusable (the last handle emptied the log): the
    /// next handle to read it rebuilds it.
    func invalidate() {
        let word = word(Field.sequence.rawValue)
        let before = word.pointee.load(ordering: .relaxed)
        let odd = before | 1 == before ? before &+ 2 : before | 1
        word.pointee.store(odd, ordering: .relaxed)
        atomicMemoryFence(ordering: .releasing)
        store(.magic, 0)
        word.pointee.store(odd &+ 1, ordering: .releasing)
    }

    /// Sets every reader mark to "none": the first handle does this, when
    /// every other owner is gone.
    func clearMarks() {
        for i in 0..<Self.slotCount { mark(i).pointee.store(Self.noMark, ordering: .relaxed) }
    }

    /// Bumps the sequence word without changing anything, then fences: the
    /// first half of the mark handshake (see *Rules*), before reading marks.
    @discardableResult func announce() -> UInt64 {
        let word = word(Field.sequence.rawValue)
        var value = word.pointee.load(ordering: .relaxed)
        if value & 1 == 1 { value &+= 1 }
        word.pointee.store(value &+ 2, ordering: .relaxed)
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        return value &+ 2
    }

    // MARK: Reader marks

    private func mark(_ i: Int) -> UnsafeMutablePointer<Atomic<UInt64>> { word(Self.slotsOffset + 8 * i) }

    /// Publishes this handle's oldest reader position (``noMark``: none),
    /// then fences: the reader's half of the handshake.
    func setMark(_ position: UInt64) {
        guard slot >= 0 else { return }
        mark(slot).pointee.store(position, ordering: .relaxed)
        atomicMemoryFence(ordering: .sequentiallyConsistent)
    }

    /// The oldest position a live reader of any handle uses, or nil.
    func oldestMark() throws -> UInt64? {
        var oldest: UInt64?
        for i in 0..<Self.slotCount {
            let value = mark(i).pointee.load(ordering: .relaxed)
            guard value != Self.noMark else { continue }
            if i != slot, let file {
                // A slot whose lock can be taken has no owner: its mark is
                // what a dead handle left.
                if try file.setLock(.shared, at: Self.slotLock(i)) {
                    _ = try file.setLock(.unlocked, at: Self.slotLock(i))
                    continue
                }
            }
            oldest = min(oldest ?? value, value)
        }
        return oldest
    }

    /// Stops writing marks: the handle closed and its slot (released with
    /// its descriptor) may be another handle's now. The caller holds the
    /// database's state lock.
    func releaseSlot() { slot = -1 }

    /// Takes a free reader slot for this handle's life.
    func claimSlot() throws {
        guard let file else { return }
        for i in 0..<Self.slotCount where try file.setLock(.exclusive, at: Self.slotLock(i)) {
            slot = i
            setMark(Self.noMark)
            return
        }
        throw StorageError.cannotShare("all \(Self.slotCount) reader slots of \(path) are taken: too many open handles")
    }

    // MARK: Locks

    /// Takes a lock of the lock table without waiting.
    func tryLock(_ offset: Int64, _ kind: RangeLock) throws -> Bool {
        guard let file else { return true }
        return try file.setLock(kind, at: offset)
    }

    /// Takes a lock of the lock table, retrying until `deadline`; throws
    /// ``StorageError/busy(path:)`` then.
    func lock(_ offset: Int64, _ kind: RangeLock, until deadline: ContinuousClock.Instant, store: String) throws {
        guard let file else { return }
        // Polling, as SQLite's busy handler does (a blocking lock request
        // cannot time out), with short pauses: a commit holds the lock for
        // about one fdatasync, and a long pause would leave it idle.
        var pause = 5  // microseconds
        while true {
            if try file.setLock(kind, at: offset) { return }
            if ContinuousClock.now >= deadline { throw StorageError.busy(path: store) }
            usleep(UInt32(pause))
            pause = min(pause * 2, 80)
        }
    }

    /// Releases a lock of the lock table.
    func unlock(_ offset: Int64) {
        guard let file else { return }
        _ = try? file.setLock(.unlocked, at: offset)
    }
}
