import Foundation
import StrataEngine

// Several configurations in one container: one store per configuration.
//
// A container made with several configurations opens one part per
// configuration: an ordinary single-store container whose schema is the
// model types that configuration holds (those its schema names; a
// configuration without a schema holds the types no other one names).
// Relationships never cross parts (refused here), so every graph of models
// lives in one store and each part's contexts work as they do alone.
//
// A context on the container holds one context per part and routes each
// call by model type or identifier. A save over several parts is
// Save/ModelContext+SeveralStores.swift's.

extension ModelContainer {
    /// The parts of a container with several configurations, and the part
    /// of each entity by ordinal.
    static func openParts(
        _ configurations: [ModelConfiguration], schema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)?,
        progress: (@Sendable (MigrationProgress) -> Void)?
    ) throws -> ([ModelContainer], [Int]) {
        if let migrationPlan {
            throw SwiftDataError(
                .loadIssueModelContainer,
                "a migration plan (\(migrationPlan)) with several configurations is not supported yet: "
                    + "open each store with its own container to migrate it, or let lightweight migration run")
        }
        let names = configurations.map(\.name)
        let unnamed = configurations.indices.filter { configurations[$0].schema == nil }
        if unnamed.count > 1 {
            throw SwiftDataError(
                .configurationSchemaNotFoundInContainerSchema,
                "configurations \(unnamed.map { names[$0] }.joined(separator: " and ")) have no schema: with several "
                    + "configurations, at most one leaves its schema out (it holds the model types no other names)")
        }
        var owner = [Int](repeating: -1, count: schema.entities.count)
        for (index, configuration) in configurations.enumerated() {
            for entity in configuration.schema?.entities ?? [] {
                if let own = schema.entity(named: entity.name) { owner[own.ordinal] = index }
            }
        }
        for entity in schema.entities where owner[entity.ordinal] < 0 {
            guard let rest = unnamed.first else {
                throw SwiftDataError(
                    .configurationSchemaNotFoundInContainerSchema,
                    "\(entity.name) is in no configuration's schema (\(names.joined(separator: ", "))): name it in "
                        + "one, or add a configuration without a schema to hold it")
            }
            owner[entity.ordinal] = rest
        }
        for index in configurations.indices where !owner.contains(index) {
            throw SwiftDataError(
                .configurationSchemaNotFoundInContainerSchema,
                "configuration \(names[index]) holds no model type: every other configuration names them all")
        }
        for source in schema.entities {
            for relationship in source.relationships {
                guard let type = relationship.destinationType, let target = schema.entity(forType: type),
                    owner[target.ordinal] != owner[source.ordinal]
                else { continue }
                throw SwiftDataError(
                    .loadIssueModelContainer,
                    "relationship \(source.name).\(relationship.name) points at \(target.name), which lives in "
                        + "another store (configuration \(names[owner[target.ordinal]]), not "
                        + "\(names[owner[source.ordinal]])): relationships across stores are not supported; "
                        + "put both model types in one configuration")
            }
        }
        var files: [String: String] = [:]
        for configuration in configurations where !configuration.isStoredInMemoryOnly {
            let file = SharedStores.key(for: configuration) ?? configuration.url.path
            if let other = files.updateValue(configuration.name, forKey: file) {
                throw SwiftDataError(
                    .loadIssueModelContainer,
                    "configurations \(other) and \(configuration.name) both store at \(file): give each its own "
                        + "name or url")
            }
        }
        var parts: [ModelContainer] = []
        for (index, configuration) in configurations.enumerated() {
            let types = schema.entities.filter { owner[$0.ordinal] == index }.map(\.type)
            parts.append(
                try ModelContainer(
                    for: Schema(types: types, version: schema.version), migrationPlan: nil, configurations: [configuration],
                    migrationProgress: progress))
        }
        return (parts, owner)
    }

    /// The part holding `entityName`, for a container with parts.
    func part(ofEntityNamed entityName: String) -> Int? {
        schema.entity(named: entityName).map { partOfEntity[$0.ordinal] }
    }
}

extension ModelContext {
    /// The part context of `type`; nil when no part holds it.
    func part<T: PersistentModel>(for type: T.Type) -> ModelContext? {
        guard let entity = container.schema.entity(forType: type) else { return nil }
        return parts[container.partOfEntity[entity.ordinal]]
    }

    /// The part context of `type`, or ``SwiftDataError/unknownModelType``.
    func partOrThrow<T: PersistentModel>(for type: T.Type) throws -> ModelContext {
        guard let part = part(for: type) else {
            throw SwiftDataError(.unknownModelType, "\(T.self) is not in the container's schema (\(schemaNames))")
        }
        return part
    }

    /// The part context of the model `id` names, if a part holds its
    /// entity and the identifier is of that part's store (or of none).
    func part(for id: PersistentIdentifier) -> ModelContext? {
        guard let index = container.part(ofEntityNamed: id.entityName) else { return nil }
        let part = parts[index]
        return id.belongs(to: part.store.identifier) ? part : nil
    }
}
