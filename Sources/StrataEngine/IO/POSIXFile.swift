import CStrataCRC32C

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The real file system: `open`, `pread`, `pwrite`, `fdatasync`, `ftruncate`,
/// `flock`. Interrupted calls (`EINTR`) are retried; every other failure is a
/// ``StorageError``.
public struct POSIXFileSystem: StorageFileSystem {
    /// The file system of the running process.
    public init() {}

    /// Opens `path` (`open(2)`) read-only, or for reading and writing; creates
    /// it (mode 0644) when `create` is true and the handle is not read-only.
    public func open(_ path: String, create: Bool, readOnly: Bool) throws -> any StorageFile {
        var flags: Int32 = readOnly ? O_RDONLY : O_RDWR
        if create && !readOnly { flags |= O_CREAT }
        flags |= O_CLOEXEC
        let fd = path.withCString { systemOpen($0, flags, 0o644) }
        if fd < 0 { throw posixError("open", path) }
        return POSIXFile(fd: fd, path: path)
    }

    /// True when something exists at `path` (`access` with `F_OK`).
    public func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// Removes `path` (`unlink`); a missing file is not an error.
    public func remove(_ path: String) throws {
        if unlink(path) != 0 && errno != ENOENT { throw posixError("unlink", path) }
    }

    /// Renames `source` to `destination` (`rename(2)`), atomically replacing
    /// any file there.
    public func rename(_ source: String, to destination: String) throws {
        #if canImport(Glibc)
            let rc = Glibc.rename(source, destination)
        #else
            let rc = Darwin.rename(source, destination)
        #endif
        if rc != 0 { throw posixError("rename", source) }
    }

    /// Moves `source` to `destination` unless something exists there:
    /// `link(2)`, which fails with `EEXIST` rather than replace, then
    /// `unlink(2)` of `source`.
    public func moveIfAbsent(_ source: String, to destination: String) throws -> Bool {
        if link(source, destination) != 0 {
            if errno == EEXIST { return false }
            throw posixError("link", source)
        }
        try remove(source)
        return true
    }

    /// Fsyncs the directory that holds `path`, so that a file created or
    /// renamed there survives a power loss. A file system that cannot fsync a
    /// directory (`EINVAL`) is not an error.
    public func syncDirectory(of path: String) throws {
        var dir = path
        if let slash = dir.lastIndex(of: "/") {
            dir = String(dir[..<slash])
            if dir.isEmpty { dir = "/" }
        } else {
            dir = "."
        }
        let fd = dir.withCString { systemOpen($0, O_RDONLY | O_CLOEXEC, 0) }
        if fd < 0 { throw posixError("open directory", dir) }
        defer { systemClose(fd) }
        if fsync(fd) != 0 && errno != EINVAL { throw posixError("fsync directory", dir) }
    }
}

@inline(__always)
private func systemOpen(_ path: UnsafePointer<CChar>, _ flags: Int32, _ mode: mode_t) -> Int32 {
    #if canImport(Glibc)
        return Glibc.open(path, flags, mode)
    #else
        return Darwin.open(path, flags, mode)
    #endif
}

@inline(__always)
private func systemClose(_ fd: Int32) {
    #if canImport(Glibc)
        _ = Glibc.close(fd)
    #else
        _ = Darwin.close(fd)
    #endif
}

func posixError(_ operation: String, _ path: String, _ code: Int32 = errno) -> StorageError {
    if code == ENOSPC || code == EDQUOT { return .diskFull(path: path) }
    return .io(operation: operation, path: path, errno: code)
}

/// A file descriptor. Positional I/O needs no shared offset, so one instance
/// is safe to use from several threads at once.
public final class POSIXFile: StorageFile, @unchecked Sendable {
    let fd: Int32
    let path: String

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { if fd >= 0 { systemClose(fd) } }

    /// Reads up to `count` bytes at `offset` with `pread`, until it has them
    /// all or reaches the end of the file; returns the bytes read.
    public func read(into buffer: UnsafeMutableRawPointer, count: Int, at offset: Int64) throws -> Int {
        var done = 0
        while done < count {
            let n = pread(fd, buffer + done, count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw posixError("pread", path)
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Writes all `count` bytes at `offset` with `pwrite`, going on after short
    /// writes.
    public func write(_ buffer: UnsafeRawPointer, count: Int, at offset: Int64) throws {
        var done = 0
        while done < count {
            let n = pwrite(fd, buffer + done, count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw posixError("pwrite", path)
            }
            done += n
        }
    }

    /// Starts the device write of `count` bytes at `offset` without waiting:
    /// `sync_file_range` with `SYNC_FILE_RANGE_WRITE` on Linux, nothing
    /// elsewhere. Each mebibyte of a large log append then goes to the disk
    /// while the next is copied, and the append's `fdatasync` waits for
    /// less (4.9 MB of frames on this project's machine: write and sync 5.3
    /// → 3.9 ms into new space, 3.2 → 2.3 ms over old). Failures are
    /// ignored: the sync that follows writes whatever is left.
    public func startWriteback(offset: Int64, count: Int) {
        _ = strata_start_writeback(fd, offset, Int64(count))
    }

    /// Makes everything written so far durable: `fdatasync` on Linux. On
    /// Apple platforms `fsync` only hands the data to the drive, which may
    /// keep it in a volatile cache and reorder it; `fcntl(F_FULLFSYNC)`
    /// makes the drive write its cache out, so that is used, falling back
    /// to `fsync` when it fails (a file system that does not support it),
    /// as SQLite does.
    public func sync() throws {
        #if canImport(Darwin)
            if fcntl(fd, F_FULLFSYNC) == 0 { return }
        #endif
        while true {
            #if os(Linux)
                let rc = fdatasync(fd)
            #else
                let rc = fsync(fd)
            #endif
            if rc == 0 { return }
            if errno == EINTR { continue }
            throw posixError("fdatasync", path)
        }
    }

    /// The file's size (`fstat`).
    public func size() throws -> Int64 {
        var st = stat()
        if fstat(fd, &st) != 0 { throw posixError("fstat", path) }
        return Int64(st.st_size)
    }

    /// `mmap(PROT_READ, MAP_SHARED)`. Reading mapped memory of a file that
    /// another process truncated, or that the disk cannot deliver, raises
    /// `SIGBUS` instead of returning an error: the engine maps only stores
    /// it holds the exclusive lock on (see ``DatabaseOptions/memoryMappedReads``).
    public func mapForReading(length: Int) -> MappedRegion? {
        guard length > 0, let address = mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0), address != MAP_FAILED else {
            return nil
        }
        return MappedRegion(
            base: UnsafeRawPointer(address), length: length,
            unmap: { base, length in _ = munmap(UnsafeMutableRawPointer(mutating: base), length) },
            discard: { base, length in _ = madvise(UnsafeMutableRawPointer(mutating: base), length, MADV_DONTNEED) })
    }

    /// `mmap(PROT_READ | PROT_WRITE, MAP_SHARED)`: the store's shared log
    /// index. Touching bytes past the end of the file raises `SIGBUS`; the
    /// engine grows the file before it uses new bytes and checks the size
    /// before it trusts a length read from it.
    public func mapShared(length: Int) -> SharedRegion? {
        guard length > 0, let address = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), address != MAP_FAILED
        else { return nil }
        return SharedRegion(base: address, length: length, unmap: { base, length in _ = munmap(base, length) })
    }

    /// An open-file-description lock on the byte at `offset`
    /// (`F_OFD_SETLK`): held by this descriptor, not by the process, so
    /// two handles in one process exclude each other as two processes do,
    /// and released by the kernel when the descriptor closes or the process
    /// dies. (Apple platforms have no such locks: there `F_SETLK` is used,
    /// whose locks belong to the process, so one process should open a
    /// store through one handle there.)
    public func setLock(_ lock: RangeLock, at offset: Int64) throws -> Bool {
        var request = flock()
        switch lock {
        case .shared: request.l_type = Int16(F_RDLCK)
        case .exclusive: request.l_type = Int16(F_WRLCK)
        case .unlocked: request.l_type = Int16(F_UNLCK)
        }
        request.l_whence = Int16(SEEK_SET)
        request.l_start = off_t(offset)
        request.l_len = 1
        #if os(Linux)
            let command: Int32 = 37  // F_OFD_SETLK
        #else
            let command = F_SETLK
        #endif
        while fcntl(fd, command, &request) != 0 {
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EACCES { return false }
            if errno == EINVAL || errno == ENOLCK || errno == ENOSYS || errno == EOPNOTSUPP {
                throw StorageError.cannotShare("fcntl(F_OFD_SETLK) failed on \(path): errno \(errno)")
            }
            throw posixError("fcntl(F_OFD_SETLK)", path)
        }
        return true
    }

    /// Sets the file's size (`ftruncate`).
    public func truncate(to size: Int64) throws {
        while ftruncate(fd, off_t(size)) != 0 {
            if errno == EINTR { continue }
            throw posixError("ftruncate", path)
        }
    }

    /// Takes an `flock` lock, exclusive or shared, without waiting; false when
    /// another handle holds a conflicting one.
    public func tryLock(exclusive: Bool) throws -> Bool {
        while flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            if errno == EWOULDBLOCK { return false }
            throw posixError("flock", path)
        }
        return true
    }

    /// Releases the locks. The descriptor itself is closed when the object is
    /// freed, so that a concurrent reader never sees a recycled descriptor
    /// number.
    public func close() {
        // The descriptor is closed in deinit so that a concurrent reader never
        // sees a recycled descriptor number.
        _ = flock(fd, LOCK_UN)
        // And every byte-range lock of this descriptor (the shared index's).
        var request = flock()
        request.l_type = Int16(F_UNLCK)
        request.l_whence = Int16(SEEK_SET)
        request.l_start = 0
        request.l_len = 0
        #if os(Linux)
            _ = fcntl(fd, 37, &request)  // F_OFD_SETLK
        #else
            _ = fcntl(fd, F_SETLK, &request)
        #endif
    }
}
