/// Making a new store's files, opening an existing store's files (the
/// steps of `open`), reading the freelist, the handle's counters, and the
/// stand-in for a missing log.
extension Database {
    /// Refuses options no store can be opened with.
    static func validate(_ options: DatabaseOptions) throws {
        guard FileHeader.isValidPageSize(options.pageSize) else {
            throw StorageError.invalidOptions("page size \(options.pageSize) is not a power of two from 4096 to 65536")
        }
        guard options.checkpointThresholdFrames >= 1 else {
            throw StorageError.invalidOptions("checkpointThresholdFrames must be at least 1")
        }
        guard options.busyTimeout >= .zero else {
            throw StorageError.invalidOptions("busyTimeout must not be negative")
        }
    }

    /// The store's page size, from the raw header prefix of `main`; a
    /// header torn by a crash during a checkpoint is repaired from the
    /// log, whose own header then tells the page size.
    static func readPageSize(_ main: any StorageFile, walPath: String, fileSystem: any StorageFileSystem) throws
        -> Int
    {
        var prefix = [UInt8](repeating: 0, count: 64)
        let got = try prefix.withUnsafeMutableBytes { try main.read(into: $0.baseAddress!, count: 64, at: 0) }
        do {
            return try prefix.withUnsafeBytes { try FileHeader.peekPageSize($0.baseAddress!, count: got) }
        } catch {
            guard let fromLog = WAL.peekPageSize(path: walPath, fileSystem: fileSystem) else { throw error }
            return fromLog
        }
    }

    /// The log file: opened (an empty stand-in when a read-only handle
    /// finds none), or created with its directory entry synced.
    static func openLog(_ walPath: String, options: DatabaseOptions, fileSystem: any StorageFileSystem) throws
        -> any StorageFile
    {
        let walExists = fileSystem.exists(walPath)
        if options.readOnly {
            return walExists ? try fileSystem.open(walPath, create: false, readOnly: true) : EmptyFile()
        }
        let walFile = try fileSystem.open(walPath, create: true, readOnly: false)
        if !walExists && options.durability != .none { try fileSystem.syncDirectory(of: walPath) }
        return walFile
    }

    /// The log's index: in the `-shm` file other processes share, or in
    /// private memory for an exclusive handle.
    static func openSharedIndex(
        _ shmPath: String, pageSize: Int, exclusive: Bool, fileSystem: any StorageFileSystem
    ) throws -> SharedIndex {
        if exclusive { return try SharedIndex(privateFor: shmPath, pageSize: pageSize) }
        let shmFile: any StorageFile
        do {
            shmFile = try fileSystem.open(shmPath, create: true, readOnly: false)
        } catch {
            throw StorageError.cannotShare(
                "cannot open \(shmPath) for reading and writing (\(error)); open with locking .exclusive")
        }
        do {
            return try SharedIndex(file: shmFile, path: shmPath, pageSize: pageSize)
        } catch {
            shmFile.close()
            throw error
        }
    }

    /// Creates a new store atomically: the first two pages are written and
    /// synced under a temporary name of this process's, which then moves
    /// into place unless another process created the store meanwhile (its
    /// store is kept). A crash leaves either no store or a complete one.
    static func createStore(_ path: String, options: DatabaseOptions, fileSystem: any StorageFileSystem) throws {
        let temporary = path + ".creating-\(UInt64.random(in: 0...UInt64.max))"
        let file = try fileSystem.open(temporary, create: true, readOnly: false)
        do {
            try writeInitialPages(file, pageSize: options.pageSize, sync: options.durability != .none)
            file.close()
            if try !fileSystem.moveIfAbsent(temporary, to: path) { try fileSystem.remove(temporary) }
        } catch {
            file.close()
            try? fileSystem.remove(temporary)
            throw error
        }
        if options.durability != .none { try fileSystem.syncDirectory(of: path) }
    }

    /// Writes the header page and an empty catalog root.
    static func writeInitialPages(_ file: any StorageFile, pageSize: Int, sync: Bool) throws {
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
            let page = try pager.page(trunk, at: snapshot.position, pageCount: pageCount)
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
    /// Syncs of the log that made commits durable (durability `full`):
    /// fewer than `commits` when commits of several threads shared a sync
    /// (group commit).
    public var logSyncs = 0
    /// Pages write transactions wrote out before their commit because
    /// they outgrew the budget (see ``DatabaseOptions/cacheSizeBytes``).
    public var spilledPages = 0
    /// Pages new to the file that large commits wrote straight into the
    /// main file instead of the log (commits of at least 256 such pages,
    /// or a quarter of the budget when that is less), spills not counted.
    public var freshPagesWrittenToMainFile = 0
    /// Leaves that existed before a write transaction that spilled and
    /// that it moved to new page numbers, so that it wrote each of them
    /// once, into the main file, instead of into the log and again at the
    /// checkpoint (see ``DatabaseOptions/cacheSizeBytes``).
    public var relocatedPages = 0
    /// Spilled pages read back by the transactions that wrote them.
    public var spillReads = 0
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
            s.commits = groupCommit.commits
            s.logSyncs = groupCommit.logSyncs
            s.walFrames = wal.state.frames
            s.mappedBytes = pager.mapped?.region.length ?? 0
            s.pageCount = Int(wal.state.pageCount)
            s.freePages = Int(wal.state.freeCount)
            s.pagesChecked = pager.pagesChecked
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
    func setLock(_ lock: RangeLock, at offset: Int64) throws -> Bool { true }
}
