import Synchronization

/// Manages a schema and the stores that hold its models (one per
/// configuration); contexts are made on it. Safe to share between threads
/// and actors.
///
/// Opening compares the stored schema's version hash with the
/// container's; when they differ the store is migrated:
/// through the stages of `migrationPlan` from the stored version, then
/// automatically when what remains is lightweight. A change no stage
/// covers and no lightweight migration can make throws
/// ``SwiftDataError/loadIssueModelContainer`` naming each one, and leaves the store
/// as it was. A migration is one write transaction: it happens entirely or
/// not at all.
public final class ModelContainer: @unchecked Sendable {
    /// The entities the container stores (the given types and every type
    /// their relationships reach).
    public let schema: Schema
    /// The configurations: one per store, each holding the model types its
    /// schema names (a set, as in SwiftData; ``orderedConfigurations`` keeps
    /// the order they were given in).
    public var configurations: Set<ModelConfiguration> { Set(orderedConfigurations) }
    /// The configurations in the order the container was given them (a
    /// Strata addition).
    public let orderedConfigurations: [ModelConfiguration]
    /// The migration plan the container was opened with, if any.
    public let migrationPlan: (any SchemaMigrationPlan.Type)?
    package let store: Store
    /// Carries each context's saves to the other contexts of every
    /// container on the store.
    var mergeHub: MergeHub { store.mergeHub }
    /// Whether this container's contexts may save (a read-only container
    /// may share a store another container writes).
    package let allowsSave: Bool
    /// The key of the process-wide open store this container shares, or
    /// nil when it owns its store alone.
    private let sharedKey: String?
    /// With several configurations, one container per configuration, each
    /// with its own store and the part of the schema that configuration
    /// holds (see ModelContainer+Stores.swift); empty otherwise. ``store``
    /// is then the first part's, and this container's own contexts route
    /// each call to a part's context.
    package let parts: [ModelContainer]
    /// The index in ``parts`` of each entity, by its ordinal in ``schema``.
    let partOfEntity: [Int]
    private let mainContextLock = NSLock()
    nonisolated(unsafe) private var _mainContext: ModelContext?

    /// A container for `forTypes` (and the types reachable from them).
    public convenience init(
        for forTypes: any PersistentModel.Type..., migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
        configurations: ModelConfiguration...
    ) throws {
        try self.init(
            for: Schema(types: forTypes, version: Schema.Version(1, 0, 0)), migrationPlan: migrationPlan,
            configurations: configurations)
    }

    /// A container for `givenSchema`.
    public convenience init(
        for givenSchema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)? = nil, configurations: ModelConfiguration...
    ) throws {
        try self.init(for: givenSchema, migrationPlan: migrationPlan, configurations: configurations)
    }

    /// A container for `givenSchema` with `configuration` and `more`, as
    /// SwiftData's introduction writes it:
    /// `ModelContainer(for: fullSchema, trips, people)`.
    public convenience init(
        for givenSchema: Schema, _ configuration: ModelConfiguration, _ more: ModelConfiguration...
    ) throws {
        try self.init(for: givenSchema, configurations: [configuration] + more)
    }

    /// A container for `givenSchema` with `configurations` (a default
    /// on-disk configuration when none is given). With several, each
    /// model type lives in the store of the configuration whose schema
    /// names it (see ModelContainer+Stores.swift and "Several stores" in
    /// "Differences from SwiftData").
    public convenience init(
        for givenSchema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)? = nil, configurations: [ModelConfiguration]
    ) throws {
        try self.init(for: givenSchema, migrationPlan: migrationPlan, configurations: configurations, migrationProgress: nil)
    }

    /// A container for `givenSchema` with `configurations`, and
    /// `migrationProgress`, a closure a migration calls as it works through
    /// the rows of each entity it rewrites or reindexes (a Strata addition).
    public init(
        for givenSchema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)?, configurations: [ModelConfiguration],
        migrationProgress: (@Sendable (MigrationProgress) -> Void)?
    ) throws {
        let configurations = configurations.isEmpty ? [ModelConfiguration()] : configurations
        var schema = givenSchema
        if let configured = configurations[0].schema, givenSchema.entities.isEmpty { schema = configured }
        let problems = schema.entities.flatMap(\.problems)
        if !problems.isEmpty {
            throw SwiftDataError(.unknownSchema, "the schema's constraints are invalid: " + problems.joined(separator: "; "))
        }
        try Self.validate(configurations, schema: schema)
        self.schema = schema
        self.orderedConfigurations = configurations
        self.migrationPlan = migrationPlan
        if configurations.count > 1 {
            let (parts, partOfEntity) = try Self.openParts(
                configurations, schema: schema, migrationPlan: migrationPlan, progress: migrationProgress)
            self.parts = parts
            self.partOfEntity = partOfEntity
            self.store = parts[0].store
            self.allowsSave = parts.contains(where: \.allowsSave)
            self.sharedKey = nil
            return
        }
        self.parts = []
        self.partOfEntity = []
        let configuration = configurations[0]
        self.allowsSave = configuration.allowsSave
        do {
            if let key = SharedStores.key(for: configuration) {
                self.store = try SharedStores.acquire(key: key, configuration: configuration, schema: schema) {
                    try Store(
                        configuration: configuration, schema: schema, migrationPlan: migrationPlan, progress: migrationProgress)
                }
                self.sharedKey = key
            } else {
                self.store = try Store(
                    configuration: configuration, schema: schema, migrationPlan: migrationPlan, progress: migrationProgress)
                self.sharedKey = nil
            }
        } catch let error as StorageError {
            throw SwiftDataError(.loadIssueModelContainer, "cannot open \(configuration.url.path): \(error)")
        }
    }

    /// Refuses configurations whose schema names no entity, an entity the
    /// container's schema lacks, or an entity another configuration names.
    private static func validate(_ configurations: [ModelConfiguration], schema: Schema) throws {
        var names: Set<String> = []
        for configuration in configurations {
            let name = configuration.name
            if !names.insert(name).inserted {
                throw SwiftDataError(.duplicateConfiguration, "two configurations are named \(name)")
            }
            if name.contains("/") || name.contains("\0") || name.isEmpty {
                throw SwiftDataError(
                    .configurationFileNameContainsInvalidCharacters,
                    "configuration name \(name.debugDescription) cannot name a store file (empty, or with / or NUL)")
            }
            if name.utf8.count + ".store".utf8.count > 255 {
                throw SwiftDataError(
                    .configurationFileNameTooLong,
                    "configuration name of \(name.utf8.count) bytes: a store file's name has at most 255 bytes")
            }
        }
        var claimed: [String: String] = [:]
        for configuration in configurations {
            guard let own = configuration.schema else { continue }
            if own.entities.isEmpty {
                throw SwiftDataError(
                    .configurationSchemaNotFoundInContainerSchema,
                    "configuration \(configuration.name): its schema names no model type")
            }
            for entity in own.entities {
                guard schema.entity(named: entity.name) != nil else {
                    throw SwiftDataError(
                        .configurationSchemaNotFoundInContainerSchema,
                        "configuration \(configuration.name) names \(entity.name), which the container's schema "
                            + "(\(schema.entities.map(\.name).joined(separator: ", "))) does not have")
                }
                if let other = claimed.updateValue(configuration.name, forKey: entity.name) {
                    throw SwiftDataError(
                        .configurationSchemaNotFoundInContainerSchema,
                        "\(entity.name) is named by two configurations (\(other) and \(configuration.name)); "
                            + "each model type lives in one store (a configuration's schema also holds the types "
                            + "its models' relationships reach: relationships across stores are not supported)")
                }
            }
        }
    }

    /// A migration stage's container: `store` is pinned to the
    /// migration's transaction.
    init(migrating store: Store) {
        self.schema = store.schema
        self.orderedConfigurations = [ModelConfiguration(isStoredInMemoryOnly: true)]
        self.migrationPlan = nil
        self.store = store
        self.allowsSave = true
        self.sharedKey = nil
        self.parts = []
        self.partOfEntity = []
    }

    deinit {
        // Parts close their own stores.
        guard parts.isEmpty, !closed.load(ordering: .acquiring) else { return }
        if let sharedKey { SharedStores.release(key: sharedKey, store: store) } else { store.close() }
    }

    /// Set by ``invalidate()``.
    private let closed = Atomic<Bool>(false)

    /// True once ``invalidate()`` ran.
    var isClosed: Bool { closed.load(ordering: .acquiring) }

    /// Closes the container now rather than when it is released
    /// (SwiftData declares `invalidate()` without documenting it).
    ///
    /// Live sequences of its contexts (``LiveResults``) end, ``LiveQuery``
    /// results stop refreshing, and its contexts' fetches and saves throw
    /// ``SwiftDataError/loadIssueModelContainer`` from now on. The store's
    /// file closes unless another container of this process has it open.
    /// Invalidating twice does nothing.
    public func invalidate() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for part in parts {
            part.invalidate()
            part.store.mergeHub.endObservers(of: ObjectIdentifier(self))
        }
        store.mergeHub.endObservers(of: ObjectIdentifier(self))
        guard parts.isEmpty else { return }
        if let sharedKey { SharedStores.release(key: sharedKey, store: store) } else { store.close() }
    }

    /// Throws when the container was closed.
    func checkOpen() throws {
        guard !isClosed else {
            throw SwiftDataError(.loadIssueModelContainer, "the container was invalidated (ModelContainer.invalidate())")
        }
    }

    /// The name of the configuration whose store has identifier
    /// `identifier` (a ``PersistentIdentifier/storeIdentifier``), or nil
    /// when no store of the container has it.
    public func configurationName(forStoreIdentifier identifier: String) -> String? {
        if parts.isEmpty { return store.identifier == identifier ? orderedConfigurations[0].name : nil }
        return parts.first { $0.store.identifier == identifier }?.orderedConfigurations[0].name
    }

    /// The identifier of the store of the configuration named `name`, or
    /// nil when the container has no such configuration.
    public func storeIdentifier(forConfigurationNamed name: String) -> String? {
        if parts.isEmpty { return orderedConfigurations[0].name == name ? store.identifier : nil }
        return parts.first { $0.orderedConfigurations[0].name == name }?.store.identifier
    }

    /// The main actor's context. It saves automatically after changes.
    @MainActor public var mainContext: ModelContext {
        mainContextLock.lock()
        defer { mainContextLock.unlock() }
        if let context = _mainContext { return context }
        let context = ModelContext(self)
        context.autosaveEnabled = true
        context.isMainContext = true
        context.autosaveQueue = .main
        context.inbox.mergesOnMainQueue.store(true, ordering: .relaxed)
        for part in context.parts { part.inbox.mergesOnMainQueue.store(true, ordering: .relaxed) }
        _mainContext = context
        return context
    }

}

/// The stores open in this process, by file: two containers on one file
/// share one open store (a second open of the file would find it locked),
/// so a save through either is seen by the other's next fetch, and their
/// contexts merge each other's saves. The store closes with the last
/// container on it.
enum SharedStores {
    /// One file's entry: its store once open, and how many containers use
    /// it. Its own lock is held while the store opens (a migration may
    /// run, with the app's code in its stages), so that other files open
    /// meanwhile and a second opener of this file waits for the first.
    private final class Entry: @unchecked Sendable {
        let opening = NSLock()
        /// Guarded by ``SharedStores/open``'s mutex.
        var store: Store?
        var containers = 0
    }

    private static let open = Locked<[String: Entry]>([:])

    /// The key of a file store (its path with symbolic links resolved);
    /// nil for in-memory stores and stores on a custom file system, which
    /// are never shared.
    static func key(for configuration: ModelConfiguration) -> String? {
        guard !configuration.isStoredInMemoryOnly, configuration.fileSystem == nil else { return nil }
        // The directory's links are resolved (it usually exists, the file
        // may not yet), so one file has one key before and after it is made.
        let url = configuration.url.standardizedFileURL
        return url.deletingLastPathComponent().resolvingSymlinksInPath()
            .appendingPathComponent(url.lastPathComponent).path
    }

    /// The open store of `key`, or a new one from `make`.
    static func acquire(
        key: String, configuration: ModelConfiguration, schema: Schema, make: () throws -> Store
    ) throws -> Store {
        let entry = open.withLock { open in
            if let entry = open[key] { return entry }
            let made = Entry()
            open[key] = made
            return made
        }
        entry.opening.lock()
        defer { entry.opening.unlock() }
        let existing: Store? = open.withLock { open in
            guard open[key] === entry else { return nil }
            return entry.store
        }
        if let existing {
            guard existing.schema.describesSameModels(as: schema) else {
                throw SwiftDataError(
                    .loadIssueModelContainer,
                    "\(key) is already open in this process with another schema "
                        + "(\(existing.schema.entities.map(\.name).joined(separator: ", "))); "
                        + "containers on one file must use one schema")
            }
            if configuration.allowsSave && !existing.allowsSave {
                throw SwiftDataError(
                    .loadIssueModelContainer,
                    "\(key) is already open read-only in this process (allowsSave: false); "
                        + "open the writable container first, or close the read-only one")
            }
            open.withLock { _ in entry.containers += 1 }
            return existing
        }
        let store: Store
        do {
            store = try make()
        } catch {
            open.withLock { open in
                if open[key] === entry, entry.store == nil, entry.containers == 0 { open[key] = nil }
            }
            throw error
        }
        open.withLock { open in
            entry.store = store
            entry.containers = 1
            open[key] = entry
        }
        return store
    }

    /// A container on `key` is gone; the last one closes the store.
    static func release(key: String, store: Store) {
        let closing: Entry? = open.withLock { open in
            guard let entry = open[key], entry.store === store else { return nil }
            entry.containers -= 1
            guard entry.containers <= 0 else { return nil }
            entry.store = nil
            return entry
        }
        guard let closing else { return }
        // Closed under the entry's lock: an opener of the file meanwhile
        // waits, then opens it again.
        closing.opening.lock()
        store.closeDatabase()
        closing.opening.unlock()
        open.withLock { open in
            if open[key] === closing, closing.store == nil, closing.containers == 0 { open[key] = nil }
        }
    }

    /// `store` is closed: containers opened later open the file again.
    static func forget(_ store: Store) {
        open.withLock { open in
            if let key = open.first(where: { $0.value.store === store })?.key { open[key] = nil }
        }
    }
}
