/// Every failure the storage engine reports.
///
/// Bytes read from disk are untrusted: anything wrong with them surfaces as
/// ``corrupt(page:reason:)`` or ``corruptFile(_:)``, never as a trap.
public enum StorageError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A page failed validation when it was read: bad checksum, impossible
    /// cell offsets, unknown page type, keys out of order, and so on.
    case corrupt(page: UInt32, reason: String)
    /// The file as a whole is not usable: not a Strata store, truncated,
    /// damaged header, or a WAL whose header does not belong to this store.
    case corruptFile(String)
    /// Another process holds the store's lock.
    case locked(path: String)
    /// Another process's (or handle's) write transaction held the store for
    /// longer than the busy timeout (``DatabaseOptions/busyTimeout``).
    case busy(path: String)
    /// The store cannot be shared between processes here (no byte-range
    /// locks or shared mappings on this file system, or every reader slot
    /// of the shared index is taken); open it with
    /// ``LockingMode/exclusive`` instead. The string says why.
    case cannotShare(String)
    /// The handle was opened read-only, or it was closed after an fsync
    /// failure and refuses further writes.
    case readOnly(String)
    /// The handle has been closed.
    case closed
    /// A key longer than ``Database/maxKeyLength``.
    case keyTooLong(length: Int, maximum: Int)
    /// A value longer than ``Database/maxValueLength``.
    case valueTooLarge(length: Int, maximum: Int)
    /// A tree name that is empty, too long, or already taken.
    case invalidTreeName(String)
    /// The named tree does not exist.
    case noSuchTree(String)
    /// A ``Tree`` handle used in a transaction other than the one that
    /// returned it, or after its tree was dropped or renamed (even if a tree
    /// of that name exists again): `reason` says which.
    case staleTree(name: String, reason: String)
    /// The disk is full (`ENOSPC`, `EDQUOT`).
    case diskFull(path: String)
    /// Any other system call failure, with its `errno`.
    case io(operation: String, path: String, errno: Int32)
    /// Invalid options passed to `open`.
    case invalidOptions(String)
    /// A transaction was used after it ended, or from the wrong place.
    case transactionEnded
    /// An earlier change in this write transaction failed part-way (a page
    /// could not be read, or was found damaged), so its pages may hold half
    /// of that change. Every later use, `commit()` included, throws this;
    /// only a rollback is possible. The string is the first failure.
    case transactionFailed(String)

    /// The error in one line, for logs and messages.
    public var description: String {
        switch self {
        case .corrupt(let page, let reason): return "corrupt page \(page): \(reason)"
        case .corruptFile(let reason): return "corrupt store: \(reason)"
        case .locked(let path): return "store is locked by another process: \(path)"
        case .busy(let path):
            return "store is busy: another process's write transaction held it past the busy timeout: \(path)"
        case .cannotShare(let why): return "store cannot be shared between processes: \(why)"
        case .readOnly(let why): return "store is read-only: \(why)"
        case .closed: return "the database handle is closed"
        case .keyTooLong(let length, let maximum):
            return "key of \(length) bytes exceeds the maximum key length of \(maximum) bytes"
        case .valueTooLarge(let length, let maximum):
            return "value of \(length) bytes exceeds the maximum value length of \(maximum) bytes"
        case .invalidTreeName(let name): return "invalid tree name: \(name)"
        case .noSuchTree(let name): return "no tree named \(name)"
        case .staleTree(let name, let reason): return "stale handle of tree \(name): \(reason)"
        case .diskFull(let path): return "disk full while writing \(path)"
        case .io(let operation, let path, let errno):
            return "\(operation) failed on \(path): errno \(errno) (\(String(cString: strerror(errno))))"
        case .invalidOptions(let why): return "invalid options: \(why)"
        case .transactionEnded: return "the transaction has already ended"
        case .transactionFailed(let why):
            return "the write transaction failed part-way through a change (\(why)) and can only be rolled back"
        }
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
