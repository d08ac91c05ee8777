import Foundation
import StrataEngine

extension ModelContainer {
    /// Deletes every model of the container's store, in one transaction
    /// (SwiftData's `deleteAllData()`, which does not throw, calls it).
    ///
    /// The models go without delete rules, history entries or per-model
    /// work: every record, index, relationship, external-storage and
    /// history tree is emptied, and history tokens taken before it expire
    /// (``SwiftDataError/historyTokenExpired``). The store's schema and
    /// identifier stay. Row numbers restart from the highest stored row
    /// when the store is next opened, so an identifier from before may name
    /// a model inserted after that. Every context of
    /// the container merges the deletion at its next entry point: its
    /// registered models leave it, with `isDeleted` true.
    ///
    /// - Throws: ``SwiftDataError/readOnlyStore`` for a container whose
    ///   configuration does not allow saving; what the store throws when it
    ///   cannot be written (it is then unchanged).
    ///
    /// With several configurations, each writable store is emptied in its
    /// own transaction; a read-only one is left as it is.
    public func erase() throws {
        guard parts.isEmpty else {
            guard parts.contains(where: \.allowsSave) else {
                throw SwiftDataError(.readOnlyStore, "deleteAllData on read-only stores (allowsSave: false)")
            }
            for part in parts where part.allowsSave { try part.erase() }
            return
        }
        guard allowsSave, store.allowsSave else {
            throw SwiftDataError(.readOnlyStore, "deleteAllData on a read-only store (allowsSave: false)")
        }
        let schema = schema
        let deleted = try store.write { tx -> SavedChanges in
            var changes = SavedChanges.Builder(entityCount: schema.entities.count)
            for entity in schema.entities {
                guard let tree = try tx.treeIfPresent(entity.recordTree) else { continue }
                var rows: [Int64] = []
                try tx.forEach(tree) { key, _ in
                    if let row = try? RowKey.decode(key) { rows.append(row) }
                    return true
                }
                changes.delete(entity, rows: rows)
            }
            // Read before the history is cleared with the rest.
            let last = try HistoryLog.lastToken(tx)
            for name in try tx.treeNames() where Self.keptByDeleteAll.contains(name) == false {
                try tx.clear(try tx.tree(name))
            }
            // Every history token taken so far has expired, and none is
            // issued again: the counter is kept in `h.meta` (the greater
            // of the two counters counts).
            if last > 0 {
                let meta = try tx.treeIfPresent(HistoryLog.meta) ?? tx.createTree(HistoryLog.meta)
                try tx.put(HistoryLog.lastKey, RowKey.encode(last), in: meta)
                // A token expires when it is older than this mark: every
                // token taken so far, the last one included.
                try tx.put(HistoryLog.deletedKey, RowKey.encode(last + 1), in: meta)
            }
            return changes.build()
        }
        mergeHub.publish(deleted, from: nil)
    }

    /// ``erase()`` without throwing, as SwiftData declares it (SwiftData 18
    /// deprecates it for ``erase()``): when the store cannot be emptied
    /// (read-only, or an I/O error) it stays as it was, and the error is
    /// written to standard error. Call ``erase()`` to handle the error.
    public func deleteAllData() {
        do {
            try erase()
        } catch {
            FileHandle.standardError.write(Data("Strata: deleteAllData() left the store unchanged: \(error)\n".utf8))
        }
    }

    /// The trees that describe the store rather than hold models: the
    /// stored schema, the history's counters, the store's identity and the
    /// mark of the last save over several stores (``SaveMark``).
    private static let keptByDeleteAll: Set<String> = [
        StoredSchema.tree, HistoryLog.meta, Store.identityTree, SaveMark.tree,
    ]
}
