import Synchronization

/// An ordered key-value store in one file plus a write-ahead log.
///
/// A store holds any number of named trees (``Tree``); each maps byte-string
/// keys, in `memcmp` order, to byte-string values of any size up to
/// ``maxValueLength``.
///
/// Concurrency: any number of ``ReadTransaction``s run at once, each on a
/// stable snapshot of the last commit before it began, and never wait for
/// the writer. One ``WriteTransaction`` runs at a time; `write` blocks until
/// the previous writer ends. A `Database` is safe to share between threads;
/// a transaction belongs to the thread that uses it.
///
/// Several processes (and several handles in one process) may open one
/// store at once (``LockingMode/shared``, the default): they share an index
/// of the log through the `<store>-shm` file, so a read transaction in any
/// of them starts on the latest commit of any of them; write transactions
/// of all of them take turns, a writer waiting up to
/// ``DatabaseOptions/busyTimeout`` for another's to end before it gets
/// ``StorageError/busy(path:)``. ``LockingMode/exclusive`` keeps a store
/// to one handle instead (a second one gets ``StorageError/locked(path:)``).
///
/// Layout of the work: the log type (`WAL`) owns the log, its shared
/// index, checkpoints and reader marks; the pager (`Pager`) owns page reads
/// (cache, mapping, verification); this type opens and closes the store
/// and runs transactions.
public final class Database: @unchecked Sendable {
    /// Longest key accepted, in bytes, at every page size.
    public static let maxKeyLength = 960
    /// Longest value accepted, in bytes (1 GiB).
    public static let maxValueLength = 1 << 30

    /// The path of the store's main file; the write-ahead log is the same path
    /// with `-wal` added, its shared index the same path with `-shm`.
    public let path: String
    /// The options the store was opened with.
    public let options: DatabaseOptions
    /// The page size the store was created with.
    public let pageSize: Int

    /// The file system the store was opened on.
    package let fileSystem: any StorageFileSystem
    let wal: WAL
    let pager: Pager
    var main: any StorageFile { pager.main }
    /// One write transaction of this handle at a time (the shared index's
    /// writer lock makes handles take turns). Lock 3 of the order stated in
    /// Lock.swift.
    let gate = WriterGate()

    /// Guards every field below it but `committedFreelist` and
    /// `freelistPosition` (the writer's), and the fields of `wal` and
    /// `pager` (see their types): every access to them holds it, except in
    /// `open` before the handle is shared. Lock 7 of the order stated in
    /// Lock.swift.
    let stateLock: Lock
    /// The catalog entries transactions looked up, shared by those of the
    /// same position (see ``CatalogCache``).
    let catalog: CatalogCache
    /// Commits appended to the log and waiting for a shared sync, their
    /// publishing, and the handle's poisoning (see ``GroupCommit``).
    let groupCommit: GroupCommit

    @exclusivity(unchecked) var isClosed = false
    /// Set by `close()`: transactions still open throw
    /// ``StorageError/closed`` from then on (their reader marks are gone).
    let closedForReads = Atomic<Bool>(false)
    /// Set while a commit of this handle runs the automatic checkpoint
    /// (see `checkpointAfterCommit(recent:whatever:)`).
    let automaticCheckpointRunning = Atomic<Bool>(false)

    /// Counters for tools and tests.
    @exclusivity(unchecked) var counters = Statistics()

    /// The serial number of the last transaction begun (see ``Tree``),
    /// counting from a random start.
    @exclusivity(unchecked) var transactionSerial = UInt64.random(in: 0...UInt64.max)

    /// Writer-owned (guarded by the writer lock): the free-page set of the
    /// commit at `freelistPosition`.
    @exclusivity(unchecked) var committedFreelist = Freelist()
    @exclusivity(unchecked) var freelistPosition = UInt64.max

    /// The open (`flock`) of an exclusive handle, released at close.
    private let exclusiveLock: Bool

    /// What a transaction sees: a position in the log (generation << 32 |
    /// committed frames; see ``SharedIndex``) and that commit's header.
    struct Snapshot {
        var position: UInt64
        var header: FileHeader
    }

    /// The last commit this handle adopted: readers start from it. The
    /// caller holds `stateLock`.
    var committed: Snapshot {
        let state = wal.state
        var header = FileHeader(pageSize: pageSize)
        header.pageCount = state.pageCount
        header.freelistHead = state.freelistHead
        header.freeCount = state.freeCount
        header.commitCounter = state.changeCounter
        return Snapshot(position: state.position, header: header)
    }

    private init(
        path: String, options: DatabaseOptions, fileSystem: any StorageFileSystem, wal: WAL, pager: Pager, exclusiveLock: Bool
    ) {
        stateLock = wal.lock
        self.path = path
        self.options = options
        self.fileSystem = fileSystem
        self.wal = wal
        self.pager = pager
        let catalog = CatalogCache()
        self.catalog = catalog
        groupCommit = GroupCommit(wal: wal, pager: pager, catalog: catalog)
        pageSize = pager.pageSize
        self.exclusiveLock = exclusiveLock
    }

    // MARK: - Open

    /// Opens (or creates) the store at `path`; its log is `path + "-wal"`,
    /// the log's shared index `path + "-shm"`.
    ///
    /// The first handle to open the store builds the shared index from the
    /// log (recovery: the log's committed frames become visible; an
    /// uncommitted or damaged tail is ignored); later handles use it.
    public static func open(
        path: String,
        options: DatabaseOptions = DatabaseOptions(),
        fileSystem: any StorageFileSystem = POSIXFileSystem()
    ) throws -> Database {
        try validate(options)
        let exists = fileSystem.exists(path)
        if !exists && (options.readOnly || !options.createIfMissing) {
            throw StorageError.io(operation: "open", path: path, errno: 2)
        }
        if !exists { try createStore(path, options: options, fileSystem: fileSystem) }
        let main = try fileSystem.open(path, create: false, readOnly: options.readOnly)
        var ok = false
        defer { if !ok { main.close() } }
        let exclusive = options.locking == .exclusive
        // An exclusive handle holds an exclusive `flock` on the main file,
        // every shared one a shared `flock`: the two modes exclude each other
        // (lock 1 of the order stated in Lock.swift).
        if !(exclusive && options.readOnly) {
            guard try main.tryLock(exclusive: exclusive) else { throw StorageError.locked(path: path) }
        }
        var size = try main.size()
        if size == 0 {
            // An empty file holds nothing to lose: make it a store in place.
            guard !options.readOnly else { throw StorageError.corruptFile("\(path) is empty") }
            try writeInitialPages(main, pageSize: options.pageSize, sync: options.durability != .none)
            size = try main.size()
        }
        let walPath = path + "-wal"
        let pageSize = try readPageSize(main, walPath: walPath, fileSystem: fileSystem)
        let walFile = try openLog(walPath, options: options, fileSystem: fileSystem)
        var walOpen = true
        defer { if !ok && walOpen { walFile.close() } }
        let shared = try openSharedIndex(path + "-shm", pageSize: pageSize, exclusive: exclusive, fileSystem: fileSystem)
        let lock = Lock()
        let wal = WAL(
            file: walFile, path: walPath, pageSize: pageSize, readOnly: options.readOnly, fileSystem: fileSystem,
            shared: shared, lock: lock, startsWriteback: options.durability == .full)
        let pager = Pager(main: main, pageSize: pageSize, wal: wal, lock: lock, cacheBytes: options.cacheSizeBytes)
        walOpen = false
        let db = Database(
            path: path, options: options, fileSystem: fileSystem, wal: wal, pager: pager,
            exclusiveLock: exclusive && !options.readOnly)
        do {
            try db.attach(deadline: ContinuousClock.now + options.busyTimeout)
            pager.mainFilePages = UInt32(clamping: size / Int64(pageSize))
            if options.memoryMappedReads && !(options.readOnly && exclusive) {
                pager.mapped = main.mapForReading(length: Pager.mappingLength(forFileSize: size)).map {
                    MappedMainFile(region: $0, pageSize: pageSize)
                }
            }
            // A main file shorter than its header says, with no log to
            // supply the missing pages, has been truncated. Its size is
            // read again: another process's checkpoint may have grown it
            // (and restarted the log) since the size above was taken.
            let snapshot = db.committed
            let needed = Int64(snapshot.header.pageCount) * Int64(pageSize)
            if size < needed, wal.state.frames == 0, try main.size() < needed {
                throw StorageError.corruptFile(
                    "file is \(size) bytes but its header counts \(snapshot.header.pageCount) pages of \(pageSize) bytes: truncated"
                )
            }
        } catch {
            db.releaseFiles()
            throw error
        }
        ok = true
        openObserver?(db)
        return db
    }

    /// Called with every handle `open` returns. The engine's tests set it
    /// to find every store a test used and check it at tear-down; nothing
    /// else should. Set it only while no other thread opens a store.
    package nonisolated(unsafe) static var openObserver: ((Database) -> Void)?

    /// Called by the automatic checkpoint after a commit, before it takes
    /// the writer lock: the engine's tests use it to let another handle
    /// commit in that window. Nothing else should set it.
    package nonisolated(unsafe) var beforeAutomaticCheckpoint: (() -> Void)?

    /// Called by the automatic checkpoint before it waits for the writer
    /// gate (a background one on its own thread): the engine's tests use it
    /// to hold the run until `close()` has returned. Nothing else should
    /// set it.
    package nonisolated(unsafe) var beforeAutomaticCheckpointGate: (() -> Void)?

    /// True while an automatic checkpoint holds its claim (from the commit
    /// that set it off until the run returns, on whichever thread).
    package var automaticCheckpointInProgress: Bool { automaticCheckpointRunning.load(ordering: .acquiring) }

    /// Closes the files after a failed open.
    private func releaseFiles() {
        stateLock.withLock {
            isClosed = true
            closedForReads.store(true, ordering: .relaxed)
            wal.shared.releaseSlot()
        }
        wal.shared.file?.close()
        wal.file.close()
        main.close()
    }

    // MARK: - Transactions

    /// Starts a read transaction on the latest commit of any handle. Call
    /// ``ReadTransaction/end()`` when done (it also ends on deinit).
    ///
    /// When the main file holds the latest commit (every frame of the log
    /// backfilled, as after a full checkpoint or on opening a store with an
    /// empty log) and is mapped, the transaction gets the mapping and reads
    /// the verified tree pages of its snapshot straight from it, without the
    /// state lock or the page cache. That is safe for its whole life: its
    /// snapshot has no page in the log, and no checkpoint of any handle can
    /// rewrite or truncate the main file while its reader mark stands.
    /// Pages not verified yet take the ordinary path once.
    public func beginRead() throws -> ReadTransaction {
        var deadline: ContinuousClock.Instant?
        while true {
            enum Outcome {
                case begun(Snapshot, MappedMainFile?, UInt64)
                case retry
                case repair
            }
            let outcome: Outcome = try stateLock.withLock {
                if isClosed { throw StorageError.closed }
                switch adopt() {
                case .busy, .damaged: return .repair
                case .current, .adopted: break
                }
                guard wal.addReader() != nil else { return .retry }
                transactionSerial &+= 1
                let state = wal.state
                return .begun(committed, state.backfilled == state.frames ? pager.mapped : nil, transactionSerial)
            }
            switch outcome {
            case .begun(let snapshot, let direct, let serial):
                return ReadTransaction(db: self, snapshot: snapshot, serial: serial, direct: direct)
            case .retry:
                continue
            case .repair:
                let limit = deadline ?? ContinuousClock.now + options.busyTimeout
                deadline = limit
                try repairIndex(deadline: limit)
            }
        }
    }

    func endRead(_ position: UInt64) {
        stateLock.withLock { wal.removeReader(position) }
    }

    /// Runs `body` in a read transaction.
    public func read<R>(_ body: (ReadTransaction) throws -> R) throws -> R {
        let tx = try beginRead()
        defer { tx.end() }
        return try body(tx)
    }

    /// Starts the write transaction, waiting for the current one of this
    /// handle, then for any other handle's (process's), up to
    /// ``DatabaseOptions/busyTimeout``: past it, throws
    /// ``StorageError/busy(path:)``. Finish it with
    /// ``WriteTransaction/commit()`` or ``WriteTransaction/rollback()``; a
    /// transaction dropped without either rolls back.
    public func beginWrite() throws -> WriteTransaction {
        if options.readOnly { throw StorageError.readOnly("opened read-only") }
        gate.acquire()
        let held = groupCommit.writerBegins()
        do {
            try stateLock.withLock {
                if isClosed { throw StorageError.closed }
                if let poisoned = groupCommit.poisoned { throw StorageError.readOnly(poisoned) }
            }
            // While commits of this handle are pending, it holds the writer
            // lock already and the index is as it published it.
            if !held {
                try wal.shared.lock(
                    SharedIndex.writerLock, .exclusive, until: ContinuousClock.now + options.busyTimeout, store: path)
                groupCommit.lockTaken()
                try repairHoldingWriterLock()
            }
            // The pending commits' pages, header and free pages are this
            // transaction's starting point. Taken before the snapshot: a
            // leader may publish them meanwhile, and the snapshot then
            // holds the same images; taken after, a commit published in
            // between would be in neither.
            let continuation = groupCommit.continuation()
            // With every frame of the log copied into the main file, the
            // writer reads the pages it does not hold itself through the
            // mapping, as such a reader does (see `holdsOwnImage(_:)`).
            var (snapshot, serial, generation, direct): (Snapshot, UInt64, UInt32, MappedMainFile?) = stateLock.withLock {
                transactionSerial &+= 1
                let state = wal.state
                return (
                    committed, transactionSerial, state.generation, state.backfilled == state.frames ? pager.mapped : nil
                )
            }
            let directPages = snapshot.header.pageCount
            if let pending = continuation {
                snapshot.header = pending.header
                let tx = WriteTransaction(
                    db: self, snapshot: snapshot, serial: serial, freelist: pending.freelist, direct: direct,
                    directPages: directPages)
                tx.pendingPages = pending.overlay
                // No restart while commits are pending: the last one's
                // position is in this generation.
                tx.catalogBase = SharedIndex.State.position(generation: generation, frames: pending.tail.frames)
                tx.continuedFrom = pending.ticket
                return tx
            }
            if freelistPosition != snapshot.position {
                committedFreelist = try loadFreelist(snapshot)
                freelistPosition = snapshot.position
            }
            return WriteTransaction(
                db: self, snapshot: snapshot, serial: serial, freelist: committedFreelist, direct: direct,
                directPages: directPages)
        } catch {
            endWrite()
            throw error
        }
    }

    /// Ends the write transaction without a pending commit: releases the
    /// writer lock (unless commits of this handle are pending) and the
    /// gate.
    func endWrite() {
        groupCommit.writerLeaves()
        gate.release()
    }

    /// Runs `body` in the write transaction and commits; if `body` throws,
    /// everything it did is discarded and the error is rethrown.
    public func write<R>(_ body: (WriteTransaction) throws -> R) throws -> R {
        let tx = try beginWrite()
        do {
            let result = try body(tx)
            try tx.commit()
            return result
        } catch {
            tx.rollback()
            throw error
        }
    }

    // MARK: - Close

    /// Checkpoints the log into the main file (as far as readers of every
    /// handle allow, and when no other handle's writer holds the store);
    /// the last handle to close also empties the log. Releases the locks.
    /// Further use throws ``StorageError/closed``. Safe to call twice.
    public func close() throws {
        if options.readOnly {
            let wasOpen = stateLock.withLock { () -> Bool in
                defer {
                    isClosed = true
                    closedForReads.store(true, ordering: .relaxed)
                    wal.shared.releaseSlot()
                }
                return !isClosed
            }
            if wasOpen { closeFiles() }
            return
        }
        acquireGateWhenIdle()
        defer { gate.release() }
        let alreadyClosed = stateLock.withLock { isClosed }
        if alreadyClosed { return }
        var failure: Error?
        if stateLock.withLock({ groupCommit.poisoned == nil }),
            (try? wal.shared.tryLock(SharedIndex.writerLock, .exclusive)) == true
        {
            do {
                try repairHoldingWriterLock()
                try checkpointLocked()
                // The last handle (the open lock taken exclusively) empties
                // the log once all of it is in the main file, and marks the
                // index for rebuilding by the next handle.
                if try wal.shared.tryLock(SharedIndex.openLock, .exclusive) {
                    let done = stateLock.withLock { wal.state.backfilled == wal.state.frames && wal.readers.isEmpty }
                    if try done && wal.file.size() > 0 {
                        try wal.file.truncate(to: 0)
                        if options.durability != .none { try wal.file.sync() }
                        wal.shared.invalidate()
                    }
                }
            } catch {
                failure = error
            }
            wal.shared.unlock(SharedIndex.writerLock)
        }
        stateLock.withLock {
            isClosed = true
            closedForReads.store(true, ordering: .relaxed)
            wal.shared.releaseSlot()
            pager.cache.removeAll()
            // Pages and transactions still holding it keep the mapping alive.
            pager.mapped = nil
        }
        closeFiles()
        if let failure { throw failure }
    }

    /// Closes the three files (releasing their locks).
    private func closeFiles() {
        wal.shared.file?.close()
        stateLock.withLock { wal.file }.close()
        main.close()
    }

    deinit {
        if !stateLock.withLock({ isClosed }) {
            try? close()
        }
    }
}
