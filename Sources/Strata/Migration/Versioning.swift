/// A schema version: its identifier and its model types. A
/// `SchemaMigrationPlan` lists versions in order, with the stages that
/// migrate a store from one to the next.
public protocol VersionedSchema: SendableMetatype {
    /// The version's identifier (for example 1.0.0).
    static var versionIdentifier: Schema.Version { get }
    /// The model types of this version.
    static var models: [any PersistentModel.Type] { get }
}

/// The versions of a schema and the stages that migrate between them.
public protocol SchemaMigrationPlan: SendableMetatype {
    /// The versions, oldest first.
    static var schemas: [any VersionedSchema.Type] { get }
    /// The stages between versions. From the store's version, each stage whose
    /// `fromVersion` is the current version runs in turn.
    static var stages: [MigrationStage] { get }
}

/// One step of a migration plan.
public enum MigrationStage: @unchecked Sendable {
    /// Migrates from `fromVersion` to `toVersion` automatically; every change
    /// between them must be lightweight.
    case lightweight(fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type)
    /// Migrates from `fromVersion` to `toVersion` with code: `willMigrate` gets
    /// a context on the old schema, then the store is migrated as in a
    /// lightweight stage, then `didMigrate` gets a context on the new schema
    /// (attributes the new schema adds without a default must be set there).
    /// Changes either closure leaves unsaved are saved as part of the
    /// migration.
    case custom(
        fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type,
        willMigrate: ((ModelContext) throws -> Void)?, didMigrate: ((ModelContext) throws -> Void)?)
}
