import Synchronization

/// Manages a schema and the store that holds its models; contexts are made
/// on it. Safe to share between threads and actors.
///
/// Opening compares the stored schema's version hash with the
/// container's; when they differ the store is migrated:
/// through the stages of `migrationPlan` from the stored version, then
/// automatically when what remains is lightweight. A change no stage
/// covers and no lightweight migration can make throws
/// ``SwiftDataError/schemaMismatch`` naming each one, and leaves the store
/// as it was. A migration is one write transaction: it happens entirely or
/// not at all.
public final class ModelContainer: @unchecked Sendable {
    /// The entities the container stores (the given types and every type
    /// their relationships reach).
    public let schema: Schema
    /// The store's configuration (Strata uses one per container).
    public let configurations: [ModelConfiguration]
    let store: Store
    /// Carries each context's saves to the container's other contexts.
    let mergeHub = MergeHub()
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

    /// A container for `givenSchema` with the first of `configurations`
    /// (a default on-disk configuration when none is given).
    ///
    /// `migrationProgress`, a Strata addition, is called as a migration
    /// works through the rows of each entity it rewrites or reindexes.
    public init(
        for givenSchema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)? = nil, configurations: [ModelConfiguration],
        migrationProgress: (@Sendable (MigrationProgress) -> Void)? = nil
    ) throws {
        let configurations = configurations.isEmpty ? [ModelConfiguration()] : configurations
        var schema = givenSchema
        if let configured = configurations[0].schema, givenSchema.entities.isEmpty { schema = configured }
        for entity in schema.entities {
            for relationship in entity.relationships
            where relationship.isToOneRelationship && !relationship.isOptional {
                throw SwiftDataError(
                    .unknownSchema,
                    "\(entity.name).\(relationship.name): a to-one relationship must be optional "
                        + "(\(relationship.destination)?), so that it can load lazily")
            }
        }
        let problems = schema.entities.flatMap(\.problems)
        if !problems.isEmpty {
            throw SwiftDataError(.unknownSchema, "the schema's constraints are invalid: " + problems.joined(separator: "; "))
        }
        if configurations.count > 1 {
            // Several stores per container would split one save across
            // files without a shared transaction; refuse instead.
            throw SwiftDataError(.loadIssueModelContainer, "Strata supports one configuration per container")
        }
        self.schema = schema
        self.configurations = configurations
        do {
            self.store = try Store(
                configuration: configurations[0], schema: schema, migrationPlan: migrationPlan, progress: migrationProgress)
        } catch let error as StorageError {
            throw SwiftDataError(.loadIssueModelContainer, "cannot open \(configurations[0].url.path): \(error)")
        }
    }

    /// A migration stage's container: `store` is pinned to the
    /// migration's transaction.
    init(migrating store: Store) {
        self.schema = store.schema
        self.configurations = [ModelConfiguration(isStoredInMemoryOnly: true)]
        self.store = store
    }

    deinit { store.close() }

    /// The main actor's context. It saves automatically after changes.
    @MainActor public var mainContext: ModelContext {
        mainContextLock.lock()
        defer { mainContextLock.unlock() }
        if let context = _mainContext { return context }
        let context = ModelContext(self)
        context.autosaveEnabled = true
        context.isMainContext = true
        context.inbox.mergesOnMainQueue.store(true, ordering: .relaxed)
        _mainContext = context
        return context
    }

}
