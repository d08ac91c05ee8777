/// How hard a commit works to survive a power loss.
///
/// | level | a commit returns after | after a power loss |
/// |---|---|---|
/// | `full` | its WAL frames are written **and** synced (one `fdatasync`; `F_FULLFSYNC` on Apple platforms) | every commit that returned is present |
/// | `normal` | its WAL frames are written (not synced); the WAL is synced before each checkpoint | the newest commits may be missing; the store is consistent and holds a prefix of the commits |
/// | `none` | its WAL frames are written; nothing is ever synced | anything may be lost and the file may be damaged; for tests and bulk loads that can be redone |
///
/// A process crash (as opposed to a power loss or kernel crash) loses
/// nothing that returned at any level: written data is in the OS page cache.
public enum Durability: String, Sendable, CaseIterable {
    /// A commit returns once its WAL frames are written and synced: every
    /// commit that returned survives a power loss.
    case full
    /// A commit returns once its WAL frames are written; the WAL is synced
    /// before each checkpoint. A power loss may lose the newest commits.
    case normal
    /// Nothing is ever synced: a power loss may lose anything and damage the
    /// file. For tests and bulk loads that can be redone.
    case none
}

/// Whether other processes (and other handles) may open a store at the
/// same time.
public enum LockingMode: String, Sendable, CaseIterable {
    /// Any number of handles in any number of processes open the store at
    /// once: they share the log's index through the `<store>-shm` file,
    /// readers see every handle's latest commit, and writers take turns
    /// (see ``DatabaseOptions/busyTimeout``). Needs a file system with
    /// byte-range locks and shared mappings (a local one; not every network
    /// file system has them), else the open throws
    /// ``StorageError/cannotShare(_:)``.
    case shared
    /// One handle owns the store: a writable open takes an exclusive
    /// `flock` and a second one gets ``StorageError/locked(path:)``; the
    /// log's index lives in this process's memory and no `-shm` file is
    /// used. A read-only open takes no lock and reads the store as it was
    /// when it opened: only safe while nothing writes it.
    case exclusive
}

/// Options for ``Database/open(path:options:fileSystem:)``.
public struct DatabaseOptions: Sendable {
    /// Page size of a new store: a power of two from 4096 to 65536. An
    /// existing store keeps the page size it was created with.
    public var pageSize: Int = 4096
    /// See ``Durability``. Default `.full`.
    public var durability: Durability = .full
    /// Byte budget of the shared page cache (default 64 MiB), and the
    /// budget of the open write transaction's changed pages, held in
    /// addition to it: a transaction that outgrows it writes changed pages
    /// out before its commit (pages it allocated past the end of the store
    /// into the main file, others into the log) and reads them back when it
    /// needs them (it *spills*), so an import or a rewrite larger than
    /// memory runs in bounded memory. Once it has spilled, it also holds
    /// back up to half as much again of puts and deletes, applied in key
    /// order.
    public var cacheSizeBytes: Int = 64 << 20
    /// A checkpoint runs after the commit that brings the WAL to this many
    /// frames (default 1000), and at close.
    public var checkpointThresholdFrames: Int = 1000
    /// Run the checkpoint that follows a commit on a thread of its own
    /// (default false): a commit of durability `full` then returns once it
    /// is durable, without waiting for its pages to be copied into the
    /// main file and that file's sync. The checkpoint still takes the
    /// writer gate, so the next write transaction of this handle waits for
    /// it, and so does `close()` for one that runs (one still waiting for
    /// the gate finds the handle closed and stops; `close()` checkpoints
    /// itself). A commit that wrote pages into the main file (it spilled),
    /// and commits of a lower durability, still checkpoint before they
    /// return. When the checkpoint copied every frame and no reader needs
    /// one, the thread also starts the log over (writing and syncing its
    /// header), which the next commit would otherwise do first. The thread
    /// holds the handle (and its file locks) until the checkpoint ends,
    /// even when the caller has dropped it.
    public var checkpointsInBackground: Bool = false
    /// Open without writing the store (the shared index, `-shm`, is still
    /// written: a reader publishes its marks there).
    public var readOnly: Bool = false
    /// Create the store when the file does not exist (default true).
    public var createIfMissing: Bool = true
    /// Read the main file through a read-only memory mapping (default true),
    /// as LMDB does, instead of a `pread` into a cache buffer per page.
    ///
    /// A page read through the mapping is still checked (checksum and
    /// structure) the first time it is read, and again after this handle
    /// rewrites it; the page cache then holds views of the mapping, so the
    /// OS page cache holds the bytes once. WAL frames are still read with
    /// `pread`. Only a handle that holds the store's lock maps it (never a
    /// read-only one, whose file another process may truncate).
    ///
    /// The price of mapping, as for every mapped database: a disk that fails
    /// to deliver a mapped page (an I/O error), or another program truncating
    /// the file while it is open, ends the process with `SIGBUS` instead of
    /// a thrown ``StorageError/io(operation:path:errno:)``. Turn it off where
    /// that matters more than read speed.
    public var memoryMappedReads: Bool = true
    /// How long a write transaction (or a checkpoint, or a repair of the
    /// shared index) waits for another handle's write transaction to end
    /// before it throws ``StorageError/busy(path:)``. Default 5 seconds.
    /// Write transactions of one handle wait for each other without limit.
    public var busyTimeout: Duration = .seconds(5)
    /// Whether other processes may open the store at once (default
    /// ``LockingMode/shared``).
    public var locking: LockingMode = .shared

    /// Options with the values given; each default is the one its property
    /// states.
    public init(
        pageSize: Int = 4096,
        durability: Durability = .full,
        cacheSizeBytes: Int = 64 << 20,
        checkpointThresholdFrames: Int = 1000,
        readOnly: Bool = false,
        createIfMissing: Bool = true,
        memoryMappedReads: Bool = true,
        busyTimeout: Duration = .seconds(5),
        locking: LockingMode = .shared
    ) {
        self.pageSize = pageSize
        self.durability = durability
        self.cacheSizeBytes = cacheSizeBytes
        self.checkpointThresholdFrames = checkpointThresholdFrames
        self.readOnly = readOnly
        self.createIfMissing = createIfMissing
        self.memoryMappedReads = memoryMappedReads
        self.busyTimeout = busyTimeout
        self.locking = locking
    }
}
