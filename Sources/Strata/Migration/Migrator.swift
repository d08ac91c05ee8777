import Foundation
import StrataEngine

/// How far a migration is, reported to the `migrationProgress` callback of
/// ``ModelContainer/init(for:migrationPlan:configurations:migrationProgress:)``.
public struct MigrationProgress: Sendable, CustomStringConvertible {
    /// The entity being worked on.
    public let entityName: String
    /// What is being done: rewriting records, or building the trees
    /// derived from them (indexes, unique constraints, reverse indexes).
    public let step: String
    /// Rows done in this step.
    public let completedRows: Int
    /// Rows this step works through.
    public let totalRows: Int

    /// The entity, the step, and the rows done of the total, on one line.
    public var description: String { "\(entityName): \(step) \(completedRows)/\(totalRows)" }
}

/// Brings a store's stored schema to the container's at open.
///
/// 1. The stored version hash equals the container schema's: nothing to
///    do (one catalog read).
/// 2. Otherwise, in one write transaction:
///    - with a migration plan whose versions include the stored one, each
///      stage from there runs in order: a custom stage's `willMigrate`
///      gets a context on the stage's old schema, then the lightweight
///      transformation makes the store the new schema's, then `didMigrate`
///      gets a context on the new schema. Their saves go into the
///      migration's transaction;
///    - whatever difference remains is migrated automatically when every
///      change is lightweight (``LightweightMigration``); otherwise
///      ``SwiftDataError/loadIssueModelContainer`` names each incompatible change.
///
/// The transaction commits only when everything succeeded, so an error —
/// or a crash at any point — leaves the store at its old version, readable
/// with the old schema. A store whose stored version is a later version of
/// the plan than the container's gets ``SwiftDataError/backwardMigration``.
struct Migrator {
    let database: Database
    let schema: Schema
    let plan: (any SchemaMigrationPlan.Type)?
    let writable: Bool
    let progress: (@Sendable (MigrationProgress) -> Void)?

    func prepare() throws {
        let target = StoredSchema.describe(schema)
        let targetHash = StoredSchema.hash(of: target)
        let (storedHash, fillsHold, keysHold) = try database.read {
            (try StoredSchema.storedHash($0), try StoredSchema.fillsHold($0, schema: schema), try KeyFormat.isCurrent($0))
        }
        if storedHash == targetHash && fillsHold && keysHold { return }
        let stored = try database.read { try StoredSchema($0) }
        guard writable else {
            if !keysHold {
                throw SwiftDataError(
                    .loadIssueModelContainer,
                    "the read-only store's indexes were written by an earlier Strata in another key format; "
                        + "open it writable once to rewrite them")
            }
            if storedHash == targetHash {
                throw SwiftDataError(
                    .loadIssueModelContainer,
                    "the read-only store was migrated with default values that its model now declares differently; "
                        + "open it writable once to write the stored defaults into its records")
            }
            // A store written before details were recorded (format 1) has
            // nothing to migrate when all else matches; read it as it is.
            if Self.withoutDetails(stored.entities) == Self.withoutDetails(target) { return }
            let problems = LightweightMigration(stored: stored, schema: schema).changes
            throw SwiftDataError(
                .loadIssueModelContainer,
                "the read-only store was written with a different schema and cannot be migrated: "
                    + problems.joined(separator: "; "))
        }
        try database.write { tx in
            // Key trees first: a migration stage's fetches read them.
            if try !KeyFormat.isCurrent(tx) { try KeyFormat.upgrade(tx) }
            var current = stored
            if let plan, !stored.entities.isEmpty { try runPlan(plan, current: &current, targetHash: targetHash, tx: tx) }
            if try StoredSchema.hash(of: current.entities) != targetHash || !StoredSchema.fillsHold(tx, schema: schema) {
                var migration = LightweightMigration(stored: current, schema: schema)
                try migration.apply(tx, removingEntities: false, progress: progress)
            }
        }
    }

    private static func withoutDetails(_ entities: [String: StoredEntity]) -> [String: StoredEntity] {
        entities.mapValues { entity in
            var plain = entity
            for index in plain.properties.indices {
                plain.properties[index].detail = ""
                plain.properties[index].id = 0
            }
            return plain
        }
    }

    private func runPlan(
        _ plan: any SchemaMigrationPlan.Type, current: inout StoredSchema, targetHash: String, tx: WriteTransaction
    ) throws {
        let versions = plan.schemas
        let hashes = versions.map { StoredSchema.hash(of: StoredSchema.describe(Self.schema(of: $0))) }
        let storedHash = StoredSchema.hash(of: current.entities)
        guard let start = hashes.firstIndex(of: storedHash) else { return }
        if let end = hashes.firstIndex(of: targetHash), end < start {
            throw SwiftDataError(
                .backwardMigration,
                "the store is at version \(versions[start].versionIdentifier) of \(plan), "
                    + "newer than the container's \(versions[end].versionIdentifier)")
        }
        var version = versions[start]
        var applied = 0
        while applied < plan.stages.count,
            let stage = plan.stages.first(where: { ObjectIdentifier($0.fromVersion) == ObjectIdentifier(version) })
        {
            try run(stage, current: &current, tx: tx)
            version = stage.toVersion
            applied += 1
        }
    }

    static func schema(of version: any VersionedSchema.Type) -> Schema {
        Schema(types: version.models, version: version.versionIdentifier)
    }

    /// One stage: `willMigrate` on the old schema, the lightweight
    /// transformation, `didMigrate` on the new schema.
    private func run(_ stage: MigrationStage, current: inout StoredSchema, tx: WriteTransaction) throws {
        let from = Self.schema(of: stage.fromVersion)
        let to = Self.schema(of: stage.toVersion)
        if case .custom(_, _, let willMigrate?, _) = stage { try withContext(from, tx, willMigrate) }
        guard case .custom(_, _, _, let didMigrate?) = stage else {
            var migration = LightweightMigration(stored: current, schema: to)
            try migration.apply(tx, removingEntities: true, progress: progress)
            current = try StoredSchema(tx)
            return
        }
        // didMigrate may fill attributes the new schema adds without a
        // default: they start as placeholders, and every row must have a
        // value once it returns.
        var migration = LightweightMigration(stored: current, schema: to, allowsPlaceholders: true)
        try migration.apply(tx, removingEntities: true, progress: progress)
        current = try StoredSchema(tx)
        for (name, fields) in migration.placeholders { to.entity(named: name)?.placeholderFields = Set(fields) }
        try withContext(to, tx, didMigrate)
        try Self.checkFilled(migration.placeholders, schema: to, stage: stage, tx: tx)
    }

    /// Throws when a row still lacks a value for an attribute its stage's
    /// `didMigrate` had to fill.
    private static func checkFilled(
        _ placeholders: [String: [Int]], schema: Schema, stage: MigrationStage, tx: WriteTransaction
    ) throws {
        for (name, fields) in placeholders.sorted(by: { $0.key < $1.key }) {
            guard let entity = schema.entity(named: name), let tree = try tx.treeIfPresent(entity.recordTree) else {
                continue
            }
            var unset: [Int: [Int64]] = [:]
            try tx.forEach(tree) { key, value in
                let row = try RowKey.decode(key)
                try _RecordReader.withReader(value, entity: entity, row: row) { reader in
                    for field in fields where try reader.find(field)?.wire ?? RecordFormat.null == RecordFormat.null {
                        unset[field, default: []].append(row)
                    }
                }
                return true
            }
            if let (field, rows) = unset.sorted(by: { $0.key < $1.key }).first {
                let listed = rows.prefix(5).map { "row \($0)" }.joined(separator: ", ")
                throw SwiftDataError(
                    .modelValidationFailure,
                    "migration to \(stage.toVersion.versionIdentifier): didMigrate left \(name).\(entity.properties[field].name) "
                        + "without a value in \(rows.count) row(s) (\(listed)); set it on every model, as the schema "
                        + "declares it non-optional without a default")
            }
        }
    }

    /// Runs a stage's closure with a context on `schema` over the migration
    /// transaction, then saves what it left unsaved.
    private func withContext(_ schema: Schema, _ tx: WriteTransaction, _ body: (ModelContext) throws -> Void) throws {
        let store = try Store(migrating: database, in: tx, schema: schema, identifier: "migration")
        let container = ModelContainer(migrating: store)
        let context = ModelContext(container)
        try body(context)
        if context.hasChanges { try context.save() }
        if let failure = store.migrationFailure { throw failure }
    }
}

extension MigrationStage {
    var fromVersion: any VersionedSchema.Type {
        switch self {
        case .lightweight(let from, _), .custom(let from, _, _, _): return from
        }
    }

    var toVersion: any VersionedSchema.Type {
        switch self {
        case .lightweight(_, let to), .custom(_, let to, _, _): return to
        }
    }
}
