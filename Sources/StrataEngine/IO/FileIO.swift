/// The I/O seam: every system call the engine makes goes through these two
/// protocols, so tests can substitute a simulated file system that drops,
/// tears or fails writes (see `StrataTesting`).
///
/// Implementations report failures as ``StorageError`` (`.io`, `.diskFull`).
/// Short reads past the end of a file are not errors: `read` returns the
/// number of bytes actually read and callers validate it.
public protocol StorageFile: AnyObject, Sendable {
    /// Reads up to `count` bytes at `offset` into `buffer`; returns bytes read
    /// (fewer than `count` only at end of file).
    func read(into buffer: UnsafeMutableRawPointer, count: Int, at offset: Int64) throws -> Int
    /// Writes all `count` bytes at `offset`, extending the file if needed.
    func write(_ buffer: UnsafeRawPointer, count: Int, at offset: Int64) throws
    /// Makes every completed write durable (`fdatasync`).
    func sync() throws
    /// Asks the operating system to start writing the `count` bytes at
    /// `offset` to the device without waiting, so that the ``sync()`` that
    /// follows a large write finds less left to do (Linux's
    /// `sync_file_range`). A hint: it makes nothing durable, and failing
    /// changes nothing. The default does nothing.
    func startWriteback(offset: Int64, count: Int)
    /// The current size in bytes.
    func size() throws -> Int64
    /// Sets the size, dropping or zero-filling the tail.
    func truncate(to size: Int64) throws
    /// Takes an advisory lock without waiting; returns false when another
    /// process holds a conflicting lock.
    func tryLock(exclusive: Bool) throws -> Bool
    /// Releases the descriptor (and the lock).
    func close()
    /// Maps the first `length` bytes of the file read-only and shared with
    /// the file, so that later `write`s show through; nil when this file
    /// cannot be mapped (the engine then reads with `read`). `length` may
    /// exceed the file's size: the engine reads only pages the file holds.
    /// The default implementation maps nothing.
    func mapForReading(length: Int) -> MappedRegion?
    /// Maps the first `length` bytes of the file for reading and writing,
    /// shared with every other handle (and process) that maps the file, for
    /// the store's shared log index. Only bytes inside the file may be
    /// touched. Nil when this file cannot be mapped so; the default maps
    /// nothing, and the store then opens only in
    /// ``LockingMode/exclusive`` mode.
    func mapShared(length: Int) -> SharedRegion?
    /// Sets this handle's lock on the one byte at `offset` (which may lie
    /// past the end of the file) without waiting: shared, exclusive, or
    /// none. Returns false when another handle holds a conflicting lock.
    /// Locks belong to the handle, are released when it closes or its
    /// process dies, and a handle's new lock on a byte replaces its old
    /// one (POSIX open-file-description locks, `F_OFD_SETLK`). The default
    /// throws: such a file cannot be shared.
    func setLock(_ lock: RangeLock, at offset: Int64) throws -> Bool
}

/// A lock on one byte of a file, for ``StorageFile/setLock(_:at:)``.
public enum RangeLock: Sendable {
    /// Others may hold shared locks too, but no exclusive one.
    case shared
    /// No other handle holds any lock on the byte.
    case exclusive
    /// Releases this handle's lock on the byte.
    case unlocked
}

extension StorageFile {
    /// Does nothing: the file's ``sync()`` writes everything.
    public func startWriteback(offset: Int64, count: Int) {}

    /// Maps nothing: the engine reads the file with `read`.
    public func mapForReading(length: Int) -> MappedRegion? { nil }

    /// Maps nothing: the store cannot be shared through this file.
    public func mapShared(length: Int) -> SharedRegion? { nil }

    /// Throws ``StorageError/cannotShare(_:)``: this file has no byte-range
    /// locks.
    public func setLock(_ lock: RangeLock, at offset: Int64) throws -> Bool {
        throw StorageError.cannotShare("the file system offers no byte-range locks")
    }
}

extension StorageFileSystem {
    /// Checks, then renames: not atomic. File systems shared between
    /// processes implement it atomically.
    public func moveIfAbsent(_ source: String, to destination: String) throws -> Bool {
        if exists(destination) { return false }
        try rename(source, to: destination)
        return true
    }
}

/// A read-write mapping of a file shared with every process that maps it,
/// unmapped when the last reference goes.
public final class SharedRegion: @unchecked Sendable {
    /// The address of the file's byte 0.
    public let base: UnsafeMutableRawPointer
    /// Bytes of address space reserved for the file.
    public let length: Int
    private let unmap: @Sendable (UnsafeMutableRawPointer, Int) -> Void

    /// A region at `base` of `length` bytes; `unmap` releases it.
    public init(base: UnsafeMutableRawPointer, length: Int, unmap: @escaping @Sendable (UnsafeMutableRawPointer, Int) -> Void) {
        self.base = base
        self.length = length
        self.unmap = unmap
    }

    deinit { unmap(base, length) }
}

/// A read-only memory mapping of a file, unmapped when the last reference
/// goes: pages read through it keep it alive, so a transaction that outlives
/// its database still reads mapped memory, never freed address space.
public final class MappedRegion: @unchecked Sendable {
    /// The address of the file's byte 0.
    public let base: UnsafeRawPointer
    /// Bytes of address space reserved for the file.
    public let length: Int
    private let unmap: @Sendable (UnsafeRawPointer, Int) -> Void
    private let discard: (@Sendable (UnsafeRawPointer, Int) -> Void)?

    /// A region at `base` of `length` bytes; `unmap` releases it, and
    /// `discard`, when given, drops its resident pages from this process
    /// (they are read from the file again when next touched).
    public init(
        base: UnsafeRawPointer, length: Int, unmap: @escaping @Sendable (UnsafeRawPointer, Int) -> Void,
        discard: (@Sendable (UnsafeRawPointer, Int) -> Void)? = nil
    ) {
        self.base = base
        self.length = length
        self.unmap = unmap
        self.discard = discard
    }

    /// Drops the region's pages from this process's resident memory (POSIX:
    /// `madvise(MADV_DONTNEED)`). Safe while views are read: the mapping is
    /// read-only and shared, so a touched page faults back in with the
    /// file's bytes, which are the bytes it held.
    public func discardResidentPages() { discard?(base, length) }

    deinit { unmap(base, length) }
}

/// Opens, removes and syncs files by path.
public protocol StorageFileSystem: Sendable {
    /// Opens `path`; creates it when `create` is true and it is missing.
    func open(_ path: String, create: Bool, readOnly: Bool) throws -> any StorageFile
    /// True when a file exists at `path`.
    func exists(_ path: String) -> Bool
    /// Removes `path` if it exists.
    func remove(_ path: String) throws
    /// Renames `source` to `destination`, replacing it (atomic on POSIX).
    func rename(_ source: String, to destination: String) throws
    /// Moves `source` to `destination` unless something exists there, in
    /// one atomic step; returns false (and leaves `source`) when it does.
    func moveIfAbsent(_ source: String, to destination: String) throws -> Bool
    /// Makes a directory entry change (file creation) durable: fsyncs the
    /// directory that holds `path`.
    func syncDirectory(of path: String) throws
}
