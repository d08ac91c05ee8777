import Foundation
import StrataEngine

// `delete(model:where:)`: the matches a context holds are deleted as
// models, the other stored rows are marked by row id (`markedRows`) until
// the save deletes them or `rollback()` forgets them.

extension ModelContext {
    /// Deletes every model of `model` matching `predicate` (all of them when
    /// nil) at the next save, with their delete rules.
    ///
    /// Matches are found as a fetch with pending changes finds them. Those
    /// this context holds a model for (inserted, changed or loaded) are
    /// deleted as ``delete(_:)`` does; the other stored rows are marked by
    /// row id alone, without building models, so
    /// deleting a million rows costs their ids, not a million objects.
    /// Until the save, fetches leave them out, as they leave out deleted
    /// models. With `includeSubclasses` (the default) the models of
    /// `model`'s subclasses that match are deleted too; without it, only
    /// those whose class is `model` itself.
    ///
    /// - Throws: what a fetch of the same predicate throws (an unknown
    ///   model type, an unsupported predicate); nothing is marked then.
    public func delete<T: PersistentModel>(model: T.Type, where predicate: Predicate<T>? = nil, includeSubclasses: Bool = true)
        throws
    {
        guard parts.isEmpty else {
            return try partOrThrow(for: T.self).delete(model: model, where: predicate, includeSubclasses: includeSubclasses)
        }
        let entity = try entity(for: T.self)
        let descriptor = FetchDescriptor<T>(predicate: predicate)
        try descriptor.checkKeyPaths(of: entity)
        try mergeSavedChangesOrThrow()
        // The rows of `T`'s entity, and of its subentities unless told
        // not to, each stored in its own tree.
        let members = includeSubclasses ? entity.family.map(\.entity) : [entity]
        var models: [any PersistentModel] = []
        var rows: [(Schema.Entity, [Int64])] = []
        try store.read { tx in
            let snapshot = Snapshot(tx)
            for member in members {
                let query = try QueryRun(descriptor, entity: member, context: self, snapshot: snapshot)
                for model in try query.pendingMatches() { models.append(model) }
                var found: [Int64] = []
                try query.forEachMatch(registeredWithoutRecord: true) { row, _ in
                    if let model = registered(member, row: row) { models.append(model) } else { found.append(row) }
                    return true
                }
                if !found.isEmpty { rows.append((member, found)) }
            }
        }
        for model in models { deleteExistential(model) }
        guard !rows.isEmpty else { return }
        if markedRows.isEmpty { markedRows = Array(repeating: RowSet(), count: container.schema.entities.count) }
        for (member, found) in rows {
            markedRows[member.ordinal].reserve(markedRows[member.ordinal].count + found.count)
            for row in found where markedRows[member.ordinal].insert(row) { markedRowCount += 1 }
        }
        noteMutation()
    }

    /// Forgets ``markedRows`` (a save wrote them, or a rollback).
    func clearMarkedRows() {
        guard markedRowCount > 0 else { return }
        markedRows = []
        markedRowCount = 0
    }

    /// Builds the models of ``markedRows``; each joins ``deleted`` as it
    /// is materialized.
    func loadMarkedRows() {
        for entity in container.schema.entities where markedRows[entity.ordinal].count > 0 {
            for row in markedRows[entity.ordinal].sorted() { _ = try? loadExistential(entity.type, row: row) }
        }
    }
}
