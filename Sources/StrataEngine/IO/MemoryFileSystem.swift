#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An in-memory file system on the engine's I/O seam.
///
/// Each file keeps two images: `contents`, what the process sees (every
/// completed write), and `durable`, what would survive a power loss (the
/// contents as of the file's last `sync`). Writes since the last sync are
/// remembered in order, so a crash simulation can decide per write whether
/// it reached the disk. Locks are per file and per handle, like `flock`.
public final class MemoryFileSystem: StorageFileSystem, @unchecked Sendable {
    private let lock = Lock()
    private var files: [String: MemoryFile] = [:]

    /// An empty file system: no files, no faults, no crash planned.
    public init() {}

    /// Opens the file at `path`, creating an empty one when `create` is true
    /// and there is none (even for a read-only handle); a missing file
    /// otherwise throws `ENOENT`. Each call returns a new handle on the same
    /// file.
    public func open(_ path: String, create: Bool, readOnly: Bool) throws -> any StorageFile {
        try lock.withLock {
            if let file = files[path] { return MemoryFileHandle(file: file, path: path, readOnly: readOnly, fileSystem: self) }
            guard create else { throw StorageError.io(operation: "open", path: path, errno: ENOENT) }
            let file = MemoryFile()
            files[path] = file
            return MemoryFileHandle(file: file, path: path, readOnly: readOnly, fileSystem: self)
        }
    }

    /// True when a file exists at `path`.
    public func exists(_ path: String) -> Bool {
        lock.withLock { files[path] != nil }
    }

    /// Removes the file at `path`; a missing file is not an error. Handles
    /// already open keep the file.
    public func remove(_ path: String) throws {
        lock.withLock { _ = files.removeValue(forKey: path) }
    }

    /// Does nothing: a file created, removed or renamed here survives a
    /// simulated power loss at once.
    public func syncDirectory(of path: String) throws {}

    /// Moves the file at `source` to `destination`, replacing any file there; a
    /// missing `source` throws `ENOENT`.
    public func rename(_ source: String, to destination: String) throws {
        try lock.withLock {
            guard let file = files.removeValue(forKey: source) else {
                throw StorageError.io(operation: "rename", path: source, errno: ENOENT)
            }
            files[destination] = file
        }
    }

    /// Moves the file at `source` to `destination` unless a file is there.
    public func moveIfAbsent(_ source: String, to destination: String) throws -> Bool {
        try lock.withLock {
            if files[destination] != nil { return false }
            guard let file = files.removeValue(forKey: source) else {
                throw StorageError.io(operation: "rename", path: source, errno: ENOENT)
            }
            files[destination] = file
            return true
        }
    }

    /// Decides, for each read, write, sync or truncate, whether it fails and with
    /// which `errno` (nil: it succeeds). Set it to inject EIO or ENOSPC.
    public var faults: (@Sendable (FileOperation) -> Int32?)? {
        get { lock.withLock { faultHook } }
        set { lock.withLock { faultHook = newValue } }
    }
    private var faultHook: (@Sendable (FileOperation) -> Int32?)?

    func fault(_ operation: FileOperation) -> StorageError? {
        if operation.kind == .sync {
            let crashNow: Bool = lock.withLock {
                if crashed { return true }
                syncs += 1
                if let limit = crashAtSyncValue, syncs >= limit {
                    crashed = true
                    return true
                }
                return false
            }
            if crashNow { return .io(operation: "fdatasync", path: operation.path, errno: EIO) }
        } else if lock.withLock({ crashed }) {
            return .io(operation: operation.kind.rawValue, path: operation.path, errno: EIO)
        }
        guard let hook = faults, let code = hook(operation) else { return nil }
        if code == ENOSPC { return .diskFull(path: operation.path) }
        return .io(operation: operation.kind.rawValue, path: operation.path, errno: code)
    }

    // MARK: Simulated power loss

    private var syncs = 0
    private var crashed = false
    /// When set, the sync that brings the count of syncs to this number
    /// does not happen: the machine "loses power" instead. From then on every
    /// read, write, sync and truncate fails with EIO and changes nothing, so
    /// the files keep exactly what they held at the moment of the crash.
    public var crashAtSync: Int? {
        get { lock.withLock { crashAtSyncValue } }
        set { lock.withLock { crashAtSyncValue = newValue } }
    }
    private var crashAtSyncValue: Int?

    /// Syncs performed so far (the crashing one included).
    public var syncCount: Int { lock.withLock { syncs } }
    /// True once the simulated crash happened.
    public var hasCrashed: Bool { lock.withLock { crashed } }

    /// What the disk holds after a power loss, as a new file system: each
    /// file as of its last sync, then every write made since, in order, that
    /// a seeded choice keeps whole, drops, or tears — some of its 512-byte
    /// sectors written, the others left old or filled with garbage. A
    /// truncation since the last sync is kept or dropped.
    public func afterPowerLoss(seed: UInt64) -> MemoryFileSystem {
        var random = SeededRandom(seed: seed)
        let result = MemoryFileSystem()
        lock.withLock {
            for (path, file) in files.sorted(by: { $0.key < $1.key }) {
                let copy = MemoryFile()
                file.lock.withLock {
                    file.pullShared()
                    var image = file.durable
                    for write in file.unsynced {
                        let choice = Int(random.next() % 3)
                        if write.bytes.isEmpty {
                            // A truncation (or extension) to `offset` bytes.
                            if choice != 0 {
                                if write.offset < image.count {
                                    image.removeLast(image.count - write.offset)
                                } else {
                                    image += repeatElement(0, count: write.offset - image.count)
                                }
                            }
                            continue
                        }
                        if choice == 0 { continue }  // dropped
                        let end = write.offset + write.bytes.count
                        if image.count < end { image += repeatElement(0, count: end - image.count) }
                        var sector = write.offset - write.offset % 512
                        while sector < end {
                            let from = max(sector, write.offset)
                            let to = min(sector + 512, end)
                            let fate = choice == 1 ? 0 : Int(random.next() % 3)  // 1: kept whole
                            switch fate {
                            case 0:
                                for i in from..<to { image[i] = write.bytes[i - write.offset] }
                            case 1:
                                break  // this sector keeps its old bytes
                            default:
                                for i in from..<to { image[i] = UInt8(truncatingIfNeeded: random.next()) }
                            }
                            sector += 512
                        }
                    }
                    copy.contents = image
                    copy.durable = image
                }
                result.files[path] = copy
            }
        }
        return result
    }

    /// A new file system holding what a killed process leaves behind: every
    /// completed write, synced or not.
    public func afterProcessCrash() -> MemoryFileSystem {
        copy { $0.contents }
    }

    /// A new file system holding what a power loss leaves behind when no
    /// unsynced write reached the disk: each file as of its last sync.
    public func afterPowerLoss() -> MemoryFileSystem {
        copy { $0.durable }
    }

    private func copy(_ image: (MemoryFile) -> [UInt8]) -> MemoryFileSystem {
        let result = MemoryFileSystem()
        lock.withLock {
            for (path, file) in files {
                let copy = MemoryFile()
                file.lock.withLock {
                    file.pullShared()
                    copy.contents = image(file)
                    copy.durable = copy.contents
                }
                result.files[path] = copy
            }
        }
        return result
    }

    /// The file at `path`, for tests that inspect or damage bytes.
    public func file(_ path: String) -> MemoryFile? {
        lock.withLock { files[path] }
    }
}

/// One in-memory file.
public final class MemoryFile: @unchecked Sendable {
    let lock = Lock()
    /// What the process sees.
    public var contents: [UInt8] = []
    /// What a power loss would leave.
    public var durable: [UInt8] = []
    /// Writes since the last sync, in order.
    public var unsynced: [(offset: Int, bytes: [UInt8])] = []
    var exclusiveHolder: ObjectIdentifier?
    var sharedHolders: Set<ObjectIdentifier> = []
    /// Byte-range locks (``StorageFile/setLock(_:at:)``) by offset: the
    /// exclusive holder, or the shared holders, as handle identities.
    var rangeLocks: [Int64: (exclusive: ObjectIdentifier?, shared: Set<ObjectIdentifier>)] = [:]
    /// The shared mapping of the file, once a handle mapped it
    /// (``StorageFile/mapShared(length:)``): address space reserved once,
    /// so that every handle's mapping is the same memory. From then on the
    /// mapping holds the file's bytes and `contents` is refreshed from it
    /// before it is read.
    var sharedMemory: UnsafeMutableRawPointer?
    static let sharedCapacity = 1 << 30

    deinit {
        if let sharedMemory { munmap(sharedMemory, Self.sharedCapacity) }
    }

    /// Copies the shared mapping's bytes into `contents`; the caller holds
    /// `lock`.
    func pullShared() {
        guard let sharedMemory, !contents.isEmpty else { return }
        contents.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: sharedMemory, byteCount: $0.count) }
    }

    /// Copies `contents` into the shared mapping and zeroes the mapping
    /// past it up to `oldCount`; the caller holds `lock`.
    func pushShared(clearingTo oldCount: Int) {
        guard let sharedMemory else { return }
        contents.withUnsafeBytes { raw in
            if let base = raw.baseAddress { sharedMemory.copyMemory(from: base, byteCount: raw.count) }
        }
        if oldCount > contents.count {
            (sharedMemory + contents.count).initializeMemory(as: UInt8.self, repeating: 0, count: oldCount - contents.count)
        }
    }

    /// Reads or changes the contents under the file's lock.
    public func withContents<R>(_ body: (inout [UInt8]) throws -> R) rethrows -> R {
        try lock.withLock {
            pullShared()
            let before = contents.count
            defer { pushShared(clearingTo: before) }
            return try body(&contents)
        }
    }
}

final class MemoryFileHandle: StorageFile, @unchecked Sendable {
    let file: MemoryFile
    let path: String
    let readOnly: Bool
    weak var fileSystem: MemoryFileSystem?

    init(file: MemoryFile, path: String, readOnly: Bool, fileSystem: MemoryFileSystem) {
        self.file = file
        self.path = path
        self.readOnly = readOnly
        self.fileSystem = fileSystem
    }

    func checkFault(_ kind: FileOperation.Kind, offset: Int64 = 0, count: Int = 0) throws {
        if let error = fileSystem?.fault(FileOperation(kind: kind, path: path, offset: offset, count: count)) { throw error }
    }

    func read(into buffer: UnsafeMutableRawPointer, count: Int, at offset: Int64) throws -> Int {
        try checkFault(.read, offset: offset, count: count)
        return file.lock.withLock {
            file.pullShared()
            let start = Int(offset)
            guard start < file.contents.count else { return 0 }
            let n = min(count, file.contents.count - start)
            file.contents.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress! + start, byteCount: n) }
            return n
        }
    }

    func write(_ buffer: UnsafeRawPointer, count: Int, at offset: Int64) throws {
        guard !readOnly else { throw StorageError.io(operation: "pwrite", path: path, errno: EBADF) }
        try checkFault(.write, offset: offset, count: count)
        file.lock.withLock {
            let start = Int(offset)
            if file.contents.count < start + count {
                file.contents.append(contentsOf: repeatElement(0, count: start + count - file.contents.count))
            }
            file.contents.withUnsafeMutableBytes { ($0.baseAddress! + start).copyMemory(from: buffer, byteCount: count) }
            file.sharedMemory.map { ($0 + start).copyMemory(from: buffer, byteCount: count) }
            file.unsynced.append((start, [UInt8](UnsafeRawBufferPointer(start: buffer, count: count))))
        }
    }

    /// Shows the hint to the fault hook and does nothing else: a memory
    /// file's bytes become durable at ``sync()`` alone. What the hook
    /// returns is ignored, as a real file's failed hint changes nothing.
    func startWriteback(offset: Int64, count: Int) {
        _ = fileSystem?.fault(FileOperation(kind: .writeback, path: path, offset: offset, count: count))
    }

    func sync() throws {
        try checkFault(.sync)
        file.lock.withLock {
            file.pullShared()
            file.durable = file.contents
            file.unsynced.removeAll()
        }
    }

    func size() throws -> Int64 {
        file.lock.withLock { Int64(file.contents.count) }
    }

    func truncate(to size: Int64) throws {
        guard !readOnly else { throw StorageError.io(operation: "ftruncate", path: path, errno: EBADF) }
        try checkFault(.truncate, offset: size)
        guard size <= Int64(MemoryFile.sharedCapacity) || file.lock.withLock({ file.sharedMemory == nil }) else {
            throw StorageError.diskFull(path: path)
        }
        file.lock.withLock {
            file.pullShared()
            let before = file.contents.count
            defer { file.pushShared(clearingTo: before) }
            let n = Int(size)
            if n < file.contents.count {
                file.contents.removeLast(file.contents.count - n)
            } else {
                file.contents.append(contentsOf: repeatElement(0, count: n - file.contents.count))
            }
            // A size change is modelled as durable only at the next sync.
            file.unsynced.append((n, []))
        }
    }

    func tryLock(exclusive: Bool) throws -> Bool {
        file.lock.withLock {
            let me = ObjectIdentifier(self)
            if let holder = file.exclusiveHolder, holder != me { return false }
            if exclusive {
                if file.sharedHolders.contains(where: { $0 != me }) { return false }
                file.sharedHolders.remove(me)
                file.exclusiveHolder = me
            } else {
                if file.exclusiveHolder == me { file.exclusiveHolder = nil }
                file.sharedHolders.insert(me)
            }
            return true
        }
    }

    func close() {
        file.lock.withLock {
            let me = ObjectIdentifier(self)
            if file.exclusiveHolder == me { file.exclusiveHolder = nil }
            file.sharedHolders.remove(me)
            for (offset, holders) in file.rangeLocks where holders.exclusive == me || holders.shared.contains(me) {
                var changed = holders
                if changed.exclusive == me { changed.exclusive = nil }
                changed.shared.remove(me)
                file.rangeLocks[offset] = changed
            }
        }
    }

    /// Maps the file's bytes into memory every handle of the file shares.
    func mapShared(length: Int) -> SharedRegion? {
        guard !readOnly, length <= MemoryFile.sharedCapacity else { return nil }
        return file.lock.withLock {
            if file.sharedMemory == nil {
                guard
                    let address = mmap(
                        nil, MemoryFile.sharedCapacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0
                    ),
                    address != MAP_FAILED
                else { return nil }
                file.sharedMemory = address
                file.pushShared(clearingTo: 0)
            }
            // The memory belongs to the file; the region only lends it.
            return SharedRegion(base: file.sharedMemory!, length: length, unmap: { _, _ in })
        }
    }

    /// Byte-range locks among this file system's handles, with the rules of
    /// POSIX open-file-description locks.
    func setLock(_ lock: RangeLock, at offset: Int64) throws -> Bool {
        file.lock.withLock {
            let me = ObjectIdentifier(self)
            var holders = file.rangeLocks[offset] ?? (nil, [])
            switch lock {
            case .unlocked:
                if holders.exclusive == me { holders.exclusive = nil }
                holders.shared.remove(me)
            case .shared:
                if let other = holders.exclusive, other != me { return false }
                holders.exclusive = nil
                holders.shared.insert(me)
            case .exclusive:
                if let other = holders.exclusive, other != me { return false }
                if holders.shared.contains(where: { $0 != me }) { return false }
                holders.shared.remove(me)
                holders.exclusive = me
            }
            file.rangeLocks[offset] = holders
            return true
        }
    }
}

/// One operation offered to ``MemoryFileSystem/faults``.
public struct FileOperation: Sendable {
    /// Which system call an operation stands for; the raw value is its name.
    public enum Kind: String, Sendable {
        /// A read (`pread`).
        case read = "pread"
        /// A write (`pwrite`).
        case write = "pwrite"
        /// A sync (`fdatasync`).
        case sync = "fdatasync"
        /// A size change (`ftruncate`).
        case truncate = "ftruncate"
        /// A request to start writing bytes to the device
        /// (``StorageFile/startWriteback(offset:count:)``,
        /// `sync_file_range`): a hint, so what the hook returns for it is
        /// ignored.
        case writeback = "sync_file_range"
    }
    /// The kind of operation.
    public var kind: Kind
    /// The path the file was opened at.
    public var path: String
    /// Where a read, write or writeback starts, or the new size for a
    /// truncate; 0 for a sync.
    public var offset: Int64
    /// The bytes a read, write or writeback covers; 0 for a sync or a
    /// truncate.
    public var count: Int
}
