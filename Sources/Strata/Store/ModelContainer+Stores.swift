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
// call by model type or identifier. A save that changes models of several
// parts runs every part's checks and delete rules, posts `willSave` once,
// begins the parts' write transactions in store-identifier order (so two
// containers sharing the stores take the write locks in one order), writes
// them, and commits them one after the other. A failure before the first
// commit leaves every store unchanged. Each such save writes a mark to
// tree `strata.saves` of every store it writes: a number above the marks
// of every store (read inside the participants' transactions), and the
// stores it writes. A crash between two commits leaves a store whose mark
// names a store with an older mark; `checkIntegrity()` reports it, best
// effort (see "Several stores" in "Differences from SwiftData").

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

/// The mark a save over several stores leaves in each (see the top of
/// this file).
enum SaveMark {
    static let tree = TreeName.saveMarks
    private static let key = Array("last".utf8)

    /// The last mark of the store `tx` reads: its number and the stores
    /// that save wrote. Nil when no such save wrote it.
    static func read(_ tx: ReadTransaction) throws -> (number: Int64, stores: [String])? {
        guard let tree = try tx.treeIfPresent(tree), let bytes = try tx.get(key, in: tree), bytes.count >= 8 else {
            return nil
        }
        let number = try RowKey.decode(Array(bytes[0..<8]))
        let stores = String(decoding: bytes[8...], as: UTF8.self).split(separator: "\n").map(String.init)
        return (number, stores)
    }

    /// The mark the saves in `prepared` write (one mark for all of them).
    static func owed(by prepared: [ModelContext.PreparedSave]) -> (number: Int64, stores: [String])? {
        prepared.lazy.compactMap(\.mark).first
    }

    static func write(_ number: Int64, stores: [String], in tx: WriteTransaction) throws {
        let tree = try tx.treeIfPresent(tree) ?? tx.createTree(tree)
        try tx.put(key, RowKey.encode(number) + Array(stores.joined(separator: "\n").utf8), in: tree)
    }

    /// The stores of `parts` whose mark names a store that did not get
    /// that save (its mark is older): what a crash between the commits of
    /// one save leaves.
    static func problems(_ parts: [ModelContainer]) throws -> [IntegrityProblem] {
        var marks: [String: (number: Int64, stores: [String])] = [:]
        for part in parts {
            marks[part.store.identifier] = try part.store.read { try read($0) } ?? (0, [])
        }
        var problems: [IntegrityProblem] = []
        for part in parts {
            guard let mark = marks[part.store.identifier] else { continue }
            for other in mark.stores where other != part.store.identifier {
                guard let theirs = marks[other], theirs.number < mark.number else { continue }
                problems.append(
                    IntegrityProblem(
                        entity: part.schema.entities.map(\.name).joined(separator: ", "), row: nil, tree: tree,
                        reason: "save \(mark.number) committed to store \(part.store.identifier) (configuration "
                            + "\(part.orderedConfigurations[0].name)) but not to store \(other), whose last such save is "
                            + "\(theirs.number): the process stopped between the two commits, and that save's "
                            + "changes to the other store are lost"))
            }
        }
        return problems
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

    /// Saves every part with changes, as one `save()`: `willSave` is posted
    /// once; the write transactions of the parts with changes begin in
    /// store-identifier order; each part's checks and delete rules then run
    /// (inside its transaction, so no other process's save can change what
    /// they read before the commit); the parts are written and commit in
    /// that order; `didSave` is posted once.
    ///
    /// A failure before the first commit leaves every store unchanged and
    /// every part its changes. A failure after one (an I/O error on a later
    /// store's commit) leaves the committed parts saved and the others
    /// with their changes, and throws; their next save carries the mark of
    /// the save they missed, so the stores agree again.
    func saveParts() throws {
        for part in parts {
            if let pendingError = part.pendingError { throw pendingError }
            try part.mergeSavedChangesOrThrow()
        }
        guard parts.contains(where: { $0.hasChanges || $0.owedMark != nil }) else { return }
        for part in parts where part.hasChanges { try part.refuseIfReadOnly() }
        NotificationCenter.default.post(name: ModelContext.willSave, object: self)
        // The observers may have changed other parts.
        let saving = parts.filter { $0.hasChanges || $0.owedMark != nil }.sorted { $0.store.identifier < $1.store.identifier }
        for part in saving where part.hasChanges { try part.refuseIfReadOnly() }

        var checked: [(part: ModelContext, deletedRows: [[DoomedRow]])] = []
        var begun: [WriteTransaction] = []
        var moves: [[(model: any PersistentModel, row: Int64)]] = []
        var prepared: [(part: ModelContext, save: PreparedSave)] = []
        do {
            for part in saving {
                let tx = try part.store.beginSave()
                begun.append(tx)
                moves.append(try part.moveCollidingInserts(in: tx))
                checked.append((part, try part.checkSave(merging: false) ?? []))
                // Models the relationships reached were inserted by the checks.
                moves[moves.count - 1] += try part.moveCollidingInserts(in: tx)
            }
            let marks = try zip(checked, begun).map { try SaveMark.read($0.1) }
            var mark: (number: Int64, stores: [String])?
            if checked.count > 1 {
                var last = marks.map { $0?.number ?? 0 }.max() ?? 0
                for part in parts where !checked.contains(where: { $0.part === part }) {
                    last = max(last, try part.store.read { try SaveMark.read($0) }?.number ?? 0)
                }
                mark = (last == .max ? last : last + 1, checked.map(\.part.store.identifier))
            }
            for (index, (part, deletedRows)) in checked.enumerated() {
                var written = mark
                // A mark owed from a save that failed here part way, unless
                // a later save over this store has written a newer one.
                if written == nil, let owed = part.owedMark, owed.number > marks[index]?.number ?? 0 { written = owed }
                prepared.append(
                    (part, try part.writeSave(deletedRows: deletedRows, in: begun[index], mark: written, moved: moves[index])))
            }
        } catch {
            // writeSave rolled back its own transaction; the rest here.
            for (part, save) in prepared.reversed() { part.abandon(save, after: error) }
            for (index, tx) in begun.enumerated().reversed() where index >= prepared.count {
                saving[index].undoMoves(moves.count > index ? moves[index] : [])
                saving[index].store.abandonSave(tx, after: error)
            }
            throw error
        }
        var committed = 0
        do {
            for (part, save) in prepared {
                try part.commit(save)
                committed += 1
            }
        } catch {
            // Write gates go first, so that the committed parts' observers
            // (merges, notifications) may write to these stores.
            let owed = committed > 0 ? SaveMark.owed(by: prepared.map(\.save)) : nil
            for (part, save) in prepared[committed...] {
                part.abandon(save, after: error)
                if let owed { part.owedMark = owed }
            }
            var saved = SavedIdentifiers()
            for (part, save) in prepared[..<committed] {
                part.owedMark = nil
                saved.append(part.finish(save))
            }
            if committed > 0 { postDidSave(saved) }
            throw error
        }
        var saved = SavedIdentifiers()
        for (part, save) in prepared {
            part.owedMark = nil
            saved.append(part.finish(save))
        }
        postDidSave(saved)
    }
}
