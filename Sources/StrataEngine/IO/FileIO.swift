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
    /// The current size in bytes.
    func size() throws -> Int64
    /// Sets the size, dropping or zero-filling the tail.
    func truncate(to size: Int64) throws
    /// Takes an advisory lock without waiting; returns false when another
    /// process holds a conflicting lock.
    func tryLock(exclusive: Bool) throws -> Bool
    /// Releases the descriptor (and the lock).
    func close()
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
    /// Makes a directory entry change (file creation) durable: fsyncs the
    /// directory that holds `path`.
    func syncDirectory(of path: String) throws
}
