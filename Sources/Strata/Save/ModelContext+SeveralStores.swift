import Foundation
import StrataEngine

// A save that changes models of several parts (one store per
// configuration, see Store/ModelContainer+Stores.swift) runs every part's
// checks and delete rules, posts `willSave` once, begins the parts' write
// transactions in store-identifier order (so two containers sharing the
// stores take the write locks in one order), writes them, and commits them
// one after the other. A failure before the first commit leaves every
// store unchanged. Each such save writes a mark to tree `strata.saves` of
// every store it writes: a number above the marks of every store (read
// inside the participants' transactions), and the stores it writes. A
// crash between two commits leaves a store whose mark names a store with
// an older mark; `checkIntegrity()` reports it, best effort (see "Several
// stores" in "Differences from SwiftData").

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
        SaveNotifications.post(ModelContext.willSave, of: self)
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
