import Foundation
import StrataEngine

/// Where and how a container keeps its models: on disk at a URL (or a
/// default location), or in memory; writable or read-only.
public struct ModelConfiguration: Hashable, Sendable, Identifiable {
    /// Accepted for source compatibility; Strata has no app groups.
    public struct GroupContainer: Hashable, Sendable {
        let value: String
        /// The default group container; Strata ignores it.
        public static let automatic = GroupContainer(value: "automatic")
        /// No group container; Strata ignores it.
        public static let none = GroupContainer(value: "none")
        /// The app group named `identifier`; Strata ignores it.
        public static func identifier(_ identifier: String) -> GroupContainer { GroupContainer(value: identifier) }
    }

    /// Accepted for source compatibility; Strata does not sync to CloudKit.
    public struct CloudKitDatabase: Hashable, Sendable {
        let value: String
        /// The default CloudKit database; Strata ignores it.
        public static let automatic = CloudKitDatabase(value: "automatic")
        /// No CloudKit database; Strata ignores it.
        public static let none = CloudKitDatabase(value: "none")
        /// The private database of the CloudKit container `identifier`; Strata
        /// ignores it.
        public static func `private`(_ identifier: String) -> CloudKitDatabase { CloudKitDatabase(value: identifier) }
    }

    /// The configuration's name (also the default file's name).
    public let name: String
    /// The schema this configuration stores, when it is given one.
    public let schema: Schema?
    /// The store file. In-memory configurations have a placeholder URL.
    public let url: URL
    /// True for a store kept in memory, never written to a file. Each container
    /// opened with such a configuration gets a store of its own, empty at
    /// first.
    public let isStoredInMemoryOnly: Bool
    /// False for a read-only store: fetches work, `save()` throws.
    public let allowsSave: Bool
    /// The app group the store would live in on Apple platforms; kept as
    /// given (Strata has no app groups: the store is at ``url``).
    public let groupContainer: GroupContainer
    /// The app group's identifier when ``groupContainer`` names one (kept as
    /// given; Strata has no app groups).
    public var groupAppContainerIdentifier: String? {
        groupContainer == .automatic || groupContainer == .none ? nil : groupContainer.value
    }
    /// The CloudKit database the store would sync with; kept as given
    /// (Strata syncs through PostgreSQL with `StrataSync`, not CloudKit).
    public let cloudKitDatabase: CloudKitDatabase
    /// Whether each save records a history transaction (a Strata
    /// addition; on by default). Switch it off for bulk loads that no
    /// history consumer needs to see.
    public var recordsHistory = true
    /// When a save's commit is durable (a Strata addition; see
    /// `Durability`). `.full`, the default, syncs the write-ahead log before
    /// `save()` returns, so a returned save survives a power loss; `.normal`
    /// and `.none` trade that for speed in bulk loads that can be redone.
    public var durability: Durability = .full
    /// How long a save waits for another process's save to the same store
    /// to finish before it throws `StorageError.busy` (a Strata addition;
    /// default 5 seconds). The context keeps its changes; save again.
    public var busyTimeout: Duration = .seconds(5)
    /// The file system the store is opened on, when not the real one (the
    /// crash tests' simulated file; set through ``init(url:fileSystem:)``).
    let fileSystem: (any StorageFileSystem)?
    /// Identifies the configuration by its name and its store's path.
    public var id: String { name + "|" + url.path }

    /// A configuration named `name` (default "default"), stored on disk at
    /// the default location, or in memory.
    ///
    /// The default location is `<application support>/<name>.store`: on
    /// Linux `$XDG_DATA_HOME` or `~/.local/share`, on Apple platforms the
    /// Application Support directory. The directory is created if needed.
    public init(
        _ name: String? = nil, schema: Schema? = nil, isStoredInMemoryOnly: Bool = false, allowsSave: Bool = true,
        groupContainer: GroupContainer = .automatic, cloudKitDatabase: CloudKitDatabase = .automatic
    ) {
        let name = name ?? "default"
        self.name = name
        self.schema = schema
        self.isStoredInMemoryOnly = isStoredInMemoryOnly
        self.allowsSave = allowsSave
        self.groupContainer = groupContainer
        self.cloudKitDatabase = cloudKitDatabase
        self.fileSystem = nil
        if isStoredInMemoryOnly {
            self.url = URL(fileURLWithPath: "/dev/null")
        } else {
            self.url = Self.defaultDirectory().appendingPathComponent(name + ".store")
        }
    }

    /// A configuration stored at `url`.
    public init(
        _ name: String? = nil, schema: Schema? = nil, url: URL, allowsSave: Bool = true,
        cloudKitDatabase: CloudKitDatabase = .automatic
    ) {
        self.name = name ?? url.deletingPathExtension().lastPathComponent
        self.schema = schema
        self.url = url
        self.isStoredInMemoryOnly = false
        self.allowsSave = allowsSave
        self.groupContainer = .automatic
        self.cloudKitDatabase = cloudKitDatabase
        self.fileSystem = nil
    }

    /// The default configuration ("default", at the default location), or
    /// one in memory.
    public init(isStoredInMemoryOnly: Bool = false) {
        self.init(nil, schema: nil, isStoredInMemoryOnly: isStoredInMemoryOnly)
    }

    /// A configuration holding `forTypes` (and the types their
    /// relationships reach), at the default location or in memory.
    public init(for forTypes: any PersistentModel.Type..., isStoredInMemoryOnly: Bool = false) {
        self.init(schema: Schema(forTypes), isStoredInMemoryOnly: isStoredInMemoryOnly)
    }

    /// A configuration stored at `url` whose models sync with the CloudKit
    /// container `cloudKitContainerIdentifier` (the form SwiftData's
    /// introduction uses; Strata does not sync through CloudKit, and
    /// accepts it for source compatibility).
    public init(
        _ name: String? = nil, schema: Schema? = nil, url: URL, allowsSave: Bool = true,
        cloudKitContainerIdentifier: String
    ) {
        self.init(name, schema: schema, url: url, allowsSave: allowsSave, cloudKitDatabase: .private(cloudKitContainerIdentifier))
    }

    /// A configuration whose store lives at `url` on `fileSystem` (tests
    /// open stores on a simulated file this way, and so does the object
    /// fuzz harness in `StrataObjectTesting`).
    package init(url: URL, fileSystem: any StorageFileSystem, schema: Schema? = nil) {
        self.name = url.deletingPathExtension().lastPathComponent
        self.schema = schema
        self.url = url
        self.isStoredInMemoryOnly = false
        self.allowsSave = true
        self.groupContainer = .automatic
        self.cloudKitDatabase = .automatic
        self.fileSystem = fileSystem
    }

    static func defaultDirectory() -> URL {
        let environment = ProcessInfo.processInfo.environment
        #if os(Linux)
            if let data = environment["XDG_DATA_HOME"], !data.isEmpty { return URL(fileURLWithPath: data) }
        #endif
        if let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first {
            return support
        }
        return URL(fileURLWithPath: environment["HOME"] ?? FileManager.default.currentDirectoryPath)
            .appendingPathComponent(".local/share")
    }

    /// Two configurations are equal when their names, URLs,
    /// `isStoredInMemoryOnly` and `allowsSave` are equal; the schema,
    /// `recordsHistory` and `durability` are not compared.
    public static func == (a: Self, b: Self) -> Bool {
        a.name == b.name && a.url == b.url && a.isStoredInMemoryOnly == b.isStoredInMemoryOnly && a.allowsSave == b.allowsSave
    }

    /// Hashes the name and the URL.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(url)
    }
}
