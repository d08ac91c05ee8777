/// How hard a commit works to survive a power loss.
///
/// | level | a commit returns after | after a power loss |
/// |---|---|---|
/// | `full` | its WAL frames are written **and** synced (one `fdatasync`) | every commit that returned is present |
/// | `normal` | its WAL frames are written (not synced); the WAL is synced before each checkpoint | the newest commits may be missing; the store is consistent and holds a prefix of the commits |
/// | `none` | its WAL frames are written; nothing is ever synced | anything may be lost and the file may be damaged; for tests and bulk loads that can be redone |
///
/// A process crash (as opposed to a power loss or kernel crash) loses
/// nothing that returned at any level: written data is in the OS page cache.
public enum Durability: String, Sendable, CaseIterable {
    case full
    case normal
    case none
}

/// Options for ``Database/open(path:options:fileSystem:)``.
public struct DatabaseOptions: Sendable {
    /// Page size of a new store: a power of two from 4096 to 65536. An
    /// existing store keeps the page size it was created with.
    public var pageSize: Int = 4096
    /// See ``Durability``. Default `.full`.
    public var durability: Durability = .full
    /// Byte budget of the shared page cache (default 64 MiB). Dirty pages of
    /// the open write transaction are held in addition to it, until commit.
    public var cacheSizeBytes: Int = 64 << 20
    /// A checkpoint runs after the commit that brings the WAL to this many
    /// frames (default 1000), and at close.
    public var checkpointThresholdFrames: Int = 1000
    /// Open without writing anything and without taking the lock.
    public var readOnly: Bool = false
    /// Create the store when the file does not exist (default true).
    public var createIfMissing: Bool = true

    public init(
        pageSize: Int = 4096,
        durability: Durability = .full,
        cacheSizeBytes: Int = 64 << 20,
        checkpointThresholdFrames: Int = 1000,
        readOnly: Bool = false,
        createIfMissing: Bool = true
    ) {
        self.pageSize = pageSize
        self.durability = durability
        self.cacheSizeBytes = cacheSizeBytes
        self.checkpointThresholdFrames = checkpointThresholdFrames
        self.readOnly = readOnly
        self.createIfMissing = createIfMissing
    }
}
