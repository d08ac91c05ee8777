// Over 500 lines: open, close, transactions, the page→frame index,
// checkpoint and log restart still live together here; issue 26 gives the
// log and its index a type of their own.

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
/// One process owns a store: opening it writable takes an exclusive
/// advisory lock (`flock`) on the main file, and a second process gets
/// ``StorageError/locked(path:)``. A read-only open takes no lock.
public final class Database: @unchecked Sendable {
    /// Longest key accepted, in bytes, at every page size.
    public static let maxKeyLength = 960
    /// Longest value accepted, in bytes (1 GiB).
    public static let maxValueLength = 1 << 30

    /// The path of the store's main file; the write-ahead log is the same path
    /// with `-wal` added.
    public let path: String
    /// The options the store was opened with.
    public let options: DatabaseOptions
    /// The page size the store was created with.
    public let pageSize: Int

    /// The file system the store was opened on.
    package let fileSystem: any StorageFileSystem
    let main: any StorageFile
    let wal: WAL
    let gate = WriterGate()

    /// Guards every field below it but `committedFreelist` (the writer's),
    /// and the log's `generation` and `frameCount` (see ``WAL``): every
    /// access to them holds it, except in `open` before the handle is
    /// shared.
    let stateLock = Lock()
    @exclusivity(unchecked) var cache: PageCache
    /// Page number → its versions in the WAL of the current generation,
    /// oldest first.
    @exclusivity(unchecked) var walIndex: [UInt32: [FrameVersion]] = [:]
    /// Catalog entries (root page, entry count) looked up by readers of
    /// commit `catalogSeq`, shared by every reader of that commit: a fetch
    /// opens a read transaction and looks up the same few trees each time,
    /// and a catalog search costs a page load and two allocations. Replaced
    /// when a reader of a newer commit looks a tree up. Guarded by
    /// `stateLock`.
    @exclusivity(unchecked) private var catalogCache: [String: (root: UInt32, count: Int)] = [:]
    @exclusivity(unchecked) private var catalogSeq = UInt64.max

    /// The catalog entry of `name` as of commit `seq`, if a reader of that
    /// commit looked it up already.
    func cachedCatalogEntry(_ name: String, seq: UInt64) -> (root: UInt32, count: Int)? {
        stateLock.withLock { catalogSeq == seq ? catalogCache[name] : nil }
    }

    /// Remembers the catalog entry of `name` as of commit `seq`.
    func rememberCatalogEntry(_ name: String, seq: UInt64, root: UInt32, count: Int) {
        stateLock.withLock {
            if catalogSeq != seq {
                guard seq > catalogSeq || catalogSeq == .max else { return }
                catalogSeq = seq
                catalogCache.removeAll(keepingCapacity: true)
            }
            catalogCache[name] = (root, count)
        }
    }
    /// The last commit: readers start from it.
    @exclusivity(unchecked) var committed: Snapshot
    /// Active readers: snapshot sequence number → how many.
    @exclusivity(unchecked) var readers: [UInt64: Int] = [:]
    /// Every commit up to this sequence number is in the main file.
    @exclusivity(unchecked) var backfilledSeq: UInt64 = 0
    @exclusivity(unchecked) var isClosed = false
    /// Set when an fsync failed: the handle refuses writes from then on.
    /// Guarded by `stateLock`, like everything here: every read and write
    /// holds it.
    @exclusivity(unchecked) var poisoned: String?

    /// Counters for tools and tests (guarded by `stateLock`).
    @exclusivity(unchecked) var counters = Statistics()

    /// The main file mapped for reading, with its pages' verified marks, or
    /// nil when pages are read with `read` (a read-only handle, a file
    /// system that cannot map, or ``DatabaseOptions/memoryMappedReads``
    /// off). Replaced by a larger mapping when the file outgrows it; pages
    /// and transactions using the old one keep it alive.
    ///
    /// Mapping is safe because of the checkpoint's reader rule: the main
    /// file's image of a page changes only when no reader can still read its
    /// old image from there, so a view never changes under a reader.
    @exclusivity(unchecked) var mapped: MappedMainFile?
    /// Whole pages the main file holds, as of this handle's last write,
    /// truncation or measurement of it. A mapped page at or past it is
    /// never touched (mapped memory past the end of a file is not readable).
    @exclusivity(unchecked) var mainFilePages: UInt32 = 0

    /// The serial number of the last transaction begun (see ``Tree``),
    /// counting from a random start.
    @exclusivity(unchecked) var transactionSerial = UInt64.random(in: 0...UInt64.max)

    /// Writer-owned (guarded by `gate`): the committed free-page set.
    @exclusivity(unchecked) var committedFreelist = Freelist()

    struct FrameVersion {
        var frame: Int
        var seq: UInt64
    }

    /// What a transaction sees: a commit sequence number and that commit's
    /// header. Sequence 0 is the main file as it was at open.
    struct Snapshot {
        var seq: UInt64
        var header: FileHeader
    }

    private init(
        path: String, options: DatabaseOptions, fileSystem: any StorageFileSystem,
        main: any StorageFile, wal: WAL, pageSize: Int, header: FileHeader
    ) {
        self.path = path
        self.options = options
        self.fileSystem = fileSystem
        self.main = main
        self.wal = wal
        self.pageSize = pageSize
        cache = PageCache(capacityPages: options.cacheSizeBytes / pageSize)
        committed = Snapshot(seq: 0, header: header)
    }

    // MARK: - Open

    /// Opens (or creates) the store at `path`; its log is `path + "-wal"`.
    ///
    /// Recovery runs here: the log's committed frames are indexed and become
    /// visible; an uncommitted or damaged tail is ignored.
    public static func open(
        path: String,
        options: DatabaseOptions = DatabaseOptions(),
        fileSystem: any StorageFileSystem = POSIXFileSystem()
    ) throws -> Database {
        guard FileHeader.isValidPageSize(options.pageSize) else {
            throw StorageError.invalidOptions("page size \(options.pageSize) is not a power of two from 4096 to 65536")
        }
        guard options.checkpointThresholdFrames >= 1 else {
            throw StorageError.invalidOptions("checkpointThresholdFrames must be at least 1")
        }
        let exists = fileSystem.exists(path)
        if !exists && (options.readOnly || !options.createIfMissing) {
            throw StorageError.io(operation: "open", path: path, errno: 2)
        }
        if !exists { try createStore(path, options: options, fileSystem: fileSystem) }
        let main = try fileSystem.open(path, create: false, readOnly: options.readOnly)
        var ok = false
        defer { if !ok { main.close() } }
        if !options.readOnly {
            guard try main.tryLock(exclusive: true) else { throw StorageError.locked(path: path) }
        }
        var size = try main.size()
        if size == 0 {
            // An empty file holds nothing to lose: make it a store in place.
            guard !options.readOnly else { throw StorageError.corruptFile("\(path) is empty") }
            try writeInitialPages(main, pageSize: options.pageSize, sync: options.durability != .none)
            size = try main.size()
        }
        // Page size first (from the raw header prefix), then the whole header
        // page with its checksum. A header torn by a crash during a
        // checkpoint is repaired from the log, which still holds page 0 then;
        // the log's own header tells the page size in that case.
        let walPath = path + "-wal"
        var prefix = [UInt8](repeating: 0, count: 64)
        let got = try prefix.withUnsafeMutableBytes { try main.read(into: $0.baseAddress!, count: 64, at: 0) }
        let pageSize: Int
        do {
            pageSize = try prefix.withUnsafeBytes { try FileHeader.peekPageSize($0.baseAddress!, count: got) }
        } catch {
            guard let fromLog = WAL.peekPageSize(path: walPath, fileSystem: fileSystem) else { throw error }
            pageSize = fromLog
        }
        let headerPage = Page.zeroed(pageSize)
        let headerBytes = try main.read(into: headerPage.bytes, count: pageSize, at: 0)
        var mainHeader: FileHeader?
        if headerBytes == pageSize && headerPage.checksumMatches(pageNumber: 0) {
            mainHeader = try FileHeader(page: headerPage)
        }

        let walExists = fileSystem.exists(walPath)
        let walFile: any StorageFile
        if options.readOnly {
            walFile = walExists ? try fileSystem.open(walPath, create: false, readOnly: true) : EmptyFile()
        } else {
            walFile = try fileSystem.open(walPath, create: true, readOnly: false)
            if !walExists && options.durability != .none { try fileSystem.syncDirectory(of: walPath) }
        }
        let wal = WAL(file: walFile, path: walPath, pageSize: pageSize)
        let commits = try wal.recover()

        let db = Database(
            path: path, options: options, fileSystem: fileSystem, main: main, wal: wal,
            pageSize: pageSize, header: mainHeader ?? FileHeader(pageSize: pageSize))
        if mainHeader != nil { db.cache.put(PageCache.mainKey(0), headerPage) }
        db.mainFilePages = UInt32(clamping: size / Int64(pageSize))
        if !options.readOnly && options.memoryMappedReads {
            db.mapped = main.mapForReading(length: mappingLength(forFileSize: size)).map {
                MappedMainFile(region: $0, pageSize: pageSize)
            }
        }
        var seq: UInt64 = 0
        for commit in commits {
            seq += 1
            for (page, frame) in commit.frames {
                db.walIndex[page, default: []].append(FrameVersion(frame: frame, seq: seq))
            }
        }
        let headerInLog = db.walIndex[0] != nil
        if mainHeader == nil && !headerInLog {
            throw StorageError.corruptFile(
                headerBytes < pageSize ? "file is \(size) bytes: shorter than its header page" : "header page checksum mismatch")
        }
        if seq > 0 {
            let page = try db.loadPage(0, seq: seq, pageCount: UInt32.max)
            let header = try FileHeader(page: page)
            guard header.pageSize == pageSize else {
                throw StorageError.corrupt(page: 0, reason: "page size changed in the WAL")
            }
            db.committed = Snapshot(seq: seq, header: header)
        }
        // A main file shorter than its header says, with no log to supply the
        // missing pages, has been truncated.
        let needed = Int64(db.committed.header.pageCount) * Int64(pageSize)
        if size < needed && seq == 0 {
            throw StorageError.corruptFile(
                "file is \(size) bytes but its header counts \(db.committed.header.pageCount) pages of \(pageSize) bytes: truncated"
            )
        }
        db.committedFreelist = try db.loadFreelist(db.committed)
        ok = true
        openObserver?(db)
        return db
    }

    /// Called with every handle `open` returns. The engine's tests set it
    /// to find every store a test used and check it at tear-down; nothing
    /// else should. Set it only while no other thread opens a store.
    package nonisolated(unsafe) static var openObserver: ((Database) -> Void)?

    /// Creates a new store atomically: the first two pages are written and
    /// synced under a temporary name, which is then renamed into place, so
    /// a crash leaves either no store or a complete one.
    private static func createStore(_ path: String, options: DatabaseOptions, fileSystem: any StorageFileSystem) throws {
        let temporary = path + ".creating"
        try fileSystem.remove(temporary)
        let file = try fileSystem.open(temporary, create: true, readOnly: false)
        do {
            try writeInitialPages(file, pageSize: options.pageSize, sync: options.durability != .none)
            file.close()
        } catch {
            file.close()
            try? fileSystem.remove(temporary)
            throw error
        }
        try fileSystem.rename(temporary, to: path)
        if options.durability != .none { try fileSystem.syncDirectory(of: path) }
    }

    /// Writes the header page and an empty catalog root.
    private static func writeInitialPages(_ file: any StorageFile, pageSize: Int, sync: Bool) throws {
        let header = Page.zeroed(pageSize)
        FileHeader(pageSize: pageSize).write(to: header)
        header.sealChecksum(pageNumber: 0)
        let catalog = Page.zeroed(pageSize)
        Node.format(catalog, leaf: true)
        catalog.sealChecksum(pageNumber: FileHeader.catalogRoot)
        try file.write(header.bytes, count: pageSize, at: 0)
        try file.write(catalog.bytes, count: pageSize, at: Int64(pageSize))
        if sync { try file.sync() }
    }

    /// Reads the freelist trunk chain of a snapshot.
    func loadFreelist(_ snapshot: Snapshot) throws -> Freelist {
        var pages: [UInt32] = []
        var trunk = snapshot.header.freelistHead
        let pageCount = snapshot.header.pageCount
        let capacity = Layout.trunkCapacity(pageSize: pageSize)
        while trunk != 0 {
            guard trunk >= 2, trunk < pageCount, pages.count < Int(pageCount) else {
                throw StorageError.corrupt(page: trunk, reason: "freelist trunk page out of range or in a cycle")
            }
            let page = try loadPage(trunk, seq: snapshot.seq, pageCount: pageCount)
            guard page.u8(4) == PageType.freelistTrunk.rawValue else {
                throw StorageError.corrupt(page: trunk, reason: "page type \(page.u8(4)) where a freelist trunk was expected")
            }
            let n = Int(page.u32(12))
            guard n <= capacity else { throw StorageError.corrupt(page: trunk, reason: "freelist trunk lists \(n) pages") }
            pages.append(trunk)
            for i in 0..<n {
                let p = page.u32(Layout.trunkHeaderSize + 4 * i)
                guard p >= 2, p < pageCount else {
                    throw StorageError.corrupt(page: trunk, reason: "free page \(p) is out of range")
                }
                pages.append(p)
            }
            trunk = page.u32(8)
        }
        guard pages.count == Int(snapshot.header.freeCount) else {
            throw StorageError.corrupt(
                page: 0, reason: "header counts \(snapshot.header.freeCount) free pages, the freelist holds \(pages.count)")
        }
        return Freelist(loaded: pages)
    }

    // MARK: - Pages

    /// The image of page `number` as of commit `seq`, from the cache, the
    /// WAL or the main file; verified (checksum, and structure for tree
    /// pages) whenever it comes from disk.
    func loadPage(_ number: UInt32, seq: UInt64, pageCount: UInt32) throws -> Page {
        guard number < pageCount else {
            throw StorageError.corrupt(page: number, reason: "page number beyond the store's \(pageCount) pages")
        }
        while true {
            var frame = -1
            var generation: UInt32 = 0
            var view: Page?
            let cached: Page? = try stateLock.withLock {
                if !walIndex.isEmpty, let versions = walIndex[number] {
                    var i = versions.count - 1
                    while i >= 0 {
                        if versions[i].seq <= seq {
                            frame = versions[i].frame
                            break
                        }
                        i -= 1
                    }
                }
                generation = wal.generation
                let key = frame >= 0 ? PageCache.frameKey(generation: generation, frame: frame) : PageCache.mainKey(number)
                if let page = cache.get(key) { return page }
                guard frame < 0, let mapped else { return nil }
                guard number < mainFilePages else { throw Self.beyondEndOfFile(number) }
                let page = Page.view(mapped.address(of: number), size: pageSize, region: mapped.region)
                guard mapped.isVerified(number) else {
                    view = page
                    return nil
                }
                cache.put(key, page)
                return page
            }
            if let cached { return cached }
            let page = view ?? Page.uninitialized(pageSize)
            if view != nil {
                // Checked below, outside the lock, like a page just read.
            } else if frame >= 0 {
                guard try wal.readFrame(frame, into: page) else {
                    throw StorageError.corrupt(page: number, reason: "WAL frame \(frame) lies beyond the end of the log")
                }
            } else {
                let n = try main.read(into: page.bytes, count: pageSize, at: Int64(number) * Int64(pageSize))
                guard n == pageSize else { throw Self.beyondEndOfFile(number) }
            }
            // The log restarted while we read a frame: the frame may already
            // be overwritten, and the page is now current in the main file.
            let restarted = frame >= 0 && stateLock.withLock { wal.generation != generation }
            if restarted { continue }
            guard page.checksumMatches(pageNumber: number) else {
                throw StorageError.corrupt(
                    page: number, reason: frame >= 0 ? "checksum mismatch (WAL frame \(frame))" : "checksum mismatch")
            }
            let type = page.u8(4)
            if type == PageType.leaf.rawValue || type == PageType.branch.rawValue {
                try Node(page: page).validate(pageNumber: number)
            }
            stateLock.withLock {
                if view != nil { mapped?.markVerified(number) }
                counters.pagesChecked += 1
                if frame < 0 || wal.generation == generation {
                    cache.put(
                        frame >= 0 ? PageCache.frameKey(generation: generation, frame: frame) : PageCache.mainKey(number), page)
                }
            }
            return page
        }
    }

    static func beyondEndOfFile(_ number: UInt32) -> StorageError {
        StorageError.corrupt(page: number, reason: "page lies beyond the end of the file: truncated")
    }

    /// Records that the main file is `size` bytes now, and maps it anew when
    /// it outgrew the mapping. Pages past the end lose their verified mark
    /// and their cached views (a view past the end would fault).
    func mainFileResized(to size: Int64) {
        let pages = UInt32(clamping: size / Int64(pageSize))
        if pages < mainFilePages {
            for number in pages..<mainFilePages {
                mapped?.clearVerified(number)
                cache.remove(PageCache.mainKey(number))
            }
        }
        mainFilePages = pages
        if let current = mapped, Int(pages) * pageSize > current.region.length {
            mapped = main.mapForReading(length: Self.mappingLength(forFileSize: size)).map {
                MappedMainFile(region: $0, pageSize: pageSize, copyingMarksOf: current)
            }
        }
    }

    /// Address space reserved for a main file of `size` bytes: twice its
    /// size and at least ``minimumMappingLength``, so that a growing file is
    /// mapped again only each time it doubles.
    static func mappingLength(forFileSize size: Int64) -> Int {
        max(minimumMappingLength, Int(size) * 2)
    }

    /// 64 MiB; tests lower it to make a small store outgrow its mapping.
    package nonisolated(unsafe) static var minimumMappingLength = 64 << 20

    // MARK: - Transactions

    /// Starts a read transaction on the latest commit. Call
    /// ``ReadTransaction/end()`` when done (it also ends on deinit).
    ///
    /// When the main file holds the latest commit (`backfilledSeq` is
    /// `committed.seq`, as after a full checkpoint or on opening a store
    /// with an empty log) and is mapped, the transaction gets the mapping
    /// and reads the verified tree pages of its snapshot straight from it,
    /// without the state lock or the page cache. That is safe for its whole
    /// life: its snapshot has no page in the log, and no checkpoint can
    /// rewrite or truncate the main file while it is active, because the
    /// checkpoint's target (the oldest reader's sequence) is then already
    /// backfilled. Pages not verified yet take the ordinary path once.
    public func beginRead() throws -> ReadTransaction {
        let (snapshot, direct, serial): (Snapshot, MappedMainFile?, UInt64) = try stateLock.withLock {
            if isClosed { throw StorageError.closed }
            readers[committed.seq, default: 0] += 1
            transactionSerial &+= 1
            return (committed, backfilledSeq == committed.seq ? mapped : nil, transactionSerial)
        }
        return ReadTransaction(db: self, snapshot: snapshot, serial: serial, direct: direct)
    }

    func endRead(_ seq: UInt64) {
        stateLock.withLock {
            if let n = readers[seq] {
                if n <= 1 { readers.removeValue(forKey: seq) } else { readers[seq] = n - 1 }
            }
        }
    }

    /// Runs `body` in a read transaction.
    public func read<R>(_ body: (ReadTransaction) throws -> R) throws -> R {
        let tx = try beginRead()
        defer { tx.end() }
        return try body(tx)
    }

    /// Starts the write transaction, waiting for the current one to end.
    /// Finish it with ``WriteTransaction/commit()`` or
    /// ``WriteTransaction/rollback()``; a transaction dropped without either
    /// rolls back.
    public func beginWrite() throws -> WriteTransaction {
        if options.readOnly { throw StorageError.readOnly("opened read-only") }
        gate.acquire()
        do {
            let (snapshot, serial): (Snapshot, UInt64) = try stateLock.withLock {
                if isClosed { throw StorageError.closed }
                if let poisoned { throw StorageError.readOnly(poisoned) }
                transactionSerial &+= 1
                return (committed, transactionSerial)
            }
            return WriteTransaction(db: self, snapshot: snapshot, serial: serial, freelist: committedFreelist)
        } catch {
            gate.release()
            throw error
        }
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

    /// Checkpoints the log into the main file (when no reader still needs
    /// it), empties the log and releases the lock. Further use throws
    /// ``StorageError/closed``. Safe to call twice.
    public func close() throws {
        if options.readOnly {
            let wasOpen = stateLock.withLock { () -> Bool in
                defer { isClosed = true }
                return !isClosed
            }
            if wasOpen {
                wal.file.close()
                main.close()
            }
            return
        }
        gate.acquire()
        defer { gate.release() }
        let alreadyClosed = stateLock.withLock { isClosed }
        if alreadyClosed { return }
        var failure: Error?
        if stateLock.withLock({ poisoned == nil }) {
            do {
                try checkpointLocked()
                let done = stateLock.withLock { backfilledSeq == committed.seq && readers.isEmpty }
                if try done && wal.file.size() > 0 {
                    try wal.file.truncate(to: 0)
                    if options.durability != .none { try wal.file.sync() }
                    stateLock.withLock {
                        wal.headerValid = false
                        wal.frameCount = 0
                    }
                }
            } catch {
                failure = error
            }
        }
        stateLock.withLock {
            isClosed = true
            cache.removeAll()
            walIndex.removeAll()
            // Pages and transactions still holding it keep the mapping alive.
            mapped = nil
        }
        wal.file.close()
        main.close()
        if let failure { throw failure }
    }

    deinit {
        if !stateLock.withLock({ isClosed }) {
            try? close()
        }
    }

    // MARK: - Mapped memory

    /// Drops the pages of the main file's mapping from this process's
    /// resident memory (`madvise(MADV_DONTNEED)`); nothing else changes.
    ///
    /// Mapped pages that reads touched stay resident until the kernel needs
    /// the memory, and they count in the process's RSS — more than were
    /// read, since a fault maps the neighbouring pages too. A pass over much
    /// of a large store (an enumeration, a full scan) can call this as it
    /// goes to keep the process small: pages still in use fault back in
    /// from the OS page cache. Enumerating a million objects kept a
    /// 140 MiB file resident without it. A no-op when the store is not
    /// mapped.
    public func discardMappedPages() {
        let region = stateLock.withLock { mapped?.region }
        region?.discardResidentPages()
    }

    // MARK: - Checkpoint

    /// Copies committed pages from the log into the main file, as far as
    /// active readers allow. Runs automatically; call it to bound the log
    /// yourself.
    public func checkpoint() throws {
        guard !options.readOnly else { throw StorageError.readOnly("opened read-only") }
        gate.acquire()
        defer { gate.release() }
        try stateLock.withLock { if isClosed { throw StorageError.closed } }
        try checkpointLocked()
    }

    /// The checkpoint proper; the caller holds the writer gate.
    ///
    /// Reader rule: a page version with sequence C may overwrite the main
    /// file only when every active reader's snapshot is at or after C — a
    /// reader of an older snapshot that finds no log version of that page
    /// reads it from the main file and must find its old image there.
    func checkpointLocked(recent: RecentCommit? = nil) throws {
        if let poisoned = stateLock.withLock({ poisoned }) { throw StorageError.readOnly(poisoned) }
        let plan: (target: UInt64, copies: [(UInt32, Int)], generation: UInt32, pageCount: UInt32, full: Bool)? =
            stateLock.withLock {
                let target = min(readers.keys.min() ?? committed.seq, committed.seq)
                guard target > backfilledSeq else { return nil }
                var copies: [(UInt32, Int)] = []
                for (page, versions) in walIndex {
                    var i = versions.count - 1
                    while i >= 0 && versions[i].seq > target { i -= 1 }
                    if i >= 0 && versions[i].seq > backfilledSeq { copies.append((page, versions[i].frame)) }
                }
                return (target, copies, wal.generation, committed.header.pageCount, target == committed.seq)
            }
        guard let plan else { return }
        let sync = options.durability != .none
        var syncFailed = false
        func syncFile(_ file: any StorageFile) throws {
            do { try file.sync() } catch {
                syncFailed = true
                throw error
            }
        }
        do {
            // The log must be durable before the main file changes: a crash in
            // the middle of the copy is repaired by replaying it.
            if options.durability == .normal { try syncFile(wal.file) }
            // Mapped views of these pages stop counting as checked until the
            // copy has succeeded (a failed write may leave them half new).
            stateLock.withLock { for (number, _) in plan.copies { mapped?.clearVerified(number) } }
            var written: [(UInt32, Page)] = []
            written.reserveCapacity(plan.copies.count)
            let sorted = plan.copies.sorted { $0.0 < $1.0 }
            // Consecutive pages go out in one write of up to `runPages`.
            let runPages = 64
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: runPages * pageSize, alignment: 16)
            defer { buffer.deallocate() }
            var i = 0
            while i < sorted.count {
                var j = i
                while j < sorted.count && j - i < runPages && sorted[j].0 == sorted[i].0 + UInt32(j - i) {
                    let (number, frame) = sorted[j]
                    let page = try checkpointSource(number, frame: frame, generation: plan.generation, recent: recent)
                    (buffer + (j - i) * pageSize).copyMemory(from: page.bytes, byteCount: pageSize)
                    written.append((number, page))
                    j += 1
                }
                try main.write(buffer, count: (j - i) * pageSize, at: Int64(sorted[i].0) * Int64(pageSize))
                i = j
            }
            if plan.full {
                let size = try main.size()
                let wanted = Int64(plan.pageCount) * Int64(pageSize)
                if size > wanted { try main.truncate(to: wanted) }
            }
            if sync { try syncFile(main) }
            let mainSize = try main.size()
            stateLock.withLock {
                backfilledSeq = plan.target
                mainFileResized(to: mainSize)
                for (number, page) in written {
                    cache.put(PageCache.mainKey(number), page)
                    mapped?.markVerified(number)
                }
                counters.checkpoints += 1
                if !plan.full { counters.partialCheckpoints += 1 }
                if plan.full && committed.seq == plan.target {
                    // The main file now holds the latest commit, which is the
                    // snapshot of every reader: all of them can read it from
                    // there. (A reader that already chose a frame still finds
                    // it intact: the log is overwritten only by a restart,
                    // which changes the generation that reader re-checks.)
                    walIndex.removeAll()
                    cache.removeFrames()
                }
            }
        } catch {
            if syncFailed { poison("an fsync failed during a checkpoint: \(error)") }
            throw error
        }
    }

    /// The pages of the commit that triggered a checkpoint: a large commit
    /// may have pushed its own pages out of the cache, and re-reading them
    /// from the log would be wasted I/O.
    struct RecentCommit {
        var firstFrame: Int
        var generation: UInt32
        var pages: [(number: UInt32, page: Page)]
    }

    /// The image of WAL frame `frame` (page `number`) for a checkpoint.
    private func checkpointSource(_ number: UInt32, frame: Int, generation: UInt32, recent: RecentCommit?) throws -> Page {
        if let recent, recent.generation == generation, frame >= recent.firstFrame, frame - recent.firstFrame < recent.pages.count
        {
            let entry = recent.pages[frame - recent.firstFrame]
            if entry.number == number { return entry.page }
        }
        if let page = stateLock.withLock({ cache.get(PageCache.frameKey(generation: generation, frame: frame)) }) {
            return page
        }
        let page = Page.zeroed(pageSize)
        guard try wal.readFrame(frame, into: page), page.checksumMatches(pageNumber: number) else {
            throw StorageError.corrupt(page: number, reason: "WAL frame \(frame) unreadable during checkpoint")
        }
        return page
    }

    /// After an fsync failure nothing the OS says about durability can be
    /// trusted: the handle stops writing. Reopening runs recovery.
    func poison(_ why: String) {
        stateLock.withLock { if poisoned == nil { poisoned = why } }
    }

    /// Restarts the log when every frame is in the main file and no reader
    /// can still need a frame. Called by the committing writer.
    func restartLogIfPossible() throws {
        let canRestart = stateLock.withLock {
            !wal.headerValid || (backfilledSeq == committed.seq && wal.frameCount > 0)
        }
        guard canRestart else { return }
        // Readers of the current snapshot read from the main file from now
        // on: it holds exactly that snapshot. Clearing the index and bumping
        // the generation happen in one critical section, so a reader either
        // sees the old frame (and re-checks the generation after reading it)
        // or no frame at all.
        try stateLock.withLock {
            walIndex.removeAll(keepingCapacity: true)
            cache.removeFrames()
            try wal.restart()
            counters.walRestarts += 1
        }
        if options.durability != .none {
            do { try wal.file.sync() } catch {
                poison("an fsync of the WAL header failed: \(error)")
                throw error
            }
        }
    }
}

/// Counters of what a handle has done since it was opened.
public struct Statistics: Sendable, Equatable {
    /// Checkpoints that copied at least one commit into the main file.
    public var checkpoints = 0
    /// Checkpoints that stopped short of the last commit because a reader
    /// still used an older snapshot.
    public var partialCheckpoints = 0
    /// Times the WAL started over at its beginning.
    public var walRestarts = 0
    /// Commits made through this handle.
    public var commits = 0
    /// Frames in the WAL right now.
    public var walFrames = 0
    /// Pages in the store at the last commit.
    public var pageCount = 0
    /// Free pages at the last commit.
    public var freePages = 0
    /// Pages read from the files and checked (checksum and structure). A
    /// mapped page is checked once, and again only after this handle
    /// rewrote it; a page read with `pread` is checked at each read.
    public var pagesChecked = 0
    /// Bytes of address space the main file is mapped into; 0 when its
    /// pages are read with `pread` (see ``DatabaseOptions/memoryMappedReads``).
    public var mappedBytes = 0
}

extension Database {
    /// What this handle has done since it was opened, and the store's size.
    public var statistics: Statistics {
        stateLock.withLock {
            var s = counters
            s.walFrames = wal.frameCount
            s.mappedBytes = mapped?.region.length ?? 0
            s.pageCount = Int(committed.header.pageCount)
            s.freePages = Int(committed.header.freeCount)
            return s
        }
    }
}

/// Stands in for a missing WAL file in read-only mode.
final class EmptyFile: StorageFile, @unchecked Sendable {
    func read(into buffer: UnsafeMutableRawPointer, count: Int, at offset: Int64) throws -> Int { 0 }
    func write(_ buffer: UnsafeRawPointer, count: Int, at offset: Int64) throws {
        throw StorageError.readOnly("opened read-only")
    }
    func sync() throws {}
    func size() throws -> Int64 { 0 }
    func truncate(to size: Int64) throws { throw StorageError.readOnly("opened read-only") }
    func tryLock(exclusive: Bool) throws -> Bool { true }
    func close() {}
}
